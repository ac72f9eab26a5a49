"""The one vocabulary of step states, from the status file to ``--json`` output.

    outcome.state                          # StepState.SUCCEEDED
    outcome.state.is_done                  # True: dependents may start
    StepState.from_stored("SUCCESS")       # StepState.SUCCEEDED (a .executor_status value)
    StepState.FAILED.stored                # "FAILED" (what .executor_status holds)
    json.dumps({"state": StepState.LOST_LEASE})   # '{"state": "lost_lease"}'

A state is what one layer knows of a step: the status file records RUNNING, SUCCEEDED,
FAILED or CANCELLED; a worker reports one of SUCCEEDED, REUSED, FAILED, LOST_LEASE or
CANCELLED (in a ``StepOutcome``); an invocation of the executor adds SKIPPED and BLOCKED
for steps it did not submit. Every layer uses this enum (the dashboard's ``ViewState``
spells the stored ones as status files do), and JSON (plans, results, invocation records,
published states) spells each state by its value.

Design note: ``.executor_status`` files keep the spelling they have always had
(``SUCCESS``, ``FAILED``, ``RUNNING``, ``CANCELLED``), so prefixes written before and
after read the same; ``stored`` and ``from_stored`` are the only places that spelling
appears.
"""

from __future__ import annotations

import enum


class StepState(enum.StrEnum):
    """Where a step stands; a ``str``, so it compares to and serialises as its value."""

    RUNNING = "running"
    """An attempt holds the step's lease (status file) or the runner has it (live)."""
    SUCCEEDED = "succeeded"
    """The step's output is committed: by this invocation's attempt, or (status file) by any."""
    REUSED = "reused"
    """Another executor committed the output while this invocation waited for the lease."""
    SKIPPED = "skipped"
    """Not submitted: already succeeded, or not selected by ``run_only``."""
    FAILED = "failed"
    """The step raised (or a refused earlier failure: not retried)."""
    LOST_LEASE = "lost_lease"
    """Another executor took the lease over while the attempt ran; nothing committed."""
    CANCELLED = "cancelled"
    """Interrupted (Ctrl-C, TERM, HUP) before it finished; the next invocation resumes it."""
    BLOCKED = "blocked"
    """Not started: a dependency did not succeed."""

    @property
    def is_done(self) -> bool:
        """The step's output exists, so its dependents may start."""
        return self in _DONE

    @property
    def is_failure(self) -> bool:
        """The step ended without its output; an invocation with one is not ``ok``."""
        return self in _FAILURE

    @property
    def is_final(self) -> bool:
        """Nothing more will happen to the step in this invocation."""
        return self is not StepState.RUNNING

    @property
    def ran(self) -> bool:
        """An attempt of this invocation executed the step's function (or was cut short)."""
        return self in _RAN

    @property
    def stored(self) -> str:
        """The spelling in ``.executor_status``; ValueError for a state never stored."""
        try:
            return _STORED[self]
        except KeyError:
            raise ValueError(f"the state {self.value!r} is never written to a status "
                             f"file; stored states are {sorted(_STORED.values())}") from None

    @classmethod
    def from_stored(cls, text: str) -> StepState:
        """The state a status file's ``status`` names (``SUCCESS``, ``FAILED``, ...)."""
        state = _FROM_STORED.get(text)
        if state is None:
            raise ValueError(f"unknown status {text!r}; known: {sorted(_FROM_STORED)}")
        return state


_DONE = frozenset({StepState.SUCCEEDED, StepState.REUSED})
_FAILURE = frozenset({StepState.FAILED, StepState.LOST_LEASE, StepState.CANCELLED,
                      StepState.BLOCKED})
_RAN = frozenset({StepState.SUCCEEDED, StepState.FAILED, StepState.LOST_LEASE,
                  StepState.CANCELLED})
_STORED = {StepState.RUNNING: "RUNNING", StepState.SUCCEEDED: "SUCCESS",
           StepState.FAILED: "FAILED", StepState.CANCELLED: "CANCELLED"}
_FROM_STORED = {text: state for state, text in _STORED.items()}

#: The values a status file's ``status`` holds: ``SUCCESS``, ``FAILED``, ``RUNNING``,
#: ``CANCELLED``.
STORED_STATUSES = frozenset(_STORED.values())
