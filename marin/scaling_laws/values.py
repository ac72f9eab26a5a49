"""The values a scaling-law fit is made of, each defined once: a run, one budget's optimum,
a power law across budgets, and Approach 3's ``L(N, D)``.

    row = RunRow(run="r1", params=4e4, tokens=1e6, flops=2.4e11, loss=3.2, budget=3e11)
    law = PowerLaw(exponent=0.5, coefficient=0.1, exponent_se=0.01, log_coefficient_se=0.2,
                   quantity="params")
    law.predict(1e21), law.interval(1e21)          # N_opt = k C^a and its 95% interval
    fit.loss(4e4, 1e6), fit.predict_optimal(3e19)  # fit: an Approach3, numpy from here on

The fits (``marin.scaling_laws.isoflop_analysis``, ``marin.scaling_laws.parametric``)
return these, a study's ``fit.json`` holds them under these field names, and the readers of
run data give ``RunRow``s. This module imports no numpy: the numeric methods import it when
they are called, so reading a study (the dashboard, the summary) stays light.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from typing import Any

from marin.scaling_laws.run_status import RunStatus

__all__ = ["MIN_RUNS_PARAMETRIC", "MIN_RUNS_PER_BUDGET", "PARAMETERS", "Approach3",
           "BudgetOptimum", "OptimalAllocation", "PowerLaw", "RunRow", "optimal_allocation"]

Interval = tuple[float, float]
PARAMETERS = ("E", "A", "B", "alpha", "beta")  # of Approach 3, in its samples' order
MIN_RUNS_PER_BUDGET = 3  # the least runs a budget's parabola is fitted from
MIN_RUNS_PARAMETRIC = 5  # the least runs Approach 3 is fitted from


@dataclass(frozen=True, kw_only=True)
class RunRow:
    """A run as the fits read it (a row of a study's ``runs.csv``, of a results table, or
    a run folder): ``loss`` is the metric fitted; ``budget`` None groups runs by FLOPs;
    ``status`` other than ``RunStatus.OK`` (with its ``reason``) keeps the run out of the
    fits (files hold the status's string, ``ok``, ``diverged``...); a
    seed replicate names the run it repeats in ``replicate_of``; a cooldown branch names
    its stable run and the step it left it at (``parent_run``, ``branch_step``; None: from
    scratch), and its ``flops`` are those of the point, the shared prefix included."""

    run: str = ""
    budget: float | None = None
    params: float
    tokens: float
    flops: float
    loss: float
    status: RunStatus = RunStatus.OK
    reason: str | None = None
    label: str = "default"
    group: str = ""
    seed: int = 0
    replicate_of: str | None = None
    hidden_dim: int | None = None
    num_layers: int | None = None
    train_loss: float | None = None
    first_eval_loss: float | None = None
    parent_run: str | None = None
    branch_step: int | None = None


@dataclass(frozen=True)
class BudgetOptimum:
    """One budget's robust parabola of loss in log tokens (``loss = a x^2 + b x + c``,
    ``x = ln(tokens)``) and its minimum; the tokens' interval is +/- 1.96 standard errors."""

    budget: float
    coefficients: tuple[float, float, float]
    optimal_tokens: float
    optimal_tokens_interval: Interval
    optimal_params: float
    optimal_loss: float
    points: int

    def loss_at(self, tokens: Any) -> Any:
        """The parabola at ``tokens`` (a number or a numpy array)."""
        import numpy as np

        a, b, c = self.coefficients
        x = np.log(tokens)
        return a * x * x + b * x + c


@dataclass(frozen=True)
class PowerLaw:
    """``y = coefficient * C ** exponent`` across budgets (Approach 2), fitted in log-log
    space; ``quantity`` is ``params``, ``tokens`` or ``loss``."""

    exponent: float
    coefficient: float
    exponent_se: float
    log_coefficient_se: float
    quantity: str

    def predict(self, budget: Any) -> Any:
        """The law at ``budget``: a float for a number, an array for an array."""
        if isinstance(budget, (int, float)):
            return float(self.coefficient * float(budget) ** self.exponent)
        import numpy as np

        return self.coefficient * np.asarray(budget, dtype=float) ** self.exponent

    def interval(self, budget: float, z: float = 1.96) -> Interval | None:
        """An approximate interval (95% by default) ignoring the covariance of slope and
        intercept; None without residual degrees of freedom (a law of two budgets)."""
        if not self.exponent_se > 0:
            return None
        se = math.hypot(self.log_coefficient_se, self.exponent_se * math.log(budget))
        center = math.log(self.predict(float(budget)))
        return _exp(center - z * se), _exp(center + z * se)


