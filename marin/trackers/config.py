"""What a training run tells its trackers: which ones, and about which run.

    TrainLmConfig(..., trackers=[TrackerConfig("json"), TrackerConfig("wandb", project="iso")])
    run = TrackerRun.of("/p/train/tiny-1a2b3c4d/.attempts/r1", config={...})
    run.key, run.name, run.group        # "train/tiny-1a2b3c4d", "tiny-1a2b3c4d", "train"

A run is named after its step: the attempt folder an executor hands the step is left out,
so every attempt of one step (a preempted run and its resumption) is the same run to a
tracker, and W&B continues it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, ClassVar

__all__ = ["TrackerConfig", "TrackerConfigError", "TrackerRun"]

_ATTEMPTS = "/.attempts/"


class TrackerConfigError(ValueError):
    """A tracker that does not exist, or whose settings it refuses."""


@dataclass(frozen=True)
class TrackerConfig:
    """One tracker of a run.

    Attributes:
        type: the tracker's name in the ``marin.trackers`` plugin group (``json``,
            ``tensorboard``, ``wandb``, or a third party's).
        project: the W&B project (default ``marin``).
        entity: the W&B entity (None: the account's default).
        group: the run's group (None: the step's folder, e.g. the study's).
        name: the run's name (None: the step's name with its hash).
        tags: labels for the run.
        mode: W&B's mode (None: ``online`` when credentials are set, else ``offline``).

    A bare name stands for ``TrackerConfig(name)``, in Python and in a command-line override
    (``--train/tiny.trackers '["json", {"type": "wandb", "project": "iso"}]'``): the
    overrides read ``BARE_NAME_FIELD``.
    """

    BARE_NAME_FIELD: ClassVar[str] = "type"

    type: str = "json"
    project: str = "marin"
    entity: str | None = None
    group: str | None = None
    name: str | None = None
    tags: tuple[str, ...] = ()
    mode: str | None = None


@dataclass(frozen=True)
class TrackerRun:
    """The run a tracker reports on.

    Attributes:
        output_path: the folder the run writes (trackers that write files write there).
        key: the step's key, the same for every attempt of the step.
        name: the run's name (the key's last part).
        group: the key's folder ("" at the top).
        config: the run's configuration, JSON-able.
        hardware: the preset, the devices and their kind.
    """

    output_path: str
    key: str
    name: str
    group: str
    config: dict[str, Any] = field(default_factory=dict)
    hardware: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, output_path: str, config: dict[str, Any] | None = None,
           hardware: dict[str, Any] | None = None) -> TrackerRun:
        step_output = output_path.split(_ATTEMPTS)[0].rstrip("/")
        parts = [p for p in re.split(r"[/\\]", step_output.split("://")[-1]) if p]
        key = "/".join(parts[-2:]) if parts else "run"
        name = parts[-1] if parts else "run"
        group = parts[-2] if len(parts) > 1 else ""
        return cls(output_path, key, name, group, dict(config or {}), dict(hardware or {}))

    def run_id(self) -> str:
        """An id made of the key: letters, digits, ``-`` and ``_``, at most 64."""
        ident = re.sub(r"[^A-Za-z0-9_-]", "-", self.key)
        if len(ident) > 64:
            import hashlib

            ident = ident[-55:] + "-" + hashlib.sha256(self.key.encode()).hexdigest()[:8]
        return ident
