"""A small JSON record of every executor invocation, kept under the prefix.

    progress = record_invocation(executor.prefix, executor.storage, progress)
    executor.run(steps, progress=progress)
    # <prefix>/.marin/invocations/20250101-120000-1a2b3c4d.json

The record names the experiment (as the front end that started the invocation names it: the
script's path or the module, never guessed from the command line; and the script's
resolved path and the experiment's name, ``ExperimentId``), the user, host, git
commit, start and end time, and every step of the plan: its key, output path,
dependencies, the plan's action and reason, and how it ended in this invocation. It is
written when the invocation starts and rewritten when it ends; ``marin dashboard`` and ``marin gc``
read it. Its type and format are ``marin.execution.invocation_record.InvocationRecord``.

Design note: the recorder wraps the invocation's ``Progress`` instead of adding code to the
scheduling loop, so the executor calls one function and knows nothing of the format.
Failing to write the record is logged and never fails the invocation.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
import time
from typing import TYPE_CHECKING

from marin.execution.graph import nonblocking_keys
from marin.execution.ids import time_ordered_id
from marin.execution.invocation_record import (
    ExperimentId,
    InvocationRecord,
    InvocationStep,
)
from marin.execution.outcome import StepOutcome
from marin.execution.states import StepState
from marin.execution.status import current_user, git_commit

if TYPE_CHECKING:
    from marin.execution.planning import Plan, PlanEntry
    from marin.execution.progress import Progress
    from marin.storage import Storage

logger = logging.getLogger("marin.executor")

INVOCATIONS_DIR = ".marin/invocations"


def invocations_folder(prefix: str) -> str:
    return f"{prefix.rstrip('/')}/{INVOCATIONS_DIR}"


def record_invocation(prefix: str, storage: Storage, progress: Progress,
                      experiment: str | ExperimentId | None = None) -> Progress:
    """``progress``, wrapped so that the invocation's start and end are recorded under ``prefix``.
    ``experiment`` is the experiment as the front end knows it (``ExperimentId``), or a
    name given by code (``Executor.run(experiment="sweep")``: its name, with no script);
    without one (``Executor.run`` called from code) the record says so."""
    if not isinstance(experiment, ExperimentId):
        experiment = ExperimentId(experiment or UNNAMED, None, experiment or UNNAMED)
    return _InvocationRecorder(prefix, storage, progress, experiment)


#: The experiment of an invocation started from code that named none.
UNNAMED = "(unnamed: Executor.run from code)"


class _InvocationRecorder:
    def __init__(self, prefix: str, storage: Storage, inner: Progress,
                 experiment: ExperimentId):
        self._experiment = experiment
        self._inner = inner
        self._storage = storage
        self._id = time_ordered_id()
        self._path = f"{invocations_folder(prefix)}/{self._id}.json"
        self._record: InvocationRecord | None = None
        self._ends: dict[str, StepOutcome] = {}

    def invocation_started(self, plan: Plan, pending: int) -> None:
        self._record = InvocationRecord(
            id=self._id, prefix=plan.prefix, experiment=self._experiment.label,
            script=self._experiment.script, name=self._experiment.name,
            argv=tuple(sys.argv), cwd=os.getcwd(), user=current_user(),
            host=socket.gethostname(), pid=os.getpid(), git_commit=git_commit(),
            started=time.time(), steps=tuple(planned_step(e) for e in plan.entries))
        self._write()
        self._inner.invocation_started(plan, pending)

    def step_started(self, entry: PlanEntry) -> None:
        self._inner.step_started(entry)

    def step_finished(self, entry: PlanEntry, outcome: StepOutcome) -> None:
        self._ends[entry.node.key] = outcome
        self._inner.step_finished(entry, outcome)

    def step_blocked(self, entry: PlanEntry, reason: str) -> None:
        self._ends[entry.node.key] = StepOutcome(entry.node.key, StepState.BLOCKED,
                                                 error=reason)
        self._inner.step_blocked(entry, reason)

    def invocation_finished(self) -> None:
        self._inner.invocation_finished()
        if self._record is None:
            return
        self._record = self._record.finished(self._ends, time.time())
        self._write()

    def _write(self) -> None:
        try:
            self._storage.write(self._path, json.dumps(self._record.to_json(),
                                                       default=str).encode())
        except Exception as e:  # a record is a convenience; the invocation goes on without it
            logger.warning("could not record this invocation at %s: %s", self._path, e)


def planned_step(entry: PlanEntry) -> InvocationStep:
    """A plan entry as the invocation record holds it before the step ends."""
    node = entry.node
    return InvocationStep(
        key=node.key, name=node.name, output_path=node.output_path,
        dependencies=tuple(d.key for d in node.dependencies),
        nonblocking=tuple(nonblocking_keys(node)), action=entry.action, reason=entry.reason,
        description=node.step.description,
        status_at_plan=entry.status.value if entry.status else None)
