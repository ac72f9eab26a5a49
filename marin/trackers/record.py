"""Which trackers a run reported to, and where: ``trackers.json`` in the run's output.

    write_record(run.output_path, [TrackerEntry("wandb", {"project": "iso", "id": "a-b"})],
                 started_at=time.time())
    entries = read_record(json.loads(text))    # [TrackerEntry(type, details, failed)]
    started_at(json.loads(text))               # when the trackers were all started

``marin.trackers.fanout`` writes it once the trackers have started and again when they have
finished, from what each tracker's optional ``describe()`` returns (W&B: project, entity,
run id, mode, the offline run's folder relative to the run's output). The dashboard reads it
to show a run's trackers and link its W&B run. Older runs have none.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from marin.storage.files import atomic_write, join_url

__all__ = ["FILE", "TrackerEntry", "read_record", "started_at", "write_record"]

FILE = "trackers.json"
FORMAT = "marin.trackers"
VERSION = 1


@dataclass(frozen=True)
class TrackerEntry:
    """One tracker of a run: its ``type``, what it says of itself (JSON-able), and the
    one-line failure that left it out of the run, if it failed."""

    type: str
    details: dict[str, Any] = field(default_factory=dict)
    failed: str | None = None


def write_record(output_path: str, entries: Sequence[TrackerEntry],
                 started_at: float | None = None) -> None:
    data = {"format": FORMAT, "version": VERSION, "started_at": started_at,
            "trackers": [{"type": e.type, "details": e.details, "failed": e.failed}
                         for e in entries]}
    text = json.dumps(data, indent=1, default=str)
    with atomic_write(join_url(output_path, FILE), "w") as f:
        f.write(text)


def started_at(data: Any) -> float | None:
    """The time (``time.time()``) the trackers had all started, if recorded."""
    value = data.get("started_at") if isinstance(data, dict) else None
    return float(value) if isinstance(value, (int, float)) else None


def read_record(data: Any) -> list[TrackerEntry]:
    """The entries of a parsed ``trackers.json``; anything malformed is left out."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return []
    out = []
    for item in data.get("trackers") or ():
        if not isinstance(item, dict) or not isinstance(item.get("type"), str):
            continue
        details = item.get("details")
        failed = item.get("failed")
        out.append(TrackerEntry(item["type"], details if isinstance(details, dict) else {},
                                failed if isinstance(failed, str) else None))
    return out
