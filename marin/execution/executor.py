"""The executor: plan a step graph against a prefix, then run what is not done.

    executor = Executor(prefix="gs://my-bucket/experiments", max_concurrent=4)
    executor = Executor(prefix, pack=4)      # ready steps of one pack key run together
    plan = executor.plan(steps)              # no side effects
    result = executor.run(steps)             # InvocationResult; result.ok: nothing failed
"""

from __future__ import annotations

import contextlib
import gc
import logging
import math
import os
import signal
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field, replace
from typing import Any

from marin._lazy import lazy_exports
from marin.execution.compat import (  # Marin's import paths: marin.execution.executor.X
    THIS_OUTPUT_PATH,
    InputName,
    OutputName,
    StepStatus,
)
from marin.execution.graph import StepGraph, StepNode
from marin.execution.ids import time_ordered_id
from marin.execution.invocation_record import ExperimentId
from marin.execution.invocations import record_invocation
from marin.execution.observers import observed
from marin.execution.outcome import StepOutcome
from marin.execution.packs import Packer, check_pack_limit
from marin.execution.planning import Plan, PlanEntry, PlanOptions, make_plan
from marin.execution.prefix_guard import planning_guard
from marin.execution.progress import Progress, SilentProgress
from marin.execution.runners import Runner, make_runner
from marin.execution.states import StepState
from marin.execution.status import attempt_path, code_fingerprint, info_record
from marin.execution.step import (
    ExecutorStep,
    output_path_of,
    this_output_path,
    unversioned,
    versioned,
)
from marin.execution.worker import StepJob
from marin.storage import get_storage

# Marin's import path for the front end's names: ``executor_main``'s module imports this
# one, so they load on first use, and the core never imports the front end.
_FRONT_END = ("executor_main", "ExecutorMainConfig")
__getattr__, __dir__ = lazy_exports(__name__, dict.fromkeys(
    _FRONT_END, "marin.execution.frontend.executor_main"))

__all__ = [
    "THIS_OUTPUT_PATH", "Executor", "ExecutorStep", "InputName", "InvocationResult",
    "OutputName", "RunResult", "StepOutcome", "StepStatus", "output_path_of",
    "this_output_path", "unversioned", "versioned", *_FRONT_END,
]


logger = logging.getLogger("marin.executor")

DEFAULT_LEASE_TTL = 60.0


@dataclass
class InvocationResult:
    """What one invocation of the executor (``Executor.run``) did: its plan and how each
    planned step ended."""

    plan: Plan
    steps: list[StepOutcome] = field(default_factory=list)
    interrupted: bool = False
    interrupt_signal: int | None = None
    """The signal that interrupted the invocation (SIGINT for Ctrl-C, SIGTERM, SIGHUP)."""

    @property
    def ok(self) -> bool:
        return not self.interrupted and not self.failed

    @property
    def failed(self) -> list[StepOutcome]:
        return [s for s in self.steps if s.state.is_failure]

    def by_state(self) -> dict[StepState, int]:
        counts: dict[StepState, int] = {}
        for s in self.steps:
            counts[s.state] = counts.get(s.state, 0) + 1
        return counts

    def summary(self) -> str:
        counts = ", ".join(f"{n} {state}" for state, n in sorted(self.by_state().items()))
        lines = [f"executor: {len(self.steps)} steps: {counts or 'nothing to do'}"]
        for s in self.failed:
            lines.append(f"  {s.state.upper()}: {s.key}: {s.error}")
            if s.state is StepState.FAILED:
                lines.append(f"      traceback in {s.output_path}/.executor_status")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "interrupted": self.interrupted, "counts": self.by_state(),
                "steps": [s.to_json() for s in self.steps]}


#: The earlier name of ``InvocationResult`` ("run" now names a training run only).
RunResult = InvocationResult


def check_positive(name: str, value: float | None, integer: bool = False) -> None:
    """Refuse a numeric option that is not positive and finite (None means the default)."""
    if value is None:
        return
    kind = "a whole number of at least 1" if integer else "a positive, finite number"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(
            value) or value <= 0 or (integer and value != int(value)):
        raise ValueError(f"{name} must be {kind}, got {value!r}")


