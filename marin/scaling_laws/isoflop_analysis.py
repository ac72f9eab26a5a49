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
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from scipy.optimize import least_squares

from marin.scaling_laws.budgets import DEFAULT_BUDGETS  # noqa: F401 (its older home)
from marin.scaling_laws.values import MIN_RUNS_PER_BUDGET, BudgetOptimum, PowerLaw, RunRow

logger = logging.getLogger("marin.scaling_laws")

MIN_POINTS_PER_BUDGET = MIN_RUNS_PER_BUDGET  # its older name


class ScalingFitError(ValueError):
    """The data cannot support the requested fit; the message says why."""


RunRecord = RunRow  # the older names of the one type of each
BudgetFit = BudgetOptimum
ScalingFit = PowerLaw


@dataclass
class IsoFlopAnalysis:
    budgets: list[BudgetOptimum]
    params_fit: PowerLaw
    tokens_fit: PowerLaw
    dropped: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"budgets": [asdict(b) for b in self.budgets],
                "params_fit": asdict(self.params_fit), "tokens_fit": asdict(self.tokens_fit),
                "dropped": self.dropped}


def clean_records(records: Sequence[RunRow]) -> tuple[list[RunRow], list[str]]:
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


def group_by_budget(records: Sequence[RunRow], tolerance: float = 0.1
                    ) -> dict[float, list[RunRow]]:
    """Runs grouped by budget: the ``budget`` field, or clusters of FLOPs within 10%."""
    groups: dict[float, list[RunRow]] = {}
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


def fit_budget(budget: float, runs: Sequence[RunRow], huber_delta: float = 0.01
               ) -> BudgetOptimum:
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
    return BudgetOptimum(
        budget=budget, coefficients=(float(a), float(b), float(c)),
        optimal_tokens=float(math.exp(x_opt)),
        optimal_tokens_interval=(float(math.exp(x_opt - 1.96 * se)),
                                 float(math.exp(x_opt + 1.96 * se))),
        optimal_params=float(math.exp(intercept + slope * x_opt)),
        optimal_loss=float(np.polyval(fit.x, x_opt)), points=len(runs))


def fit_parabolas(x: np.ndarray, y: np.ndarray, weights: np.ndarray | None = None,
                  huber_delta: float | None = 0.01, max_iter: int = 50) -> np.ndarray:
    """Parabolas ``y = a x^2 + b x + c`` of one budget's runs under many weightings at once.

    ``weights`` (R, n) holds one weighting per row (a bootstrap resample's counts); None is
    one row of ones. Returns (R, 3) rows of (a, b, c); a row is NaN where its runs with
    positive weight have fewer than 3 distinct x. With ``huber_delta`` the fit minimises
    ``fit_budget``'s Huber loss (the same minimum); with None, it is ordinary least squares.

    Design note: every step solves all rows' 3x3 normal equations together; x is centred
    first (ln tokens is ~20, so x^4 would swamp the other moments). The Huber loss is
    piecewise quadratic, so a Newton step on the current inliers lands on the minimum once
    they are the right ones (a few steps from least squares); a row takes the reweighted
    least-squares step instead (which never increases the loss) when that step does better.
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    w = np.ones((1, len(x))) if weights is None else np.asarray(weights, dtype=float)
    shift = float(np.mean(x))
    design = np.vander(x - shift, 3)  # (n, 3): x^2, x, 1
    onehot = np.eye(len(x))[np.unique(x, return_inverse=True)[1]]
    ok = ((w @ onehot) > 0).sum(axis=1) >= 3
    coef = _weighted_solve(design, w, y, ok)
    active = np.flatnonzero(ok) if huber_delta else np.array([], int)
    for _ in range(max_iter):
        if not active.size:
            break
        c, wa = coef[active], w[active]
        r = y - c @ design.T
        inlier = np.abs(r) <= huber_delta
        newton_ok = ((wa * inlier) @ onehot > 0).sum(axis=1) >= 3
        step = _weighted_solve(design, wa * inlier, np.zeros_like(y), newton_ok,
                               rhs=(wa * np.clip(r, -huber_delta, huber_delta)) @ design)
        robust = wa * np.minimum(1.0, huber_delta / np.maximum(np.abs(r), 1e-300))
        candidates = np.stack([c + step, _weighted_solve(design, robust, y, newton_ok | True)])
        losses = np.stack([_huber(y - k @ design.T, wa, huber_delta) for k in candidates])
        losses[0, ~newton_ok] = np.inf
        pick = np.argmin(losses, axis=0)
        before = _huber(r, wa, huber_delta)
        coef[active] = candidates[pick, np.arange(len(active))]
        # done when the loss stops falling (flat directions: many runs beyond delta)
        active = active[losses[pick, np.arange(len(active))] < before * (1 - 1e-12)]
    a, b, c = coef.T
    out = np.column_stack([a, b - 2 * a * shift, a * shift**2 - b * shift + c])
    out[~ok] = np.nan
    return out


def _weighted_solve(design: np.ndarray, w: np.ndarray, y: np.ndarray, ok: np.ndarray,
                    rhs: np.ndarray | None = None) -> np.ndarray:
    """Each row's weighted least squares ``(X' W X)^-1 X' W y`` (or ``^-1 rhs``); rows not
    ``ok`` (a singular system) get zeros."""
    normal = np.einsum("rn,ni,nj->rij", w, design, design)
    normal[~ok] = np.eye(3)
    rhs = (w * y) @ design if rhs is None else rhs
    out = np.linalg.solve(normal, rhs[..., None])[..., 0]
    out[~ok] = 0.0
    return out


def _huber(r: np.ndarray, w: np.ndarray, delta: float) -> np.ndarray:
    a = np.abs(r)
    return (w * np.where(a <= delta, 0.5 * r * r, delta * (a - 0.5 * delta))).sum(axis=1)


def parabola_minimum(coefficients: np.ndarray) -> np.ndarray:
    """The minimum value ``c - b^2 / 4a`` of each row (a, b, c); NaN where a <= 0."""
    a, b, c = np.asarray(coefficients, dtype=float).T
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(a > 0, c - b * b / (4 * a), np.nan)


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


def fit_power_law(budgets: np.ndarray, values: np.ndarray, quantity: str) -> PowerLaw:
    if len(budgets) < 2:
        raise ScalingFitError(f"a power law for {quantity} needs optima at 2 or more budgets, "
                              f"got {len(budgets)}")
    x, y = np.log(budgets), np.log(values)
    (slope, intercept), cov = _linear_fit(x, y)
    return PowerLaw(exponent=float(slope), coefficient=float(math.exp(intercept)),
                      exponent_se=float(math.sqrt(cov[0, 0])),
                      log_coefficient_se=float(math.sqrt(cov[1, 1])),
                    quantity=quantity)


def _linear_fit(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    design = np.vstack([x, np.ones_like(x)]).T
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    dof = len(x) - 2
    if dof <= 0:
        return coef, np.zeros((2, 2))
    residual_var = float(np.sum((design @ coef - y) ** 2)) / dof
    return coef, np.linalg.inv(design.T @ design) * residual_var


def fit_isoflops(records: Sequence[RunRow]) -> IsoFlopAnalysis:
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

