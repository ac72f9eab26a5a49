"""A run's trackers as the dashboard shows them: from the run's ``trackers.json`` or, before
the run wrote one, from its config. For W&B: the run's page when its entity and project are
known, and for an offline run its folder and the ``wandb sync`` command that uploads it.

    views = step_trackers(reader, key, files, info, output_path)   # a step's page
    views = tracker_views(record, config, "/p/train/tiny-1a2b3c4d")
    views[0].type, views[0].link      # "wandb", "https://wandb.ai/team/iso/runs/train-tiny-1a2b3c4d"
    views[0].folder, views[0].sync    # the offline run's folder, "wandb sync '/p/...'"

Everything here comes from files that anyone who can write to the prefix can change, so
none of it is trusted: a link is built from W&B's fixed origin with each part
percent-encoded, after the entity and project are checked as W&B names and the run id
against W&B's alphabet; a folder must be a plain relative path under the run's output; the
command is shell-quoted. The templates escape every text.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from marin.dashboard.outputs import read_json_file, read_json_files
from marin.trackers.config import TrackerRun
from marin.trackers.record import FILE, TrackerEntry, read_record

__all__ = ["WANDB", "TrackerView", "runs_trackers", "step_trackers", "tracker_views",
           "wandb_url"]

WANDB = "https://wandb.ai"
_RUN_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_NAME = re.compile(r"[^/\\#?%:\x00-\x1f\x7f]{1,128}")  # a W&B entity or project
_FOLDER_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")


@dataclass(frozen=True)
class TrackerView:
    """One tracker of a run: ``source`` is ``recorded`` (the run's trackers.json) or
    ``configured`` (its config; the run has written no record yet)."""

    type: str
    source: str
    link: str | None = None
    folder: str | None = None
    sync: str | None = None
    note: str | None = None


def wandb_url(entity: Any, project: Any, run_id: Any) -> str | None:
    """``https://wandb.ai/ENTITY/PROJECT/runs/ID``, or None unless all three are valid."""
    if not (isinstance(entity, str) and _NAME.fullmatch(entity) and isinstance(project, str)
            and _NAME.fullmatch(project) and isinstance(run_id, str)
            and _RUN_ID.fullmatch(run_id)):
        return None
    return f"{WANDB}/{quote(entity, safe='')}/{quote(project, safe='')}/runs/{run_id}"


def step_trackers(reader: Any, key: str, files: Sequence[str], info: Mapping[str, Any] | None,
                  output_path: str) -> list[TrackerView]:
    """A step's trackers, from its ``trackers.json`` (when its output has one) or its
    info's config."""
    record = read_json_file(reader, key, FILE) if FILE in files else None
    return tracker_views(record, (info or {}).get("config"), output_path)


def runs_trackers(reader: Any, runs: Sequence[Any], configs: Mapping[str, Any]
                  ) -> dict[str, list[TrackerView]]:
    """Each listed run's trackers (``StepView``s), their records read together."""
    records = read_json_files(reader, [s.key for s in runs], FILE)
    return {s.key: tracker_views(records.get(s.key), configs.get(s.key), s.output_path)
            for s in runs}


def tracker_views(record: Mapping[str, Any] | None, config: Mapping[str, Any] | None,
                  output_path: str) -> list[TrackerView]:
    """The views of a run's trackers (none when it has no tracker)."""
    entries = read_record(record) if record else []
    if entries:
        return [_recorded(e, output_path) for e in entries]
    return [_configured(c, output_path) for c in _configured_trackers(config)]


def _recorded(entry: TrackerEntry, output_path: str) -> TrackerView:
    kind = entry.type[:64]
    if entry.failed:
        return TrackerView(kind, "recorded", note=entry.failed[:500])
    if kind != "wandb":
        where = entry.details.get("file") or entry.details.get("folder")
        return TrackerView(kind, "recorded", folder=_under(output_path, where))
    d = entry.details
    mode = d.get("mode") if d.get("mode") in ("online", "offline", "disabled") else None
    link = wandb_url(d.get("entity"), d.get("project"), d.get("id"))
    folder = _under(output_path, d.get("run_folder"))
    if mode == "disabled":
        return TrackerView(kind, "recorded", note="W&B was disabled for this run")
    if mode == "online":
        return TrackerView(kind, "recorded", link=link, note=None if link else
                           "online, but its entity or project is not known")
    sync = f"wandb sync {shlex.quote(folder)}" if folder else None
    note = "offline: upload it with the command" + (
        "; the link works once it is uploaded" if link else
        " (its page's address needs the entity, which the run did not know)")
    return TrackerView(kind, "recorded", link=link, folder=folder, sync=sync, note=note)


def _configured(config: Mapping[str, Any], output_path: str) -> TrackerView:
    kind = str(config.get("type") or "json")[:64]
    if kind != "wandb":
        return TrackerView(kind, "configured", note="no trackers.json yet")
    run_id = TrackerRun.of(output_path).run_id()  # the id the tracker gives the step's run
    link = wandb_url(config.get("entity"), config.get("project"), run_id)
    return TrackerView(kind, "configured", link=link,
                       note="no trackers.json yet: the link holds if the run went online")


def _configured_trackers(config: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    """The ``trackers`` of a training step's config (a ``TrainLmConfig``, or a study run's
    ``train``)."""
    if not isinstance(config, Mapping):
        return []
    trackers = config.get("trackers")
    if trackers is None and isinstance(config.get("train"), Mapping):
        trackers = config["train"].get("trackers")
    if not isinstance(trackers, list):
        return []
    return [t if isinstance(t, Mapping) else {"type": str(t)} for t in trackers
            if isinstance(t, (Mapping, str))][:16]


def _under(output_path: str, relative: Any) -> str | None:
    """``output_path/relative`` when ``relative`` is plain parts (no ``..``, no root)."""
    if not isinstance(relative, str):
        return None
    parts = relative.split("/")
    if not parts or len(parts) > 8 or not all(_FOLDER_PART.fullmatch(p) for p in parts):
        return None
    return f"{output_path.rstrip('/')}/{relative}"