class Interrupted(KeyboardInterrupt):
    """A termination signal, handled like Ctrl-C: in-flight steps are marked CANCELLED
    and their leases released."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextlib.contextmanager
def signals_interrupt(signums: Sequence[int] = (signal.SIGTERM, signal.SIGHUP)
                      ) -> Iterator[None]:
    """Turn ``signums`` into ``Interrupted`` in the main thread while the block runs. A
    signal this process ignores stays ignored: ``nohup marin executor ...`` keeps running when
    its terminal hangs up, as a background job of a script ignores Ctrl-C."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    owner = os.getpid()

    def handler(signum: int, frame: Any) -> None:
        if os.getpid() != owner:  # a step's forked child: the signal's default, at once
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        raise Interrupted(signum)

    previous = {s: signal.signal(s, handler) for s in signums
                if signal.getsignal(s) is not signal.SIG_IGN}
    try:
        yield
    finally:
        for s, old in previous.items():
            signal.signal(s, old)


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Loading, walking, hashing and planning a graph allocate objects by the hundred
    thousand and free none of them; the cyclic collector would scan them all again at every
    collection (a sixth of a 100,000-step dry run). Collection resumes afterwards, before
    any step runs."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


class Executor:
    """Plans and runs steps under ``prefix``; ``backend`` names the runner."""

    def __init__(self, prefix: str, max_concurrent: int | None = None, backend: str = "local",
                 lease_ttl: float = DEFAULT_LEASE_TTL, poll_interval: float | None = None,
                 runner: Runner | None = None, runner_options: dict[str, Any] | None = None,
                 pack: int = 1):
        if not prefix:
            raise ValueError("Executor needs a prefix (a local folder or a storage URL)")
        check_positive("`max_concurrent`", max_concurrent, integer=True)
        check_positive("`lease_ttl`", lease_ttl)
        check_positive("poll_interval", poll_interval)
        self.prefix = prefix.rstrip("/") or "/"
        self.max_concurrent = max_concurrent or os.cpu_count() or 1
        self.backend = backend
        self.lease_ttl = lease_ttl
        self.poll_interval = poll_interval if poll_interval is not None else min(5.0,
                                                                                 lease_ttl / 4)
        self._runner = runner
        self.runner_options = dict(runner_options or {})
        self.pack = check_pack_limit(pack)  # steps packed at most (marin.execution.packs)
        self.storage = get_storage(self.prefix)

    def prefix_warnings(self) -> list[str]:
        """Warnings about the prefix's bucket (multi-region, cold class, far region)."""
        from marin.storage import UnreachableError
        from marin.storage.bucket import bucket_info, bucket_warnings, compute_region

        try:
            return bucket_warnings(bucket_info(self.prefix), compute_region())
        except UnreachableError:
            raise  # nothing else would work either: one error, not a warning and an error
        except OSError as e:
            return [f"could not check the bucket of {self.prefix}: {e}"]

    def graph(self, steps: StepGraph | Sequence[ExecutorStep]) -> StepGraph:
        """The graph that ``plan`` and ``run`` take: a ``StepGraph`` built for this
        prefix as it is, or a list of steps hashed and placed under the prefix."""
        if not isinstance(steps, StepGraph):
            with gc_paused():
                return StepGraph.build(steps, self.prefix)
        if steps.prefix.rstrip("/") != self.prefix.rstrip("/"):
            raise ValueError(f"the step graph was built for the prefix {steps.prefix}, "
                             f"not {self.prefix}; build it with this executor's prefix")
        return steps

    def plan(self, steps: StepGraph | Sequence[ExecutorStep],
             run_only: Sequence[str] | None = None, force_run_failed: bool = True, *,
             force_run: Sequence[str] | None = None) -> Plan:
        """What an invocation would do and why; ``steps`` is a ``StepGraph`` (planned as it is) or
        a list of steps (``graph``); ``force_run`` (regular expressions) reruns matching
        steps that succeeded before. Messages name options by their field (`` `run_only` ``)."""
        graph = self.graph(steps)
        with gc_paused():
            return make_plan(graph, self.prefix, self.storage,
                             PlanOptions(run_only=run_only, force_run_failed=force_run_failed,
                                         force_run=force_run))

    def run(self, steps: StepGraph | Sequence[ExecutorStep],
            run_only: Sequence[str] | None = None, force_run_failed: bool = True,
            progress: Progress | None = None, *, force_run: Sequence[str] | None = None,
            experiment: str | ExperimentId | None = None) -> InvocationResult:
        """Run what the plan says; ``experiment`` names the experiment in the invocation
        record (``marin.execution.invocations``)."""
        # From the plan until the invocation record names its steps, no gc deletes here.
        with planning_guard(self.prefix, self.storage) as guard:
            plan = self.plan(steps, run_only, force_run_failed, force_run=force_run)
            for warning in plan.warnings:
                logger.warning(warning)
            if any(e.action != "skip" for e in plan.entries):
                self.storage.check_writable(self.prefix)
            runner = self._runner or make_runner(self.backend, self.max_concurrent,
                                                 **self.runner_options)
            progress = guard.released_after_start(
                record_invocation(self.prefix, self.storage, progress or SilentProgress(),
                                  experiment))
            return _Invocation(self, plan, runner, observed(progress)).execute()


