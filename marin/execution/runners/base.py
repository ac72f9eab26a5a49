"""The runner interface: where step jobs execute (see ``marin.execution.runners``).

    runner = LocalRunner(max_concurrent=4)
    future = runner.submit(job, resources)     # concurrent.futures.Future[StepOutcome]
    ...
    runner.shutdown()

A runner only places work; leases, statuses and retries are the worker's protocol
(``execute_step``), so every runner gives the same guarantees.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from types import ModuleType
from typing import Any, ClassVar, Protocol, runtime_checkable

from marin import registry
from marin.execution.experiments import EXPERIMENT_MODULE_PREFIX
from marin.execution.outcome import StepOutcome
from marin.execution.step import StepResources
from marin.execution.worker import StepJob


@runtime_checkable
class Runner(Protocol):
    name: str
    options: ClassVar[Mapping[str, str]]
    """The runner options it accepts (``--runner-option KEY=VALUE``), each with its help;
    the values arrive as keyword arguments of the constructor, as strings from the command
    line."""

    def submit(self, job: StepJob, resources: StepResources) -> Future[StepOutcome]:
        """Start ``job`` once capacity allows; the future holds its outcome."""
        ...

    def cancel_running(self, reason: str) -> list[str]:
        """Stop every job started and drop the queued ones; when it returns, each stopped
        step's status is CANCELLED and no lease of its jobs is left. Returns their keys."""
        ...

    def shutdown(self) -> None: ...


def unimportable_module(fn: Callable[..., Any]) -> ModuleType | None:
    """The module defining ``fn`` when another process cannot import it by name: an
    experiment file that ``marin executor`` loaded under a private name. A runner that ships
    jobs to other processes pickles such a module by value (cloudpickle)."""
    name = getattr(fn, "__module__", "") or ""
    if not name.startswith(EXPERIMENT_MODULE_PREFIX):
        return None
    return sys.modules.get(name)


registry.declare_group(
    "marin.runners", expected="a runner class with submit(job, resources), "
    "cancel_running(reason) and shutdown() methods",
    fits=registry.has_methods("submit", "cancel_running", "shutdown", classes_only=True))
