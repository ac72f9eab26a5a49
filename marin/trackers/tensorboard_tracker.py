"""The ``tensorboard`` tracker: event files under ``<output>/tensorboard`` (tensorboardX,
no torch), one scalar per metric name and step, all of a step's scalars in one event.

    tensorboard --logdir /p/train/tiny-1a2b3c4d/tensorboard

The run's config and hardware go in as a text summary; the summary values as scalars at
the last logged step.

Design note: ``SummaryWriter.add_scalar`` builds and queues one event per scalar, and a
step logs about ten; one ``Summary`` holding them all is one event, which keeps the
writer's work per step small beside a tiny model's step.
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
        from tensorboardX import FileWriter
        from tensorboardX.summary import text

        self.writer = FileWriter(join_url(run.output_path, FOLDER), flush_secs=30)
        self.writer.add_summary(text("config", json.dumps(
            {**run.config, "hardware": run.hardware}, indent=1, default=str)))
        self.step = 0

    def describe(self) -> dict[str, Any]:
        return {"folder": FOLDER}

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        self.step = step
        self._scalars(metrics, "", step)

    def summary(self, values: dict[str, Any]) -> None:
        self._scalars(values, "summary/", self.step)

    def finish(self) -> None:
        self.writer.close()

    def _scalars(self, values: dict[str, Any], prefix: str, step: int) -> None:
        from tensorboardX.proto.summary_pb2 import Summary

        scalars = [Summary.Value(tag=prefix + name, simple_value=float(value))
                   for name, value in values.items()
                   if isinstance(value, numbers.Real) and not isinstance(value, bool)]
        if scalars:
            self.writer.add_summary(Summary(value=scalars), global_step=step)
