"""The ``tensorboard`` tracker: event files under ``<output>/tensorboard`` (tensorboardX,
no torch), one scalar per metric name and step.

    tensorboard --logdir /p/train/tiny-1a2b3c4d/tensorboard

The run's config and hardware go in as a text summary; the summary values as scalars at
the last logged step.
"""

from __future__ import annotations

import json
import numbers
from typing import Any

from marin.storage.files import join_url
from marin.trackers.config import TrackerConfig, TrackerRun

__all__ = ["FOLDER", "TensorboardTracker"]

FOLDER = "tensorboard"


class TensorboardTracker:
    def __init__(self, config: TrackerConfig, run: TrackerRun):
        from tensorboardX import SummaryWriter

        self.writer = SummaryWriter(logdir=join_url(run.output_path, FOLDER), flush_secs=30)
        self.writer.add_text("config", json.dumps({**run.config, "hardware": run.hardware},
                                                  indent=1, default=str))
        self.step = 0

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        self.step = step
        for name, value in metrics.items():
            if isinstance(value, numbers.Real) and not isinstance(value, bool):
                self.writer.add_scalar(name, value, global_step=step)

    def summary(self, values: dict[str, Any]) -> None:
        for name, value in values.items():
            if isinstance(value, numbers.Real) and not isinstance(value, bool):
                self.writer.add_scalar(f"summary/{name}", value, global_step=self.step)

    def finish(self) -> None:
        self.writer.close()