def _exp(x: float) -> float:
    """``e ** x``, infinite past the largest float (a wide interval far out, not an error)."""
    return math.exp(x) if x < _LOG_MAX else math.inf


_LOG_MAX = math.log(sys.float_info.max)


@dataclass(frozen=True)
class OptimalAllocation:
    """Compute-optimal N and D at ``budget`` by Approach 3, with bootstrap intervals, and
    the heuristic's candidate nearest to N_opt (a ``CandidateConfig``) when one was given."""

    budget: float
    params: float
    tokens: float
    params_interval: Interval
    tokens_interval: Interval
    nearest_candidate: Any = None


@dataclass(frozen=True)
class Approach3:
    """``L(N, D) = E + A / N^alpha + B / D^beta`` (``objective``: the fit's Huber loss),
    with bootstrap standard errors and 95% intervals (``intervals[name]``);
    ``bootstrap_samples`` are rows of (E, A, B, alpha, beta). Training FLOPs per token are
    ``flops_coefficient * N ** flops_exponent`` (6 N: C = 6 N D)."""

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

    def samples(self) -> Any:
        """The bootstrap samples as a numpy array (resamples, 5); None without any."""
        import numpy as np

        samples = np.array(self.bootstrap_samples, dtype=float)
        return samples if samples.ndim == 2 and len(samples) else None

    def as_dict(self) -> dict[str, float]:
        return {name: getattr(self, name) for name in PARAMETERS}

    def loss(self, params: Any, tokens: Any) -> Any:
        """``L(N, D)`` at numbers or numpy arrays."""
        import numpy as np

        return self.E + self.A / np.asarray(params) ** self.alpha \
            + self.B / np.asarray(tokens) ** self.beta

    def predict_optimal(self, budget: float, level: float = 0.95,
                        heuristic: Any = None) -> OptimalAllocation:
        """Compute-optimal N and D for ``budget`` training FLOPs, with a bootstrap interval at
        ``level``, and the heuristic's candidate nearest to N_opt when one is given.

        The budget is spent as ``C = flops_coefficient * N ** flops_exponent * D``: the
        accounting of the runs the fit was given (``flops=``), the one the heuristic's
        candidates use; C = 6 N D when the fit had no FLOPs."""
        import numpy as np

        n, d = self._optimal(self.A, self.B, self.alpha, self.beta, budget)
        n_range, d_range = (n, n), (d, d)
        s = self.samples()
        if s is not None and len(s) >= 2:
            ns, ds = self._optimal(s[:, 1], s[:, 2], s[:, 3], s[:, 4], budget)
            tail = (1 - level) / 2 * 100
            low_n, high_n = np.percentile(ns, [tail, 100 - tail])
            low_d, high_d = np.percentile(ds, [tail, 100 - tail])
            n_range, d_range = (float(low_n), float(high_n)), (float(low_d), float(high_d))
        nearest = None
        if heuristic is not None:
            from marin.scaling_laws.candidates import nearest_candidate

            nearest = nearest_candidate(list(heuristic.candidates_for_budget(budget)), n)
        return OptimalAllocation(budget, float(n), float(d), n_range, d_range, nearest)

    def _optimal(self, A: Any, B: Any, alpha: Any, beta: Any, budget: float) -> Any:
        return optimal_allocation(A, B, alpha, beta, budget, self.flops_coefficient,
                                  self.flops_exponent)


def optimal_allocation(A: Any, B: Any, alpha: Any, beta: Any, budget: float,
                       coefficient: float = 6.0, exponent: float = 1.0) -> Any:
    """The minimum of A/N^alpha + B/D^beta subject to C = k N^e D (k: ``coefficient``,
    e: ``exponent``), of numbers or numpy arrays. Setting dL/dN = 0 along the constraint
    gives ``N_opt = (alpha A / (e beta B))^(1 / (alpha + e beta)) * (C/k)^(beta / (alpha +
    e beta))`` and ``D_opt = C / (k N_opt^e)``; with k = 6 and e = 1 this is Hoffmann et
    al.'s eq. (4), N_opt = G (C/6)^a, D_opt = G^-1 (C/6)^b. A fit with no such minimum
    (a negative A, B or exponent) gives NaN, not a complex number."""
    import numpy as np

    e = exponent
    with np.errstate(invalid="ignore", divide="ignore"):
        g = np.float64(alpha * A / (e * beta * B)) ** (1 / (alpha + e * beta))
        n = g * (budget / coefficient) ** (beta / (alpha + e * beta))
        return n, budget / (coefficient * n**e)
