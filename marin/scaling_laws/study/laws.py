"""The fitted laws of a study as plain frozen values: what ``StudyFit`` is made of.

    fit.approach2.params.exponent, fit.approach2.params.exponent_se   # N_opt = k C^a
    fit.approach3.alpha, fit.approach3.intervals["alpha"]             # L(N, D)
    fit.approach3.parametric().loss(4e4, 1e6)                         # numpy from here on
    fit.budgets[0].optimal_tokens, fit.predictions[0].approach3.loss

These import neither numpy nor scipy, so reading a study (the dashboard, the summary) stays
light; ``scaling_fit()``, ``budget_fit()`` and ``parametric()`` give the numerical objects
of ``marin.scaling_laws.isoflop_analysis`` and ``marin.scaling_laws.parametric``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Approach2", "Approach3", "BudgetNotFitted", "BudgetOptimum", "ExcludedRun",
           "Optimum", "PowerLaw", "TargetPrediction"]

Interval = tuple[float, float]


@dataclass(frozen=True)
class ExcludedRun:
    """A run the fit left out, and why (``status``: diverged, out_of_memory, missing ...)."""

    run: str
    budget: float | None
    status: str
    reason: str


@dataclass(frozen=True)
class BudgetNotFitted:
    """A budget whose parabola could not be fitted."""

    budget: float
    runs: int
    reason: str


@dataclass(frozen=True)
class BudgetOptimum:
    """One budget's robust parabola of loss in log tokens and its minimum."""

    budget: float
    coefficients: tuple[float, float, float]
    optimal_tokens: float
    optimal_tokens_interval: Interval
    optimal_params: float
    optimal_loss: float
    points: int

    def budget_fit(self) -> Any:
        from marin.scaling_laws.isoflop_analysis import BudgetFit

        return BudgetFit(self.budget, self.coefficients, self.optimal_tokens,
                         self.optimal_tokens_interval, self.optimal_params, self.optimal_loss,
                         self.points)


@dataclass(frozen=True)
class PowerLaw:
    """``y = coefficient * C ** exponent`` across budgets (Approach 2)."""

    exponent: float
    coefficient: float
    exponent_se: float
    log_coefficient_se: float
    quantity: str

    def scaling_fit(self) -> Any:
        from marin.scaling_laws.isoflop_analysis import ScalingFit

        return ScalingFit(self.exponent, self.coefficient, self.exponent_se,
                          self.log_coefficient_se, self.quantity)

    def predict(self, budget: float) -> float:
        return float(self.coefficient * budget ** self.exponent)

    def interval(self, budget: float) -> Interval | None:
        """The 95% interval; None without residual degrees of freedom (two budgets)."""
        return self.scaling_fit().interval(budget) if self.exponent_se > 0 else None


@dataclass(frozen=True)
class Approach2:
    """N_opt, D_opt and the minimum loss as power laws of the budget."""

    params: PowerLaw
    tokens: PowerLaw
    loss: PowerLaw


@dataclass(frozen=True)
class Approach3:
    """``L(N, D) = E + A / N^alpha + B / D^beta`` with bootstrap standard errors and 95%
    intervals (``intervals[name]``); ``bootstrap_samples`` are rows of (E, A, B, alpha,
    beta)."""

    E: float
    A: float
    B: float
    alpha: float
    beta: float
    objective: float
    standard_errors: dict[str, float] = field(default_factory=dict)
    intervals: dict[str, Interval] = field(default_factory=dict)
    flops_coefficient: float = 6.0
    flops_exponent: float = 1.0
    bootstrap_samples: tuple[tuple[float, ...], ...] = ()

    def parametric(self) -> Any:
        """The ``ParametricFit`` (numpy arrays) these values describe."""
        import numpy as np

        from marin.scaling_laws.parametric import ParametricFit

        samples = np.array(self.bootstrap_samples, dtype=float)
        return ParametricFit(E=self.E, A=self.A, B=self.B, alpha=self.alpha, beta=self.beta,
                             objective=self.objective,
                             standard_errors=dict(self.standard_errors),
                             bootstrap_samples=samples if samples.ndim == 2 and len(samples)
                             else None, flops_coefficient=self.flops_coefficient,
                             flops_exponent=self.flops_exponent)


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
