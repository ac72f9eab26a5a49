"""Run steps in threads of this process, at most ``max_concurrent`` at a time.

    runner = LocalRunner(max_concurrent=2)

A step with ``StepResources(hosts=N)`` runs as N processes of this machine
(``marin.execution.gang.LocalGang``), supervised by its step's thread, which runs the worker
protocol for all of them. A pack (``submit_pack``) takes one thread, which trains its
members in this process (``marin.execution.pack_worker``).

The threads are daemons: after Ctrl-C, ``cancel_running`` marks in-flight steps CANCELLED
and releases their leases (``ActiveSteps``), ends the processes of their gangs, and the
process exits without waiting for step functions that cannot be interrupted.
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import Future

from marin.execution.gang import LocalGang, as_gang
from marin.execution.outcome import StepOutcome
from marin.execution.pack_worker import execute_pack
from marin.execution.step import StepResources
from marin.execution.worker import ActiveSteps, StepJob, execute_step


class LocalRunner:
    name = "local"
    options: dict[str, str] = {}

    def __init__(self, max_concurrent: int = 1):
        if max_concurrent < 1:
            raise ValueError(f"max_concurrent must be at least 1, got {max_concurrent}")
        self.max_concurrent = max_concurrent
        self._queue: queue.SimpleQueue[tuple[list[StepJob], list[Future]] | None] = \
            queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._active = ActiveSteps()
        self._gangs: dict[str, LocalGang] = {}

    def submit(self, job: StepJob, resources: StepResources) -> Future[StepOutcome]:
        future: Future[StepOutcome] = Future()
        if resources.hosts > 1:
            gang = LocalGang(resources.hosts)
            with self._lock:
                self._gangs[job.key] = gang
            job = as_gang(job, gang)
        self._put([job], [future])
        return future

    def submit_pack(self, jobs: list[StepJob], resources: StepResources
                    ) -> list[Future[StepOutcome]]:
        """Start ``jobs`` (steps of one pack key, one host each) as one pack, in one
        thread; one future per job."""
        futures: list[Future[StepOutcome]] = [Future() for _ in jobs]
        self._put(list(jobs), futures)
        return futures

    def _put(self, jobs: list[StepJob], futures: list[Future]) -> None:
        self._queue.put((jobs, futures))
        with self._lock:
            if len(self._threads) < self.max_concurrent:
                thread = threading.Thread(target=self._work, daemon=True,
                                          name=f"marin-step-{len(self._threads)}")
                self._threads.append(thread)
                thread.start()

    def cancel_running(self, reason: str) -> list[str]:
        """Queued jobs never start; running ones are marked CANCELLED, their leases
        released, their gangs' processes ended, and their workers can take no lease and
        write no status again."""
        stops = 0
        while True:  # drain the queue, so no queued job starts after this
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is None:
                stops += 1
            else:
                for future in item[1]:
                    future.cancel()
        for _ in range(stops):  # a shutdown's stop signals stay
            self._queue.put(None)
        cancelled = self._active.cancel_all(reason)
        with self._lock:
            gangs = list(self._gangs.values())
        for gang in gangs:  # after cancel_all: a stopped gang's failure is never recorded
            gang.stop(reason)
        return cancelled

    def shutdown(self) -> None:
        for _ in self._threads:
            self._queue.put(None)

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            jobs, futures = item
            try:
                if not all([f.set_running_or_notify_cancel() for f in futures]):
                    continue
                try:
                    outcomes = execute_pack(jobs, self._active) if len(jobs) > 1 else \
                        [execute_step(jobs[0], self._active)]
                except BaseException as e:  # storage errors etc.: surface through the future
                    outcomes = [e] * len(jobs)
                for future, outcome in zip(futures, outcomes, strict=True):
                    if isinstance(outcome, BaseException):
                        future.set_exception(outcome)
                    else:
                        future.set_result(outcome)
            finally:
                with self._lock:
                    for job in jobs:
                        self._gangs.pop(job.key, None)
