"""What the training loop does besides stepping: metrics, evaluation, profiles, progress.

    metrics = MetricsLog(join_url(out, "metrics.jsonl"), log_every=50)
    hooks = [Every(100, evaluate_hook), metrics_hook, Every(1000, checkpoint_hook)]
    for hook in hooks:
        hook(done, state, record)          # after each step, in order

A hook is any callable ``(done, state, record)``: ``done`` is the number of steps taken,
``state`` the ``TrainerState`` after them, ``record`` the step's metrics (a dict a hook may
add to: evaluation, ``marin.training.evaluation.Validation.hook``, adds ``eval/loss`` before
the metrics hook stores the record). ``Every(n, hook)`` runs ``hook`` when ``done`` is a
multiple of ``n`` (never when ``n`` is 0).
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

import jax
import jax.numpy as jnp

from marin.services.log_service.handler import METRICS_LOGGER
from marin.storage.files import atomic_write, open_url
from marin.trackers.config import TrackerRun
from marin.trackers.fanout import Trackers
from marin.trackers.process import TrackerProcess, start_trackers
from marin.training import metric_names as names

logger = logging.getLogger("marin.training")
_metrics_logger = logging.getLogger(METRICS_LOGGER)

Hook = Callable[[int, Any, dict[str, Any]], None]


@dataclass(frozen=True)
class Every:
    """Run ``hook`` after every ``every``-th step and after each step of ``at``, except at
    ``until`` (the end, which the trainer handles once for every hook); ``every`` 0: only
    at ``at``."""

    every: int
    hook: Hook
    until: int | None = None
    at: frozenset[int] = frozenset()

    def __call__(self, done: int, state: Any, record: dict[str, Any]) -> None:
        if ((self.every and done % self.every == 0) or done in self.at) and \
                done != self.until:
            self.hook(done, state, record)


class MetricsLog:
    """metrics.jsonl: kept in memory and rewritten whole at checkpoints and at the end;
    each record also goes to the run's trackers, as it is stored. With ``primary`` False
    (a multi-host run's other hosts) the records are kept but go nowhere."""

    def __init__(self, path: str, log_every: int,
                 trackers: Trackers | TrackerProcess | None = None, primary: bool = True):
        self.path = path
        self.primary = primary
        self.trackers = trackers or Trackers([])
        self.records: list[dict[str, Any]] = []
        self.log_every = max(1, log_every)
        try:
            with open_url(self.path, "r") as f:  # an older run's file may use older names
                self.records = [names.canonical(json.loads(line)) for line in f
                                if line.strip()]
        except FileNotFoundError:
            pass

    def truncate(self, step: int) -> None:
        self.records = [r for r in self.records if r["step"] <= step]

    def add(self, record: dict[str, Any]) -> None:
        self.records.append(record)
        if not self.primary:
            return
        # one structured entry in the log service when $MARIN_LOGGER is set; else nothing
        _metrics_logger.info("metrics", extra=record)
        self.trackers.log(record["step"], {k: v for k, v in record.items() if k != "step"})
        if names.TRAIN_LOSS in record and record["step"] % self.log_every == 0:
            logger.info("step %d loss %.4f %.0f tok/s mfu %.1f%%", record["step"],
                        record[names.TRAIN_LOSS], record[names.TOKENS_PER_SECOND],
                        100 * record[names.MFU])

    def hook(self, done: int, state: Any, record: dict[str, Any]) -> None:
        self.add(record)

    def flush(self) -> None:
        if not self.primary:
            return
        # whole or not at all: a reader (the dashboard, a fit) never sees a cut-off line
        with atomic_write(self.path, "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in self.records)

    def train_losses(self) -> list[float]:
        return [r[names.TRAIN_LOSS] for r in self.records if names.TRAIN_LOSS in r]


class Profiler:
    """A JAX profile (XPlane) of steps [first, last) into ``folder``, or nothing."""

    def __init__(self, folder: str, steps: tuple[int, int] | None):
        self.folder, self.steps = folder, steps

    @contextlib.contextmanager
    def around(self, step: int) -> Iterator[None]:
        """Wraps step ``step`` (0-based): starts the trace before the first step of the
        range and stops it after the last; each step is marked for profile readers."""
        first, last = self.steps if self.steps is not None else (-1, -1)
        if step == first:
            jax.profiler.start_trace(self.folder)
        # A step marker for profile readers (`marin trace summarize`): data wait included.
        with jax.profiler.StepTraceAnnotation("train", step_num=step):
            yield
        if first <= step == last - 1:
            jax.block_until_ready(jnp.zeros(()))
            jax.profiler.stop_trace()


def progress_bar(total: int, start: int) -> Callable[[int | None, float | None], None]:
    """A rich progress bar on a terminal (``update(None, None)`` ends it); nothing otherwise
    (the metrics log prints a line every ``log_every`` steps)."""
    if not sys.stderr.isatty():
        return lambda step, loss: None
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    bar = Progress(TextColumn("train"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                   TextColumn("loss {task.fields[loss]}"), TimeRemainingColumn(), transient=True)
    task = bar.add_task("train", total=total, completed=start, loss="-")
    bar.start()

    def update(step: int | None, loss: float | None) -> None:
        if step is None:
            bar.stop()
        else:
            bar.update(task, completed=step, loss=f"{loss:.4f}")

    return update


def open_trackers(config: Any) -> Trackers | TrackerProcess:
    """The trackers of a ``TrainLmConfig``, told the run's configuration and hardware, in
    a process of their own (``marin.trackers.process``)."""
    if not config.trackers:
        return Trackers([])
    hardware = {"preset": config.hardware, "devices": jax.device_count(),
                "device_kind": jax.devices()[0].device_kind, "platform": jax.default_backend()}
    settings = json.loads(json.dumps(asdict(config), default=str))
    run = TrackerRun.of(config.output_path, settings, hardware)
    return start_trackers(config.trackers, run)
