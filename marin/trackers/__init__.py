"""Trackers: where a training run reports its metrics besides ``metrics.jsonl``.

    from marin.trackers import TrackerConfig
    TrainLmConfig(..., trackers=[TrackerConfig("json"), TrackerConfig("tensorboard"),
                                 TrackerConfig("wandb", project="isoflop")])

Trackers are plugins of the ``marin.trackers`` group (``marin plugins list`` shows them);
marin ships ``json`` (Levanter's JSON-lines layout, ``tracker.jsonl``), ``tensorboard``
(event files under ``tensorboard/``) and ``wandb`` (offline without credentials, into
``wandb/``; ``wandb sync`` uploads it later). A third party adds one with an entry point::

    [project.entry-points."marin.trackers"]
    mlflow = "my_package.trackers:MlflowTracker"

A tracker is a class built as ``cls(config: TrackerConfig, run: TrackerRun)`` with
``log(step, metrics)``, ``summary(values)`` and ``finish()``, and optionally a classmethod
``check(config)`` that returns a one-line complaint about bad settings (or None), asked
before the run starts, and ``describe()`` for the run's ``trackers.json``. Trackers run in a
process of their own (``marin.trackers.process``); training never waits on a tracker nor
stops for one: see ``marin.trackers.fanout``.
"""

from __future__ import annotations

from typing import Any, Protocol

from marin import registry
from marin._lazy import lazy_exports

_EXPORTS = {
    "TrackerConfig": "marin.trackers.config",
    "TrackerConfigError": "marin.trackers.config",
    "TrackerRun": "marin.trackers.config",
    "Trackers": "marin.trackers.fanout",
    "check_trackers": "marin.trackers.fanout",
}

__all__ = sorted([*_EXPORTS, "Tracker"])

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)


class Tracker(Protocol):
    """What a ``marin.trackers`` plugin builds: ``cls(config, run)``."""

    def log(self, step: int, metrics: dict[str, Any]) -> None: ...

    def summary(self, values: dict[str, Any]) -> None: ...

    def finish(self) -> None: ...


registry.declare_group("marin.trackers",
                       expected="a tracker class with log, summary and finish methods",
                       fits=registry.has_methods("log", "summary", "finish", classes_only=True))
