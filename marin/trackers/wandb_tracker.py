"""The ``wandb`` tracker: a W&B run per step, online with credentials, else offline.

    TrackerConfig("wandb", project="isoflop", group="study-1")
    # offline: <output>/wandb/offline-run-<time>-<id>/; upload it later with
    #   wandb sync /p/train/tiny-1a2b3c4d/wandb/offline-run-*

The run's id is made of the step's key and W&B is asked to resume it (``resume="allow"``),
so a preempted step that resumes continues its W&B run instead of starting a new one. The
group and name default to the step's folder and name (a study's run names); the config
holds the run's configuration and hardware, the summary the run's final figures.

Online means ``WANDB_API_KEY`` is set, or ``mode="online"``, or W&B's own ``WANDB_MODE``.
"""

from __future__ import annotations

import os
import re
from typing import Any

from marin.trackers.config import TrackerConfig, TrackerRun

__all__ = ["FOLDER", "WandbTracker", "wandb_mode"]

FOLDER = "wandb"
_MODES = ("online", "offline", "disabled")
_FORBIDDEN = re.compile(r"[/\\#?%:]")


def wandb_mode(config: TrackerConfig) -> str:
    if config.mode is not None:
        return config.mode
    if os.environ.get("WANDB_MODE") in _MODES:
        return os.environ["WANDB_MODE"]
    return "online" if os.environ.get("WANDB_API_KEY") else "offline"


class WandbTracker:
    @classmethod
    def check(cls, config: TrackerConfig) -> str | None:
        for field in ("project", "entity"):
            value = getattr(config, field)
            if value is None and field == "entity":
                continue
            if not value or len(value) > 128 or _FORBIDDEN.search(value):
                return (f"{field}={value!r} is not a valid W&B {field} name: use 1 to 128 "
                        "characters without / \\ # ? % : (for example 'isoflop-study')")
        if config.mode is not None and config.mode not in _MODES:
            return f"mode={config.mode!r} is not one of {', '.join(_MODES)}"
        return None

    def __init__(self, config: TrackerConfig, run: TrackerRun):
        import wandb

        local = run.output_path.removeprefix("file://")
        if "://" in local:
            raise ValueError(f"W&B writes its run folder locally, and {run.output_path} is not "
                             "local; give the run a local output path")
        os.makedirs(local, exist_ok=True)  # W&B writes <local>/wandb/offline-run-*
        self.local = local
        self.config = config
        self.mode = wandb_mode(config)
        self.run = wandb.init(
            project=config.project, entity=config.entity, group=config.group or run.group,
            name=config.name or run.name, id=run.run_id(), resume="allow",
            tags=list(config.tags), mode=self.mode, dir=local,
            config={**run.config, "hardware": run.hardware}, reinit="create_new",
            settings=wandb.Settings(console="off", silent=True, x_disable_stats=True))
        # read once, at the start: asked after finish(), they cost the run its last history
        # row (wandb 0.31, offline)
        folder = os.path.dirname(self.run.dir.rstrip("/")) if self.run.dir else None
        self.details = {
            "project": self.run.project or config.project,
            "entity": self.run.entity or config.entity, "id": self.run.id, "mode": self.mode,
            "group": self.run.group, "name": self.run.name,
            "run_folder": os.path.relpath(folder, local) if folder else None}

    def describe(self) -> dict[str, Any]:
        """What the dashboard links: the run's project, entity, id and mode, and its local
        run folder relative to the run's output (what ``wandb sync`` uploads)."""
        return dict(self.details)

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        self.run.log(metrics, step=step)

    def summary(self, values: dict[str, Any]) -> None:
        self.run.summary.update(values)

    def finish(self) -> None:
        self.run.finish()
