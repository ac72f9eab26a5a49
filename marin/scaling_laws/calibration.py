"""Run-to-run noise, and prediction intervals that include it.

    from marin.scaling_laws.calibration import (backtest, calibrated_interval,
                                                noise_from_replicates, noise_from_residuals)
    noise = noise_from_replicates([[3.112, 3.104], [2.871, 2.880, 2.868]])  # seeds per candidate
    noise = noise_from_residuals(runs)          # or: the scatter around each budget's parabola
    low, high = calibrated_interval(3.05, (3.03, 3.07), noise)   # where ONE run will land
    low, high = calibrated_interval(3.05, (3.03, 3.07), noise, model_std=0.02, model_dof=3)
    result = backtest(runs, "plays", noise)     # predict the largest budget from the others
    result.within_interval, result.error_percent
    approach2_extrapolations(runs, "plays", noise)   # leave out the smallest, the largest

A fit's interval covers the law, the loss an average run would reach; a single training run
lands off it by its own noise (the seed's initialisation and data order), which no fit of
other runs can remove. So the interval for the achieved loss of one run combines the fit's
half-width ``h`` (a normal's, at the same level) with the noise's, in quadrature:
``half = sqrt(h^2 + (t * std)^2)``, where ``t`` is Student's quantile with the noise's
``dof``, since the noise is itself estimated. Each side of an asymmetric fit interval (a
bootstrap's) is widened on its own. A law that bends is off by more than either part
(``marin.scaling_laws.model_error``): its standard deviation ``model_std`` enters the same
sum with Student's quantile on its own ``model_dof``,
``half = sqrt(h^2 + (t_noise * std)^2 + (t_model * model_std)^2)``.

Design note: the quadrature keeps each part's own quantile, so it is exact when either part
dominates and errs wide in between (97% at 3 dof, 95.7% at 10, for a 95% interval).
Student's t with Welch-Satterthwaite degrees of freedom would be narrower but falls short
at few dof (94%): a noise estimate that comes out low by chance also makes the fit look
dominant and lowers the quantile, exactly when the interval is too narrow already.

Noise estimates:

- ``noise_from_replicates``: the pooled variance of groups of runs that differ only in the
  seed, ``sum (x - group mean)^2 / sum (n_g - 1)``.
- ``noise_from_residuals``: the pooled variance of the runs around their budget's
  least-squares parabola in ln tokens, with ``n_b - 3`` degrees of freedom per budget (a
  parabola spends 3). Where the parabola is not the curve's true shape, its misfit counts
  as noise: an honest but wider interval. Replicates are the better estimate.

Design note: ``backtest`` builds its interval from the noise alone. The prediction is the
Approach 2 loss law of the smaller budgets' parabola minima, extrapolated to the largest;
the "achieved" value is the parabola minimum fitted there. Both carry the runs' noise: by
the delta method ``var(min_b) = std^2 * g' (X'X)^-1 g`` for each budget's parabola, carried
through the log-log line to the prediction. All terms scale with ``std^2``, so the
studentised error is t with the noise's ``dof``; what the interval leaves out is the law's
own misfit, which is what a backtest is for.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from scipy import stats

from marin.scaling_laws import isoflop_analysis as iso
from marin.scaling_laws.isoflop_analysis import MIN_POINTS_PER_BUDGET
from marin.scaling_laws.model_error import Extrapolation, curvature_factor
from marin.scaling_laws.model_error import check_version as _check_version
from marin.scaling_laws.values import RunRow

__all__ = ["BacktestResult", "NoiseEstimate", "approach2_extrapolations", "backtest",
           "calibrated_interval", "coverage", "ladder_backtests", "noise_from_replicates",
           "noise_from_residuals", "why_no_backtest"]


@dataclass(frozen=True)
class NoiseEstimate:
    """Run-to-run standard deviation of the final loss, and what it rests on."""

    FORMAT: ClassVar[int] = 1

    std: float  # loss units
    source: str  # "replicates" or "residuals"
    dof: int

    def to_json(self) -> dict[str, Any]:
        return {"format_version": self.FORMAT, "std": self.std, "source": self.source,
                "dof": self.dof}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> NoiseEstimate:
        _check_version(data, cls, "noise estimate")
        return cls(std=float(data["std"]), source=data["source"], dof=int(data["dof"]))


@dataclass(frozen=True)
class BacktestResult:
    """The largest swept budget's optimal loss, predicted from the smaller budgets."""

    FORMAT: ClassVar[int] = 1

    label: str
    budget: float
    predicted_loss: float
    interval: tuple[float, float]
    achieved_loss: float  # the parabola minimum fitted at `budget`
    within_interval: bool
    error_percent: float  # 100 * (predicted - achieved) / achieved
    level: float = 0.95

    def to_json(self) -> dict[str, Any]:
        return {"format_version": self.FORMAT, "label": self.label, "budget": self.budget,
                "predicted_loss": self.predicted_loss, "interval": list(self.interval),
                "achieved_loss": self.achieved_loss, "within_interval": self.within_interval,
                "error_percent": self.error_percent, "level": self.level}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BacktestResult:
        _check_version(data, cls, "backtest result")
        low, high = data["interval"]
        return cls(label=data["label"], budget=float(data["budget"]),
                   predicted_loss=float(data["predicted_loss"]),
                   interval=(float(low), float(high)),
                   achieved_loss=float(data["achieved_loss"]),
                   within_interval=bool(data["within_interval"]),
                   error_percent=float(data["error_percent"]),
                   level=float(data.get("level", 0.95)))


