"""Running a pack: each member under its own worker protocol, trained together.

    outcomes = execute_pack(jobs, active)   # one StepOutcome (or exception) per job, in order

Every member runs ``execute_step`` for itself, in a thread of its own: its own lease,
``.executor_info``, RUNNING, attempt folder, commit and status. Where ``execute_step`` would
call the step's function, the member hands its config (pointing at its attempt folder) to
the pack and waits. A member that is done already, or whose lease another executor holds,
is dropped from the pack before training starts: once every member has either handed its
config or been dropped, the supervisor (the calling thread) runs the function's
``PackSpec.train`` on the configs handed, and each member then commits or fails on its own
outcome. A dropped member that later gets its lease (the other executor gave up) runs
alone; one that finds the step settled reports it as usual.

An error of the pack as a whole (it cannot start, it runs out of memory) is every
member's error.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Sequence
from typing import Any

from marin.execution.outcome import StepOutcome
from marin.execution.packs import pack_spec
from marin.execution.worker import ActiveSteps, StepJob, execute_step

__all__ = ["execute_pack"]

POLL = 0.2  # seconds between looks at a cancellation while a member waits


class PackCancelled(RuntimeError):
    """The executor was interrupted before the pack trained."""


class _Meeting:
    """Where the members hand their configs and get their outcomes."""

    def __init__(self, size: int, cancelled: threading.Event):
        self._changed = threading.Condition()
        self._undecided = set(range(size))
        self._configs: dict[int, Any] = {}
        self._errors: dict[int, BaseException | None] = {}
        self._closed = False
        self.cancelled = cancelled

    def hand(self, index: int, config: Any) -> bool:
        """Member ``index`` joins with ``config``; False when the pack already left."""
        with self._changed:
            if self._closed:
                return False
            self._configs[index] = config
            self._undecided.discard(index)
            self._changed.notify_all()
        return True

    def drop(self, index: int) -> None:
        """Member ``index`` will not join (it is settled, or its lease is held elsewhere)."""
        with self._changed:
            self._undecided.discard(index)
            self._changed.notify_all()

    def outcome(self, index: int) -> BaseException | None:
        with self._changed:
            while index not in self._errors:
                if self.cancelled.is_set():
                    return PackCancelled("the executor was interrupted before the pack ended")
                self._changed.wait(POLL)
            return self._errors[index]

    def close(self) -> dict[int, Any]:
        """Wait until every member joined or was dropped; the configs handed, by index."""
        with self._changed:
            while self._undecided and not self.cancelled.is_set():
                self._changed.wait(POLL)
            self._closed = True
            return dict(self._configs)

    def settle(self, errors: dict[int, BaseException | None]) -> None:
        with self._changed:
            self._errors.update(errors)
            self._changed.notify_all()


@dataclasses.dataclass(frozen=True)
class _Member:
    """The function ``execute_step`` runs for member ``index``: hand the config to the pack
    and raise its error, or, when the pack left without it, train alone."""

    meeting: _Meeting
    index: int
    train: Callable[[Sequence[Any]], Sequence[BaseException | None]]

    def __call__(self, config: Any) -> None:
        if self.meeting.hand(self.index, config):
            error = self.meeting.outcome(self.index)
        else:
            error = self.train([config])[0]
        if error is not None:
            raise error


class _Watched:
    """The runner's ``ActiveSteps`` as a member uses it: a lease it cannot take at once
    drops it from the pack (it waits for that lease alone)."""

    def __init__(self, active: ActiveSteps, on_refused: Callable[[], None]):
        self._active, self._on_refused = active, on_refused
        self.cancelled = active.cancelled

    def acquire(self, item: Any) -> bool:
        taken = self._active.acquire(item)
        if not taken:
            self._on_refused()
        return taken

    def write_status(self, item: Any, status: Any, **fields: Any) -> bool:
        return self._active.write_status(item, status, **fields)

    def remove(self, key: str) -> None:
        self._active.remove(key)


def execute_pack(jobs: Sequence[StepJob], active: ActiveSteps | None = None
                 ) -> list[StepOutcome | BaseException]:
    """Run ``jobs`` (steps of one packable function) as one pack; each member's outcome, or
    the exception its worker raised (storage errors), in order."""
    active = active if active is not None else ActiveSteps()
    spec = pack_spec(jobs[0].fn)
    if spec is None:
        raise ValueError(f"step {jobs[0].key}'s function is not packable (marin.execution."
                         "packs.packable)")
    meeting = _Meeting(len(jobs), active.cancelled)
    results: list[StepOutcome | BaseException | None] = [None] * len(jobs)

    def member(i: int) -> None:
        job = dataclasses.replace(jobs[i], fn=_Member(meeting, i, spec.train))
        try:
            results[i] = execute_step(job, _Watched(active, lambda: meeting.drop(i)))
        except BaseException as e:
            results[i] = e
        finally:
            meeting.drop(i)

    threads = [threading.Thread(target=member, args=(i,), daemon=True,
                                name=f"marin-pack-{jobs[i].key}") for i in range(len(jobs))]
    for thread in threads:
        thread.start()
    configs = meeting.close()
    if configs and not active.cancelled.is_set():
        order = sorted(configs)
        try:
            errors = list(spec.train([configs[i] for i in order]))
        except BaseException as e:  # the pack as a whole: every member's error
            errors = [e] * len(order)
        meeting.settle(dict(zip(order, errors, strict=True)))
    for thread in threads:
        thread.join()
    return [r if r is not None else RuntimeError(f"step {j.key}'s worker returned nothing")
            for r, j in zip(results, jobs, strict=True)]