class _Invocation:
    """The scheduling loop of one ``Executor.run``. A step is submitted once each of its
    dependencies in the invocation has succeeded, or, for a nonblocking one, been submitted: the
    runner starts jobs in the order they come, so the dependency starts first."""

    def __init__(self, executor: Executor, plan: Plan, runner: Runner, progress: Progress):
        self.executor = executor
        self.plan = plan
        self.runner = runner
        self.progress = progress
        self.run_id = time_ordered_id()
        self.result = InvocationResult(plan)
        self.dependents = plan.graph.dependents()
        self.waiting_on: dict[StepNode, int] = {}
        self.in_flight: dict[Future[StepOutcome], PlanEntry] = {}
        self._settled: set[StepNode] = set()
        self._submitted: set[StepNode] = set()
        self.packer = Packer(plan.graph, executor.pack)

    def execute(self) -> InvocationResult:
        todo = [e for e in self.plan.entries if e.action != "skip"]
        todo_nodes = {e.node for e in todo}
        for entry in todo:  # before any skip is recorded: a refused failure blocks these
            self.waiting_on[entry.node] = sum(d in todo_nodes for d in entry.node.dependencies)
        for entry in self.plan.entries:
            if entry.action == "skip":
                self._record_skip(entry)
        try:  # from here a Ctrl-C reports the invocation as interrupted, whatever it was doing
            self.progress.invocation_started(self.plan, len(todo))
            self._submit_ready([e.node for e in todo if self.waiting_on[e.node] == 0])
            while self.in_flight:
                done, _ = wait(list(self.in_flight), return_when=FIRST_COMPLETED)
                for future in done:
                    self._finish(self.in_flight.pop(future), future)
        except KeyboardInterrupt as e:
            self._interrupt(getattr(e, "signum", signal.SIGINT))
        finally:
            self.runner.shutdown()
            self.progress.invocation_finished()
        return self.result

    def _record_skip(self, entry: PlanEntry) -> None:
        state = StepState.FAILED if entry.refused_failure else StepState.SKIPPED
        error = entry.reason if entry.refused_failure else None
        self._add_result(entry, StepOutcome(entry.node.key, state, error=error))
        if entry.refused_failure:
            self._block_dependents(entry, started=False)

    def _submit_ready(self, ready: list[StepNode]) -> None:
        """Submit ``ready``, each with the ready steps it packs with, then the steps that
        waited only for one of them to start. Those come after every step of ``ready``: a
        dependent that waits inside its step (a branch waiting for its parent's checkpoint)
        would otherwise hold a runner's slot while the steps behind it could run."""
        ready.reverse()
        while ready:
            node = ready.pop()
            if node not in self._settled and node not in self._submitted:
                pack = self.packer.take(node, (n for n in reversed(ready) if n not in
                                               self._settled and n not in self._submitted))
                self._submit([self.plan.entry_of(n) for n in pack])
                for member in pack:
                    ready[:0] = reversed(self._released(member, started=True))

    def _released(self, node: StepNode, started: bool) -> list[StepNode]:
        """The dependents that wait for nothing more, now that ``node`` has started (for
        its nonblocking dependents) or succeeded (for the others)."""
        waiting = self.waiting_on
        children = [c for c in self.dependents[node]
                    if c in waiting and (node in c.nonblocking) == started]
        for child in children:
            waiting[child] -= 1
        return [c for c in children if waiting[c] == 0]

    def _submit(self, entries: list[PlanEntry]) -> None:
        """Submit one step, or a pack of them where the runner runs packs."""
        jobs, resources = [self._job(e) for e in entries], entries[0].node.step.resources
        submit_pack = getattr(self.runner, "submit_pack", None)
        futures = submit_pack(jobs, resources) if len(jobs) > 1 and submit_pack else \
            [self.runner.submit(job, resources) for job in jobs]
        self.in_flight.update(zip(futures, entries, strict=True))

    def _job(self, entry: PlanEntry) -> StepJob:
        node = entry.node
        graph = self.plan.graph
        fingerprint = code_fingerprint(node.step.fn)
        job = StepJob(
            key=node.key, name=node.name, output_path=node.output_path, fn=node.step.fn,
            config=graph.resolve_config(node, attempt_path(node.output_path, self.run_id)),
            info=info_record(node, graph.resolve_config(node), fingerprint, self.run_id),
            code_fingerprint=fingerprint, run_id=self.run_id,
            lease_ttl=self.executor.lease_ttl, poll_interval=self.executor.poll_interval,
            planned_status=entry.status_record, rerun=entry.rerun,
            resume=node.step.resumes, prefix=self.executor.prefix,
        )
        self.progress.step_started(entry)
        self._submitted.add(node)
        return job

    def _finish(self, entry: PlanEntry, future: Future[StepOutcome]) -> None:
        try:
            outcome = future.result()
        except Exception as e:  # the runner or the storage failed, not the step itself
            outcome = StepOutcome(entry.node.key, StepState.FAILED, 0.0, f"{type(e).__name__}: {e}")
        self.progress.step_finished(entry, outcome)
        self._add_result(entry, outcome)
        if outcome.state.is_done:
            self._submit_ready(self._released(entry.node, started=False))
        else:
            self._block_dependents(entry, started=True)

    def _block_dependents(self, failed: PlanEntry, started: bool) -> None:
        """Block what waits for ``failed``: every dependent when it never started, the
        blocking ones only when it started (the others are running or released)."""
        stack = [n for n in self.dependents[failed.node]
                 if not (started and failed.node in n.nonblocking)]
        while stack:
            node = stack.pop()
            if node in self._settled or node in self._submitted or node not in self.waiting_on:
                continue
            entry = self.plan.entry_of(node)
            reason = f"dependency {failed.node.key} did not succeed"
            self.progress.step_blocked(entry, reason)
            self._add_result(entry, StepOutcome(entry.node.key, StepState.BLOCKED, error=reason))
            stack.extend(self.dependents[node])

    def _add_result(self, entry: PlanEntry, outcome: StepOutcome) -> None:
        """Settle ``entry`` with ``outcome``, named after the plan's step (a runner's
        outcome knows the step by its key only)."""
        self._settled.add(entry.node)
        self.result.steps.append(replace(
            outcome, name=entry.name, output_path=entry.output_path))

    def _interrupt(self, signum: int) -> None:
        self.result.interrupted = True
        self.result.interrupt_signal = signum
        name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
        reason = f"interrupted ({name})"
        # The runner owns cancellation: it stops the jobs, marks their steps CANCELLED and
        # releases their leases (see marin.execution.runners).
        self.runner.cancel_running(reason)
        for future, entry in self.in_flight.items():
            future.cancel()
            self._add_result(entry, StepOutcome(entry.node.key, StepState.CANCELLED,
                                                error=reason))
        self.in_flight.clear()
