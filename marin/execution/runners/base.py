"""The runner interface: where step jobs execute.

    runner = LocalRunner(max_concurrent=4)
    future = runner.submit(job, resources)     # concurrent.futures.Future[StepOutcome]
    ...
    runner.shutdown()

A runner only places work; leases, statuses and retries are the worker's protocol
(``marin.execution.worker``), so every runner gives the same guarantees.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Protocol, runtime_checkable

from marin import registry
from marin.execution.step import StepResources
from marin.execution.worker import StepJob, StepOutcome


@runtime_checkable
class Runner(Protocol):
    name: str

    def submit(self, job: StepJob, resources: StepResources) -> Future[StepOutcome]:
        """Start ``job`` once capacity allows; the future holds its outcome."""
        ...

    def cancel_running(self, reason: str) -> list[str]:
        """Stop tracking in-flight jobs: mark them CANCELLED, release their leases."""
        ...

    def shutdown(self) -> None: ...


registry.declare_group(
    "marin.runners", expected="a runner class with submit(job, resources), "
    "cancel_running(reason) and shutdown() methods",
    fits=registry.has_methods("submit", "cancel_running", "shutdown", classes_only=True))
