"""Run folders as rows for the fits: marin's own outputs, Marin's ``tracker_metrics.jsonl``,
Levanter's JSON logger and W&B run exports.

    rows = read_run_folders("local_store/train")                       # a folder of runs
    rows = read_run_folders("exports/c4", metric="eval/paloma/c4_en/bpb", label="c4")
    layout_of("wandb-exports/run-1")                                   # "wandb" (or None)

Each layout is recognised by a file in the run's folder, tried in this order (the first
found is read, so a marin run that also logged to trackers reads from its own files):

==============  ======================================================================
``marin-study`` ``outcome.json``: a study's candidate (its label, budget and status)
``marin``       ``summary.json``: marin's trainer (``RunSummary``)
``marin-wandb`` ``tracker_metrics.jsonl``: Marin's copy of a W&B run, lines with
                ``config``, ``summary`` and optionally ``history`` (or JSON logger events)
``levanter``    ``tracker.jsonl``: Levanter's JSON logger (``event`` lines)
``wandb``       ``wandb-summary.json`` (or ``files/wandb-summary.json``), with an
                optional history (``wandb-history.jsonl``, ``history.jsonl`` or
                ``history.json``: JSON lines or a list, records with ``_step``) and
                ``config.json``
==============  ======================================================================

The last three name figures as Levanter does: ``parameter_count``,
``throughput/total_tokens``, ``throughput/total_gflops`` and the metric (``eval/loss``,
``eval/paloma/c4_en/bpb``...); a figure missing from the summary is the last value of it
in the history. A metric is named either way: ``macro_bpb`` or ``plays/loss`` as a study
names it, or Levanter's ``eval/macro_bpb``, ``eval/plays/loss``; any other key of the
summary (``train/loss``) also works.

A run's label is ``label=`` when given, else the study's label (``outcome.json``), else the
W&B group in the run's config (``group``, or ``trainer.tracker.group`` as Levanter nests
it), else the name of the folder the run's folder is in (``sweep/c4/run-1`` is ``c4``).
Its budget is the planned one for a study's candidate, else its FLOPs rounded to one
significant figure, as Marin groups runs (``flops_bucket``).

A folder without a layout of its own is read as a folder of runs, one level down
(subfolders of no known layout, such as a study's ``fit-*`` step, are passed over).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from marin.scaling_laws.budgets import flops_bucket
from marin.scaling_laws.codec import ArtifactError
from marin.scaling_laws.outcome import OUTCOME, read_outcome
from marin.scaling_laws.run_status import RunStatus
from marin.scaling_laws.values import RunRow
from marin.storage.files import join_url, open_url, url_of, url_to_fs
from marin.training import metric_names as names
from marin.training.summary import SUMMARY, SummaryError, read_summary

__all__ = ["LAYOUTS", "RunFolderError", "layout_of", "read_run_folder", "read_run_folders"]

MARIN_TRACKER = "tracker_metrics.jsonl"
LEVANTER_TRACKER = "tracker.jsonl"
WANDB_SUMMARY = "wandb-summary.json"
WANDB_HISTORY = ("wandb-history.jsonl", "history.jsonl", "history.json")
WANDB_CONFIG = "config.json"


class RunFolderError(ValueError):
    """A run folder cannot be read; the message names the file and the fix."""


@dataclass
class _Tracked:
    """A run as a tracker recorded it: its config, summary and history (Levanter's names)."""

    where: str
    config: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)

    def value(self, key: str) -> Any:
        if self.summary.get(key) is not None:
            return self.summary[key]
        steps = [r for r in self.history if r.get(key) is not None]
        return max(steps, key=_step)[key] if steps else None

    def figures(self) -> list[str]:
        return sorted({k for r in (self.summary, *self.history) for k, v in r.items()
                       if isinstance(v, (int, float)) and not k.startswith("_")})


def _step(record: Mapping[str, Any]) -> float:
    step = record.get("_step", record.get("step"))
    return float(step) if isinstance(step, (int, float)) else -math.inf


# -- files -----------------------------------------------------------------------------------

def _text(url: str) -> str | None:
    try:
        with open_url(url, "r") as f:
            return f.read()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as e:
        raise RunFolderError(f"cannot read {url}: {e}") from None


