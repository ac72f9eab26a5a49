"""The ``json`` tracker: Levanter's JSON-lines layout in ``<output>/tracker.jsonl``.

    {"tracker": "json_logger", "event": "hparams", "hparams": {...}}
    {"tracker": "json_logger", "event": "log", "step": 1, "metrics": {"train/loss": 9.2}}
    {"tracker": "json_logger", "event": "summary", "metrics": {"eval/loss": 6.1}}
    {"tracker": "json_logger", "event": "finish", "summary": {...}}

Lines are kept in memory and the file is rewritten whole (atomically) every
``FLUSH_EVERY`` records and at the end, so it is readable on any storage and never holds a
cut-off line. A resumed run keeps the earlier attempt's lines up to the step it resumed at.
"""

from __future__ import annotations

import json
from typing import Any

from marin.storage.files import atomic_write, join_url, open_url
from marin.trackers.config import TrackerConfig, TrackerRun

__all__ = ["FILE", "JsonTracker"]

FILE = "tracker.jsonl"
FLUSH_EVERY = 200
_NAME = "json_logger"  # Levanter's name for this tracker, in every line


class JsonTracker:
    def __init__(self, config: TrackerConfig, run: TrackerRun):
        self.path = join_url(run.output_path, FILE)
        self.lines: list[str] = []
        try:
            with open_url(self.path, "r") as f:
                self.lines = [line.rstrip("\n") for line in f if line.strip()]
        except FileNotFoundError:
            pass
        self.last: dict[str, Any] = {}
        self.summaries: dict[str, Any] = {}
        self._write({"event": "hparams", "hparams": {**run.config, "hardware": run.hardware}})

    def describe(self) -> dict[str, Any]:
        return {"file": FILE}

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        self.last.update(metrics)
        self._write({"event": "log", "step": step, "metrics": metrics})

    def summary(self, values: dict[str, Any]) -> None:
        self.summaries.update(values)
        self._write({"event": "summary", "metrics": values})

    def finish(self) -> None:
        self._write({"event": "finish", "summary": {**self.summaries, **self.last}})
        self._flush()

    def _write(self, record: dict[str, Any]) -> None:
        self.lines.append(json.dumps({"tracker": _NAME, **record}, default=str))
        if len(self.lines) % FLUSH_EVERY == 0:
            self._flush()

    def _flush(self) -> None:
        with atomic_write(self.path, "w") as f:
            f.writelines(line + "\n" for line in self.lines)
