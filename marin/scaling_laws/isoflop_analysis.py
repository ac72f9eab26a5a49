"""IsoFLOP analysis: budgets, candidate runs, and the fits that find compute-optimal models.

    from marin.scaling_laws.isoflop_analysis import DEFAULT_BUDGETS, fit_isoflops
    DEFAULT_BUDGETS[3]                                 # 3e19
    analysis = fit_isoflops(runs)                      # runs: params, tokens, flops, loss
    analysis.budgets[0].optimal_tokens                 # per budget: a robust parabola's minimum
    analysis.params_fit.predict(1e21)                  # N_opt = k * C^a across budgets
    analysis.params_fit.exponent                       # a

Per budget, loss is fitted as a quadratic in log tokens with a Huber loss (robust to one bad
run); its minimum is the optimal token count, with a delta-method standard error. Across
budgets, ``N_opt = k * C^a`` and ``D_opt = k' * C^b`` are straight lines in log-log space
(Hoffmann et al. 2022, Approach 2).

FLOP accounting: a budget ``C`` is training FLOPs as the trainer and the candidates count
them, ``tokens * TransformerConfig.training_flops_per_token()`` (three forward passes,
attention and the LM head included), not ``6 * N * D``. The runs' ``flops`` are grouped into
budgets as given, so ``params_fit.predict(C)`` is the optimal size at ``C`` in that
accounting, the same ``C`` that ``candidates_for_budget(C)`` spends. Candidate runs live in
``marin.scaling_laws.candidates``.
"""

from __future__ import annotations

import logging
import math
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from scipy.optimize import least_squares

from marin.scaling_laws.budgets import DEFAULT_BUDGETS  # noqa: F401 (its older home)

logger = logging.getLogger("marin.scaling_laws")

MIN_POINTS_PER_BUDGET = 3


class ScalingFitError(ValueError):
    """The data cannot support the requested fit; the message says why."""


@dataclass(frozen=True)
class RunRecord:
    """A finished run, as the fits read it."""

    params: float
    tokens: float
    flops: float
    loss: float
    budget: float | None = None


@dataclass(frozen=True)
class BudgetFit:
    """The robust parabola of loss in log tokens for one budget."""

    budget: float
    coefficients: tuple[float, float, float]  # loss = a x^2 + b x + c, x = ln(tokens)
    optimal_tokens: float
    optimal_tokens_interval: tuple[float, float]  # +/- 1.96 standard errors
    optimal_params: float
    optimal_loss: float
    points: int

    def loss_at(self, tokens: np.ndarray | float) -> np.ndarray | float:
        a, b, c = self.coefficients
        x = np.log(tokens)
        return a * x * x + b * x + c


@dataclass(frozen=True)
class ScalingFit:
    """``y = coefficient * C ** exponent`` fitted in log-log space."""

    exponent: float
    coefficient: float
    exponent_se: float
    log_coefficient_se: float
    quantity: str  # "params" or "tokens"

    def predict(self, budget: float | np.ndarray) -> float | np.ndarray:
        return self.coefficient * np.asarray(budget, dtype=float) ** self.exponent

    def interval(self, budget: float, z: float = 1.96) -> tuple[float, float]:
        """An approximate interval ignoring the covariance of slope and intercept."""
        log_c = math.log(budget)
        se = math.hypot(self.log_coefficient_se, self.exponent_se * log_c)
        center = math.log(float(self.predict(budget)))
        return _exp(center - z * se), _exp(center + z * se)


def _exp(x: float) -> float:
    """``e ** x``, infinite past the largest float (a wide interval far out, not an error)."""
    return math.exp(x) if x < _LOG_MAX else math.inf


_LOG_MAX = math.log(sys.float_info.max)


@dataclass
class IsoFlopAnalysis:
    budgets: list[BudgetFit]
    params_fit: ScalingFit
    tokens_fit: ScalingFit
    dropped: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"budgets": [asdict(b) for b in self.budgets],
                "params_fit": asdict(self.params_fit), "tokens_fit": asdict(self.tokens_fit),
                "dropped": self.dropped}


def clean_records(records: Sequence[RunRecord]) -> tuple[list[RunRecord], list[str]]:
    """Drop runs whose loss or sizes are NaN, infinite or not positive (with a warning)."""
    kept, dropped = [], []
    for r in records:
        values = (r.params, r.tokens, r.flops, r.loss)
        if all(math.isfinite(v) for v in values) and min(values) > 0:
            kept.append(r)
        else:
            dropped.append(f"params={r.params:.3g} tokens={r.tokens:.3g} loss={r.loss}")
    if dropped:
        logger.warning("dropped %d run(s) with NaN, infinite or non-positive values: %s",
                       len(dropped), "; ".join(dropped))
    return kept, dropped