def noise_from_replicates(groups: Sequence[Sequence[float]]) -> NoiseEstimate:
    """Pooled standard deviation of runs repeated with different seeds (one group each)."""
    values = [np.asarray(g, dtype=float) for g in groups]
    if any(not np.isfinite(v).all() for v in values):
        raise ValueError("groups: a replicate loss is NaN or infinite; leave failed runs out")
    dof = sum(len(v) - 1 for v in values if len(v) > 1)
    if dof < 1:
        raise ValueError("groups: no group has 2 or more runs; plan replicates (2+ seeds of "
                         "one candidate) or estimate the noise from residuals")
    squares = sum(float(np.sum((v - v.mean()) ** 2)) for v in values if len(v) > 1)
    return NoiseEstimate(std=math.sqrt(squares / dof), source="replicates", dof=dof)


def noise_from_residuals(records: Sequence[RunRow]) -> NoiseEstimate:
    """Pooled standard deviation of the runs around their budgets' parabolas."""
    squares, dof = 0.0, 0
    for _, runs in _budgets(records):
        x, y = _xy(runs)
        coef = iso.fit_parabolas(x, y, huber_delta=None)[0]
        if len(runs) > 3 and np.isfinite(coef).all():
            squares += float(np.sum((y - np.polyval(coef, x)) ** 2))
            dof += len(runs) - 3
    if dof < 1:
        raise ValueError("records: no budget has more than 3 runs at 3+ sizes, so the "
                         "parabolas leave no residuals; add runs or use replicates")
    return NoiseEstimate(std=math.sqrt(squares / dof), source="residuals", dof=dof)


