"""How one step ended: the one type a worker returns, an invocation's result lists and its
record stores for each step.

    outcome = execute_step(job)        # StepOutcome(key=..., state=StepState.SUCCEEDED, ...)
    outcome.state.is_done, outcome.seconds, outcome.error   # True, 12.3, None
    result.steps[0].to_json()          # {"name": ..., "key": ..., "state": "succeeded", ...}

A worker knows the step by its key; the executor adds the step's ``name`` and
``output_path`` from its plan when it collects the outcome, and the invocation record
keeps ``state``, ``seconds`` and ``error`` under its own field names (``outcome``,
``seconds``, ``error``: ``marin.execution.invocation_record``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from marin.execution.phases import PhaseTimes
from marin.execution.states import StepState

__all__ = ["StepOutcome"]


@dataclass(frozen=True)
class StepOutcome:
    """How one step ended in one invocation."""

    key: str
    state: StepState
    """From a worker: SUCCEEDED, REUSED, FAILED, LOST_LEASE or CANCELLED; the executor adds
    SKIPPED and BLOCKED for steps it did not submit."""
    seconds: float = 0.0
    error: str | None = None
    traceback: str | None = None
    note: str | None = None
    """What else happened on the way (a lease taken over), shown with the progress line."""
    name: str = ""
    """The step's name; set by the executor from its plan."""
    output_path: str = ""
    """The step's output; set by the executor from its plan."""
    phases: PhaseTimes | None = None
    """Where the worker's time went (``marin.execution.phases``); None: not recorded (a
    step that no worker ran here, or a runner that does not return it)."""

    def to_json(self) -> dict[str, Any]:
        """The step as ``--json`` output lists it."""
        return {"name": self.name, "key": self.key, "output_path": self.output_path,
                "state": self.state, "seconds": round(self.seconds, 3), "error": self.error}