def group_by_budget(records: Sequence[RunRecord], tolerance: float = 0.1
                    ) -> dict[float, list[RunRecord]]:
    """Runs grouped by budget: the ``budget`` field, or clusters of FLOPs within 10%."""
    groups: dict[float, list[RunRecord]] = {}
    unlabeled = sorted((r for r in records if r.budget is None), key=lambda r: r.flops)
    for r in records:
        if r.budget is not None:
            groups.setdefault(float(r.budget), []).append(r)
    anchor: float | None = None
    for r in unlabeled:
        if anchor is None or r.flops > anchor * (1 + tolerance):
            anchor = r.flops
        groups.setdefault(anchor, []).append(r)
    return dict(sorted(groups.items()))


def fit_budget(budget: float, runs: Sequence[RunRecord], huber_delta: float = 0.01
               ) -> BudgetFit:
    if len(runs) < MIN_POINTS_PER_BUDGET:
        raise ScalingFitError(
            f"budget {budget:.3g} has {len(runs)} run(s); a parabola needs at least "
            f"{MIN_POINTS_PER_BUDGET} (add runs at this budget or leave it out)")
    x = np.log([r.tokens for r in runs])
    y = np.array([r.loss for r in runs])
    start = np.polyfit(x, y, 2) if len(runs) > 3 else np.linalg.solve(
        np.vander(x, 3), y)
    fit = least_squares(lambda p: np.polyval(p, x) - y, start, loss="huber",
                        f_scale=huber_delta)
    a, b, c = fit.x
    if a <= 0:
        raise ScalingFitError(
            f"budget {budget:.3g}: loss against log tokens has no minimum (the parabola "
            "opens downward); the runs probably do not bracket the optimum, add smaller and "
            "larger models")
    x_opt = -b / (2 * a)
    se = _minimum_standard_error(fit, len(runs), a, b)
    log_n = np.log([r.params for r in runs])
    slope, intercept = np.polyfit(x, log_n, 1)
    return BudgetFit(
        budget=budget, coefficients=(float(a), float(b), float(c)),
        optimal_tokens=float(math.exp(x_opt)),
        optimal_tokens_interval=(float(math.exp(x_opt - 1.96 * se)),
                                 float(math.exp(x_opt + 1.96 * se))),
        optimal_params=float(math.exp(intercept + slope * x_opt)),
        optimal_loss=float(np.polyval(fit.x, x_opt)), points=len(runs))


def _minimum_standard_error(fit: Any, n: int, a: float, b: float) -> float:
    """Delta-method standard error of the parabola's minimum ``-b / 2a``."""
    dof = max(1, n - 3)
    jac = fit.jac
    residual_var = float(np.sum(fit.fun**2)) / dof
    try:
        cov = np.linalg.pinv(jac.T @ jac) * residual_var
    except np.linalg.LinAlgError:
        return float("nan")
    grad = np.array([b / (2 * a * a), -1 / (2 * a), 0.0])
    return float(math.sqrt(max(0.0, grad @ cov @ grad)))


def fit_power_law(budgets: np.ndarray, values: np.ndarray, quantity: str) -> ScalingFit:
    if len(budgets) < 2:
        raise ScalingFitError(f"a power law for {quantity} needs optima at 2 or more budgets, "
                              f"got {len(budgets)}")
    x, y = np.log(budgets), np.log(values)
    (slope, intercept), cov = _linear_fit(x, y)
    return ScalingFit(exponent=float(slope), coefficient=float(math.exp(intercept)),
                      exponent_se=float(math.sqrt(cov[0, 0])),
                      log_coefficient_se=float(math.sqrt(cov[1, 1])), quantity=quantity)


def _linear_fit(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    design = np.vstack([x, np.ones_like(x)]).T
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    dof = len(x) - 2
    if dof <= 0:
        return coef, np.zeros((2, 2))
    residual_var = float(np.sum((design @ coef - y) ** 2)) / dof
    return coef, np.linalg.inv(design.T @ design) * residual_var


def fit_isoflops(records: Sequence[RunRecord]) -> IsoFlopAnalysis:
    """Per-budget parabolas, then N_opt and D_opt as power laws of the budget."""
    kept, dropped = clean_records(records)
    groups = group_by_budget(kept)
    fits = [fit_budget(budget, runs) for budget, runs in groups.items()]
    budgets = np.array([f.budget for f in fits])
    return IsoFlopAnalysis(
        budgets=fits,
        params_fit=fit_power_law(budgets, np.array([f.optimal_params for f in fits]),
                                 "params"),
        tokens_fit=fit_power_law(budgets, np.array([f.optimal_tokens for f in fits]),
                                 "tokens"),
        dropped=dropped)