def calibrated_interval(point: float, fit_interval: tuple[float, float] | None,
                        noise: NoiseEstimate, level: float = 0.95, model_std: float = 0.0,
                        model_dof: int | None = None) -> tuple[float, float]:
    """Where one run's achieved loss lands at ``level``: the fit's interval (taken as a
    normal at the same ``level``; None: no fit uncertainty) widened by the noise and by the
    law's own error ``model_std`` (loss units; estimated with ``model_dof``)."""
    _check_level(level)
    if not math.isfinite(point):
        raise ValueError(f"point={point!r}: the predicted loss must be a finite number")
    _check_noise(noise)
    low, high = (point, point) if fit_interval is None else map(float, fit_interval)
    if not low <= high:
        raise ValueError(f"fit_interval={fit_interval!r}: give (low, high) with low <= high")
    model = 0.0
    if model_std:
        if not (math.isfinite(model_std) and model_std > 0 and model_dof and model_dof >= 1):
            raise ValueError(f"model_std={model_std!r}, model_dof={model_dof!r}: give a finite "
                             "std >= 0 and dof >= 1 (ModelError.std_at and .dof)")
        model = float(stats.t.ppf((1 + level) / 2, model_dof)) * model_std
    quantile = float(stats.t.ppf((1 + level) / 2, noise.dof)) * noise.std
    below = math.sqrt(max(point - low, 0.0) ** 2 + quantile**2 + model**2)
    above = math.sqrt(max(high - point, 0.0) ** 2 + quantile**2 + model**2)
    return point - below, point + above


def backtest(records: Sequence[RunRow], label: str, noise: NoiseEstimate,
             level: float = 0.95) -> BacktestResult | None:
    """Predict the largest swept budget's optimal loss from the smaller budgets' Approach 2
    law; None when that cannot be done (``why_no_backtest`` says why)."""
    _check_level(level)
    _check_noise(noise)
    fitted, largest = _fitted_budgets(records)
    if why_no_backtest(records) is not None:
        return None
    *smaller, last = fitted
    log_c = np.log([b for b, *_ in smaller])
    minima = np.array([m for _, m, _ in smaller])
    factors = np.array([v for *_, v in smaller])  # var(min_b) / std^2
    design = np.column_stack([np.ones_like(log_c), log_c - log_c.mean()])
    at = np.array([1.0, math.log(largest) - log_c.mean()])
    h = at @ np.linalg.pinv(design)  # the prediction's weights on ln(min_b)
    predicted = math.exp(float(h @ np.log(minima)))
    variance = predicted**2 * float(np.sum(h**2 * factors / minima**2)) + last[2]
    half = float(stats.t.ppf((1 + level) / 2, noise.dof)) * noise.std * math.sqrt(variance)
    achieved = last[1]
    low, high = predicted - half, predicted + half
    return BacktestResult(label=label, budget=largest, predicted_loss=predicted,
                          interval=(low, high), achieved_loss=achieved,
                          within_interval=bool(low <= achieved <= high),
                          error_percent=100.0 * (predicted - achieved) / achieved, level=level)


def approach2_extrapolations(records: Sequence[RunRow], label: str,
                             noise: NoiseEstimate) -> list[Extrapolation]:
    """Approach 2's loss law backtested along the ladder of fitted budgets: fitted without
    the smallest, predicting it; then fitted on the first k budgets (k from 2), predicting
    each larger one, so the errors are read at every distance the ladder spans."""
    _check_noise(noise)
    fitted, _ = _fitted_budgets(records)
    counts = {budget: len(runs) for budget, runs in _budgets(records)}
    return [_line_backtest(fitted, rest, left, label, noise, counts)
            for rest, left in ladder_backtests(len(fitted))]


def ladder_backtests(count: int) -> list[tuple[list[int], int]]:
    """The backtests of a ladder of ``count`` budgets (smallest first), as (indices fitted,
    index predicted): without the smallest, predicting it; then the first k (k >= 2),
    predicting each larger one. None below 3 budgets."""
    if count < 3:
        return []
    out = [(list(range(1, count)), 0)]
    out += [(list(range(k)), j) for k in range(2, count) for j in range(k, count)]
    return out