def _object(url: str, value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise RunFolderError(f"{url}: {what} must be a JSON object, got "
                             f"{type(value).__name__}")
    return value


def _json(url: str) -> Any:
    text = _text(url)
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError as e:
        raise RunFolderError(f"{url} is not valid JSON ({e}); export the run again") from None


def _json_lines(url: str, text: str) -> list[dict[str, Any]]:
    records = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as e:
            raise RunFolderError(f"{url}, line {number}: not valid JSON ({e}); each line "
                                 "must be one JSON object") from None
        records.append(_object(f"{url}, line {number}", record, "a line"))
    return records


def _records(url: str) -> list[dict[str, Any]] | None:
    """A history file: JSON lines, or one JSON list of records."""
    text = _text(url)
    if text is None:
        return None
    if text.lstrip().startswith("["):
        data = _json(url)
        return [_object(url, r, "each record of the list") for r in data]
    return _json_lines(url, text)


# -- the layouts -----------------------------------------------------------------------------

def _tracker_file(name: str) -> Callable[[str], _Tracked]:
    """A tracker's JSON lines: Marin's records (``config``, ``summary``, optionally
    ``history``; a later line adds to an earlier) or Levanter's JSON logger events
    (``hparams``, ``log``, ``summary``, ``finish``), in either file."""
    def read(folder: str) -> _Tracked:
        url = join_url(folder, name)
        run = _Tracked(url)
        for record in _json_lines(url, _text(url) or ""):
            if "event" in record:
                _event(url, run, record)
                continue
            run.config.update(_object(url, record.get("config", {}), "config"))
            run.summary.update(_object(url, record.get("summary", {}), "summary"))
            history = record.get("history", [])
            if not isinstance(history, list):
                raise RunFolderError(f"{url}: history must be a list of records")
            run.history += [_object(url, r, "each history record") for r in history]
        if not run.summary and not run.history:
            raise RunFolderError(f"{url} holds no figures: a line is "
                                 '{"config": {...}, "summary": {...}} or a JSON logger event; '
                                 "write it again after the run")
        return run
    return read


def _event(url: str, run: _Tracked, record: dict[str, Any]) -> None:
    event = record["event"]
    if event == "hparams":
        run.config.update(_object(url, record.get("hparams", {}), "hparams"))
    elif event == "log":
        run.history.append({"_step": record.get("step"), **_object(
            url, record.get("metrics", {}), "metrics")})
    elif event in ("summary", "finish"):
        key = "metrics" if event == "summary" else "summary"
        run.summary.update(_object(url, record.get(key, {}), key))


def _from_wandb(folder: str) -> _Tracked:
    base = folder if _is_file(join_url(folder, WANDB_SUMMARY)) else join_url(folder, "files")
    url = join_url(base, WANDB_SUMMARY)
    run = _Tracked(url, summary=_object(url, _json(url), "the summary"))
    for name in WANDB_HISTORY:
        history = _records(join_url(base, name))
        if history is not None:
            run.history = history
            break
    config = _json(join_url(base, WANDB_CONFIG))
    if config is not None:  # W&B's own files wrap each entry as {"value": ...}
        config = _object(join_url(base, WANDB_CONFIG), config, "the config")
        run.config = {k: v["value"] if isinstance(v, dict) and set(v) <= {"value", "desc"}
                      and "value" in v else v for k, v in config.items()}
    return run


def _tracked_row(run: _Tracked, name: str, parent: str, metric: str,
                 label: str | None) -> RunRow:
    run.summary = names.canonical(run.summary)
    run.history = [names.canonical(r) for r in run.history]

    def needed(key: str, what: str) -> float:
        value = run.value(key)
        if not isinstance(value, (int, float)):
            raise RunFolderError(f"{run.where}: no {key} in its summary or history; the run "
                                 f"must log {what} under Levanter's name {key}")
        return float(value)

    params = needed(names.PARAMETER_COUNT, "its parameter count")
    tokens = needed(names.TOTAL_TOKENS, "the tokens it trained on")
    flops = needed(names.TOTAL_GFLOPS, "its training FLOPs (in GFLOPs)") * 1e9
    key = next((k for k in _metric_keys(metric) if run.value(k) is not None), None)
    if key is None:
        present = [k for k in run.figures() if k.startswith("eval/")] or run.figures()
        raise RunFolderError(f"{run.where}: no metric {metric!r}; it has "
                             f"{', '.join(present) or 'no figures'}: pass one with --metric")
    train = run.value(names.TRAIN_LOSS)
    return RunRow(run=name, label=label or _group(run.config) or parent,
                  budget=_bucket(flops), params=params, tokens=tokens, flops=flops,
                  loss=float(run.value(key)),
                  train_loss=float(train) if isinstance(train, (int, float)) else None)


def _metric_keys(metric: str) -> list[str]:
    short = metric.removeprefix("eval/")
    return list(dict.fromkeys([metric, names.eval_name(None, short)]))


def _group(config: Mapping[str, Any]) -> str | None:
    tracker = (config.get("trainer") or {}).get("tracker") if isinstance(
        config.get("trainer"), dict) else None
    for group in (config.get("group"), tracker.get("group") if isinstance(tracker, dict)
                  else None):
        if isinstance(group, str) and group:
            return group
    return None


def _bucket(flops: float) -> float | None:
    return flops_bucket(flops) if math.isfinite(flops) and flops > 0 else None


def _marin_row(folder: str, name: str, parent: str, metric: str, label: str | None) -> RunRow:
    try:
        summary = read_summary(folder)
    except SummaryError as e:
        raise RunFolderError(str(e)) from None
    value = _summary_metric(summary, join_url(folder, SUMMARY), metric)
    flops = summary.trained_flops  # a branch's point: its parent's prefix included
    return RunRow(run=name, label=label or parent, budget=_bucket(flops),
                  params=float(summary.params), tokens=float(summary.tokens),
                  flops=float(flops), loss=value, train_loss=summary.train_loss,
                  parent_run=summary.parent_run, branch_step=summary.branch_step)


def _study_row(folder: str, name: str, parent: str, metric: str, label: str | None) -> RunRow:
    from dataclasses import replace

    try:
        outcome = read_outcome(folder)
    except ArtifactError as e:
        raise RunFolderError(str(e)) from None
    if outcome.summary is not None and outcome.status is RunStatus.OK:
        _summary_metric(outcome.summary, join_url(folder, OUTCOME), metric)
    row = outcome.row(metric.removeprefix("eval/"), folder)
    return replace(row, label=label) if label else row


def _summary_metric(summary: Any, where: str, metric: str) -> float:
    short = metric.removeprefix("eval/")
    try:
        value = summary.metric(short)
    except ValueError:
        value = None
    if value is None:
        present = ["loss", "bpb"] if summary.eval_loss is not None else []
        present += (["macro_loss", "macro_bpb"] if summary.macro_loss is not None else [])
        present += [f"{s}/{q}" for s in summary.evals for q in ("loss", "bpb")]
        present += [names.task_name(t, q) for t in summary.tasks
                    for q in names.TASK_QUANTITIES]
        raise RunFolderError(f"{where}: no metric {metric!r}; it has "
                             f"{', '.join(present) or 'no eval figures'}: pass one with "
                             "--metric")
    return float(value)


def _tracked(read: Callable[[str], _Tracked]) -> Callable[..., RunRow]:
    def row(folder: str, name: str, parent: str, metric: str, label: str | None) -> RunRow:
        return _tracked_row(read(folder), name, parent, metric, label)
    return row


@dataclass(frozen=True)
class _Layout:
    name: str
    markers: tuple[str, ...]  # a file of any of these names marks the layout
    row: Callable[..., RunRow]


_LAYOUTS = (
    _Layout("marin-study", (OUTCOME,), _study_row),
    _Layout("marin", (SUMMARY,), _marin_row),
    _Layout("marin-wandb", (MARIN_TRACKER,), _tracked(_tracker_file(MARIN_TRACKER))),
    _Layout("levanter", (LEVANTER_TRACKER,), _tracked(_tracker_file(LEVANTER_TRACKER))),
    _Layout("wandb", (WANDB_SUMMARY, f"files/{WANDB_SUMMARY}"), _tracked(_from_wandb)),
)
#: each layout's name and the files that mark it, in the order they are tried
LAYOUTS: tuple[tuple[str, tuple[str, ...]], ...] = tuple((x.name, x.markers) for x in _LAYOUTS)


# -- folders ---------------------------------------------------------------------------------

def _is_file(url: str) -> bool:
    fs, path = url_to_fs(url)
    return fs.isfile(path)


def _layout(folder: str) -> _Layout | None:
    return next((x for x in _LAYOUTS if any(_is_file(join_url(folder, m)) for m in x.markers)),
                None)


def layout_of(folder: str) -> str | None:
    """The name of the layout ``folder`` is read as; None when it has none of them."""
    found = _layout(folder)
    return None if found is None else found.name


def _looked_for() -> str:
    return ", ".join(m for _, markers in LAYOUTS for m in markers)


def _names(url: str) -> tuple[str, str]:
    """The run's name (its folder's) and the name of the folder it is in."""
    if "://" not in url:
        url = os.path.abspath(url)
    parts = url.rstrip("/").split("/")
    return parts[-1], parts[-2] if len(parts) > 1 else "default"


def read_run_folder(folder: str, metric: str = "loss", label: str | None = None) -> RunRow:
    """The row of one run's folder, in whichever layout it has."""
    layout = _layout(folder)
    if layout is None:
        raise RunFolderError(f"{folder} is not a run folder: none of {_looked_for()} is in it; "
                             "give a run's output folder, a folder of them or a results table")
    name, parent = _names(folder)
    return layout.row(folder, name, parent, metric, label)


def read_run_folders(folder: str, metric: str = "loss", label: str | None = None
                     ) -> list[RunRow]:
    """The run in ``folder``, or each run in its subfolders (one level), in name order."""
    folder = folder.rstrip("/") or "/"
    if _layout(folder) is not None:
        return [read_run_folder(folder, metric, label)]
    fs, path = url_to_fs(folder)
    try:
        entries = fs.ls(path, detail=True)
    except FileNotFoundError:
        raise RunFolderError(f"{folder} does not exist; give a run folder, a folder of runs "
                             "or a results table") from None
    subfolders = sorted(url_of(fs, e["name"]) for e in entries if e.get("type") == "directory")
    runs = [sub for sub in subfolders if _layout(sub) is not None]
    if not runs:
        raise RunFolderError(f"{folder} holds no run: none of {_looked_for()} is in it or in "
                             "its subfolders; give a run's output folder, a folder of them "
                             "or a results table")
    return [read_run_folder(sub, metric, label) for sub in runs]

