"""A run's trackers behind one queue: training hands each record over and goes on.

    trackers = Trackers.open([TrackerConfig("json"), TrackerConfig("wandb")], run)
    trackers.log(1, {"train/loss": 2.5})     # a queue put: the step never waits
    trackers.close({"eval/loss": 2.1})        # the summary, then finish; bounded wait

Design note: trackers run on one background thread, in the order their records came. A
tracker that raises (at start, on a record, at the end) is reported once, as a warning
naming it and the error, and left out for the rest of the run; the others and training go
on. A tracker that hangs (an unreachable server) holds only its thread: ``close`` waits at
most ``timeout`` seconds and then leaves it, so the step still finishes. Once the trackers
have started, and again once they have finished, the thread writes ``trackers.json``
(``marin.trackers.record``): each tracker's ``describe()``, and the failures.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from marin import registry
from marin.trackers.config import TrackerConfig, TrackerConfigError, TrackerRun
from marin.trackers.record import TrackerEntry, write_record

__all__ = ["Trackers", "check_trackers", "normalize"]

logger = logging.getLogger("marin.trackers")

_FIELD = "TrainLmConfig.trackers"


def normalize(trackers: Sequence[TrackerConfig | str] | None) -> list[TrackerConfig]:
    """``trackers`` as configs (a bare name stands for ``TrackerConfig(name)``)."""
    if trackers is None:
        return []
    if isinstance(trackers, str | TrackerConfig):
        raise TrackerConfigError(f"{_FIELD} must be a list, got {trackers!r}; write "
                                 f"[{trackers!r}]")
    return [TrackerConfig(t) if isinstance(t, str) else t for t in trackers]


def check_trackers(trackers: Sequence[TrackerConfig | str] | None,
                   field: str = _FIELD) -> list[TrackerConfig]:
    """The configs, or a one-line ``TrackerConfigError`` naming the entry and the fix:
    an unknown tracker, or settings its tracker refuses (``check``)."""
    configs = normalize(trackers)
    known = registry.names("trackers")
    for i, config in enumerate(configs):
        if not isinstance(config, TrackerConfig):
            raise TrackerConfigError(f"{field}[{i}] is {config!r}: give a tracker's name or "
                                     "a marin.trackers.TrackerConfig")
        if config.type not in known:
            raise TrackerConfigError(
                f"{field}[{i}].type={config.type!r} is no tracker; available: "
                f"{', '.join(known) or 'none installed'} (`marin plugins list` shows them)")
        check = getattr(registry.load("trackers", config.type), "check", None)
        problem = check(config) if callable(check) else None
        if problem:
            raise TrackerConfigError(f"{field}[{i}] ({config.type}): {problem}")
    return configs


class Trackers:
    """The live trackers of one run, fed from a queue by one thread."""

    def __init__(self, trackers: list[tuple[str, Any]],
                 on_failure: Callable[[str], None] | None = None):
        self._live = trackers
        self._on_failure = on_failure
        self.failures: list[str] = []
        """One line per tracker that failed, as reported."""
        self._failed: list[tuple[str, str]] = []  # (tracker, line)
        self._run: TrackerRun | None = None
        self._started_at: float | None = None
        self._queue: queue.Queue[tuple[str, Any] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._drain, name="marin-trackers",
                                        daemon=True)
        if self._live:
            self._thread.start()

    @classmethod
    def open(cls, configs: Sequence[TrackerConfig | str] | None, run: TrackerRun,
             on_failure: Callable[[str], None] | None = None) -> Trackers:
        """Start each tracker on the background thread (W&B's start takes seconds);
        ``on_failure`` is told each failure's line too."""
        made = cls([], on_failure)
        pending = normalize(configs)
        if not pending:
            return made
        made._live = [(c.type, c) for c in pending]
        made._queue.put(("_start", run))
        made._thread.start()
        return made

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        if self._live:
            self._queue.put(("log", (step, dict(metrics))))

    def close(self, summary: dict[str, Any] | None = None, timeout: float = 120.0) -> None:
        """Send the summary, finish every tracker, and wait for them at most ``timeout``."""
        if not self._thread.is_alive():
            return
        if summary:
            self._queue.put(("summary", dict(summary)))
        self._queue.put(("finish", None))
        self._queue.put(None)
        self._thread.join(timeout)
        if self._thread.is_alive():
            logger.warning("trackers still busy after %.0f s: left behind; the run is done "
                           "(their files may be incomplete)", timeout)

    def _drain(self) -> None:
        while (item := self._queue.get()) is not None:
            kind, payload = item
            if kind == "_start":
                self._start(payload)
                continue
            live = list(self._live)
            for name, tracker in live:
                try:
                    if kind == "log":
                        tracker.log(*payload)
                    elif kind == "summary":
                        tracker.summary(payload)
                    else:
                        tracker.finish()
                except Exception as e:  # any tracker's failure: reported, never raised
                    self._fail(name, tracker, kind, e)
            if kind == "finish":
                self._record(live)

    def _start(self, run: TrackerRun) -> None:
        self._run = run
        started = []
        for name, config in self._live:
            try:
                started.append((name, registry.load("trackers", name)(config, run)))
            except Exception as e:  # a broken plugin or an unreachable service
                self._fail(name, None, "start", e)
        self._live = started
        self._started_at = time.time()
        self._record(started)

    def _record(self, trackers: list[tuple[str, Any]]) -> None:
        """``trackers.json``: what each tracker says of itself, and the failures; a write
        that fails is reported and the run goes on."""
        if self._run is None:
            return
        failed = dict(self._failed)
        entries = []
        for name, tracker in trackers:
            describe = getattr(tracker, "describe", None)
            try:
                details = dict(describe()) if callable(describe) else {}
            except Exception as e:  # a tracker's own report: never fatal
                details = {"error": f"describe failed: {type(e).__name__}: {e}"}
            entries.append(TrackerEntry(name, details, failed.pop(name, None)))
        entries += [TrackerEntry(name, {}, line) for name, line in failed.items()]
        try:
            write_record(self._run.output_path, entries, self._started_at)
        except Exception as e:  # a full disk, a storage error: the run goes on
            logger.warning("trackers: cannot write their record in %s (%s: %s)",
                           self._run.output_path, type(e).__name__, e)

    def _fail(self, name: str, tracker: Any, when: str, error: Exception) -> None:
        self._live = [(n, t) for n, t in self._live if t is not tracker or n != name]
        line = (f"tracker {name!r} failed at {when}: {type(error).__name__}: {error}; it is "
                "left out for the rest of the run, training goes on")
        self.failures.append(line)
        self._failed.append((name, line))
        logger.warning("%s", line)
        if self._on_failure is not None:
            self._on_failure(line)