def _line_backtest(fitted: Sequence[tuple[float, float, float]], rest: Sequence[int],
                   left: int, label: str, noise: NoiseEstimate, counts: dict[float, int]
                   ) -> Extrapolation:
    used = [fitted[i] for i in rest]
    budget, achieved, factor = fitted[left]
    log_c = np.log([b for b, *_ in used])
    minima = np.array([m for _, m, _ in used])
    design = np.column_stack([np.ones_like(log_c), log_c - log_c.mean()])
    h = np.array([1.0, math.log(budget) - log_c.mean()]) @ np.linalg.pinv(design)
    predicted = math.exp(float(h @ np.log(minima)))
    # delta method, relative: the minima's noise carried through the line, and the
    # left-out minimum's own
    relative = float(np.sum(h**2 * np.array([v for *_, v in used]) / minima**2))
    relative += factor / achieved**2
    budgets = [b for b, *_ in used]
    return Extrapolation(
        label=label, budget=budget, fitted_budgets=tuple(budgets), predictor="approach2",
        runs=counts[budget], predicted_loss=predicted, achieved_loss=achieved,
        log_error=math.log(predicted / achieved), noise_std=noise.std * math.sqrt(relative),
        curvature_factor=curvature_factor(budgets, budget))


def why_no_backtest(records: Sequence[RunRow]) -> str | None:
    """Why ``backtest`` returns None for these runs; None when it can be made."""
    fitted, largest = _fitted_budgets(records)
    if largest is None:
        return "no runs with finite, positive values"
    if not fitted or fitted[-1][0] != largest:
        return (f"the largest budget, {largest:.3g}, has no parabola with a minimum (it "
                f"needs {MIN_POINTS_PER_BUDGET}+ runs at 3+ sizes around the optimum)")
    if len(fitted) < 3:
        return (f"{len(fitted) - 1} smaller budget(s) with a fitted parabola; predicting "
                f"{largest:.3g} needs 2")
    return None


def coverage(results: Sequence[BacktestResult]) -> dict[str, float]:
    """The fraction of results within their interval, per label."""
    hits: dict[str, list[bool]] = {}
    for r in results:
        hits.setdefault(r.label, []).append(r.within_interval)
    return {label: sum(v) / len(v) for label, v in hits.items()}


def _fitted_budgets(records: Sequence[RunRow]
                    ) -> tuple[list[tuple[float, float, float]], float | None]:
    """(budget, parabola minimum, var(minimum) / std^2) per budget that has a minimum, in
    increasing budget; and the largest budget swept."""
    groups = _budgets(records)
    fitted = []
    for budget, runs in groups:
        x, y = _xy(runs)
        coef = iso.fit_parabolas(x, y)[0]
        minimum = float(iso.parabola_minimum(coef[None])[0])
        if len(runs) >= MIN_POINTS_PER_BUDGET and np.isfinite(minimum):
            fitted.append((budget, minimum, _minimum_variance(x, coef)))
    return fitted, (groups[-1][0] if groups else None)


def _minimum_variance(x: np.ndarray, coef: np.ndarray) -> float:
    """``g' (X'X)^-1 g``: the delta-method variance of ``c - b^2/4a`` per unit noise
    variance, in coordinates centred on the runs (the minimum does not depend on them)."""
    shift = float(np.mean(x))
    a, b, _ = coef
    b_centred = b + 2 * a * shift
    design = np.vander(x - shift, 3)
    grad = np.array([b_centred**2 / (4 * a * a), -b_centred / (2 * a), 1.0])
    return float(grad @ np.linalg.pinv(design.T @ design) @ grad)


def _budgets(records: Sequence[RunRow]) -> list[tuple[float, list[RunRow]]]:
    kept, _ = iso.clean_records(records)
    return list(iso.group_by_budget(kept).items())


def _xy(runs: Sequence[RunRow]) -> tuple[np.ndarray, np.ndarray]:
    return np.log([r.tokens for r in runs]), np.array([r.loss for r in runs])


def _check_noise(noise: NoiseEstimate) -> None:
    if not (math.isfinite(noise.std) and noise.std >= 0 and noise.dof >= 1):
        raise ValueError(f"noise={noise!r}: needs a finite std >= 0 and dof >= 1; build it "
                         "with noise_from_replicates or noise_from_residuals")


def _check_level(level: float) -> None:
    if not 0 < level < 1:
        raise ValueError(f"level={level!r}: give a coverage between 0 and 1, e.g. 0.95")
