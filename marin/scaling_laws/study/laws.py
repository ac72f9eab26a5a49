"""The fitted laws of a study as plain frozen values: what ``StudyFit`` is made of.

    fit.approach2.params.exponent, fit.approach2.params.exponent_se   # N_opt = k C^a
    fit.approach3.alpha, fit.approach3.intervals["alpha"]             # L(N, D)
    fit.approach3.loss(4e4, 1e6)                                      # numpy from here on
    fit.budgets[0].optimal_tokens, fit.predictions[0].approach3.loss

These import neither numpy nor scipy, so reading a study (the dashboard, the summary) stays
light. A budget's optimum, a power law and Approach 3 are the fits' own values
(``marin.scaling_laws.values``, named here too); the numeric methods of those import numpy
when they are called.
"""

from __future__ import annotations

from dataclasses import dataclass

from marin.scaling_laws.run_status import RunStatus
from marin.scaling_laws.values import Approach3, BudgetOptimum, Interval, PowerLaw

__all__ = ["Approach2", "Approach3", "BudgetNotFitted", "BudgetOptimum", "ExcludedRun",
           "Optimum", "PowerLaw", "TargetPrediction"]


@dataclass(frozen=True)
class ExcludedRun:
    """A run the fit left out, and why (``status``: diverged, out_of_memory, missing ...)."""

    run: str
    budget: float | None
    status: RunStatus
    reason: str


@dataclass(frozen=True)
class BudgetNotFitted:
    """A budget whose parabola could not be fitted."""

    budget: float
    runs: int
    reason: str


@dataclass(frozen=True)
class Approach2:
    """N_opt, D_opt and the minimum loss as power laws of the budget."""

    params: PowerLaw
    tokens: PowerLaw
    loss: PowerLaw


@dataclass(frozen=True)
class Optimum:
    """The compute-optimal size at a budget by one approach (intervals 95%; None where the
    approach gives none)."""

    params: float
    tokens: float
    loss: float | None = None
    params_interval: Interval | None = None
    tokens_interval: Interval | None = None
    loss_interval: Interval | None = None


@dataclass(frozen=True)
class TargetPrediction:
    """The optimum at a budget by each approach that was fitted."""

    budget: float
    approach2: Optimum | None = None
    approach3: Optimum | None = None

    @property
    def best(self) -> tuple[str, Optimum] | None:
        """Approach 2's optimum (the IsoFLOP minima), else Approach 3's."""
        if self.approach2 is not None:
            return "approach2", self.approach2
        if self.approach3 is not None:
            return "approach3", self.approach3
        return None
