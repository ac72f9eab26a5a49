"""Backtests of the law a label's prediction uses, and the model error pooled from them.

    found, why = extrapolations_of(fit, rows)    # along the ladder: see ladder_backtests
    error, why = pooled_model_error(fits)        # ModelError over every label's backtests
    extrapolation_budgets(fit, "approach3")      # the budgets a prediction extrapolates from

The law is the one ``fitting.predicted_loss`` predicts with: Approach 3 where the label has
it (each left-out run's loss at its own N and D, from L(N, D) fitted on the other budgets),
else Approach 2's loss law (the left-out budget's parabola minimum). The statistics are
``marin.scaling_laws.model_error``'s.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from marin.execution.errors import one_line
from marin.scaling_laws.study.artifacts import RunRow, StudyFit
from marin.scaling_laws.study.fitting import clean_rows, fit_parametric

__all__ = ["extrapolation_budgets", "extrapolations_of", "pooled_model_error"]


def extrapolation_budgets(fit: StudyFit, predictor: str | None) -> list[float]:
    """The budgets ``predictor`` (``approach3``: every budget with runs; ``approach2``: the
    fitted parabolas) was fitted on."""
    fitted = [b.budget for b in fit.budgets]
    if predictor == "approach3":
        fitted += [b.budget for b in fit.budgets_not_fitted if b.runs > 0]
    return sorted(set(fitted))


def extrapolations_of(fit: StudyFit, rows: Sequence[RunRow]) -> tuple[tuple[Any, ...], str | None]:
    """The label's backtests (none, with the reason, when they cannot be made)."""
    from marin.scaling_laws.calibration import approach2_extrapolations

    if fit.noise is None:
        return (), "no noise estimate, so no share of the backtests' errors to take out"
    records, _ = clean_rows(rows)
    if fit.approach3 is not None:
        return _approach3_extrapolations(fit, records)
    if fit.approach2 is None:
        return (), "neither approach was fitted"
    try:
        found = approach2_extrapolations(records, fit.label, fit.noise)
    except ValueError as e:
        return (), one_line(e)
    return tuple(found), None if found else (
        f"{len(fit.budgets)} budget(s) with a parabola; a backtest leaves one out and needs "
        "2 left")


def _approach3_extrapolations(fit: StudyFit, records: Sequence[Any]
                              ) -> tuple[tuple[Any, ...], str | None]:
    import numpy as np

    from marin.scaling_laws.calibration import ladder_backtests
    from marin.scaling_laws.isoflop_analysis import group_by_budget
    from marin.scaling_laws.model_error import Extrapolation, curvature_factor

    groups = group_by_budget(records)
    budgets = sorted(groups)
    if len(budgets) < 3:
        return (), (f"{len(budgets)} budget(s); a backtest leaves one out and needs 2 left")
    found, reasons = [], []
    for rest_index, left_index in ladder_backtests(len(budgets)):
        left, fitted = budgets[left_index], [budgets[i] for i in rest_index]
        rest = [r for b in fitted for r in groups[b]]
        parametric, why = fit_parametric(rest)
        if parametric is None:
            reasons.append(f"from {', '.join(f'{b:.3g}' for b in fitted)} to {left:.3g}: {why}")
            continue
        runs = groups[left]
        achieved = np.array([r.loss for r in runs])
        with np.errstate(all="ignore"):
            predicted = np.asarray(parametric.loss([r.params for r in runs],
                                                   [r.tokens for r in runs]), dtype=float)
            errors = np.log(predicted / achieved)
        if not np.isfinite(errors).all():
            reasons.append(f"to {left:.3g}: L(N, D) is not finite at its runs")
            continue
        found.append(Extrapolation(
            label=fit.label, budget=float(left), fitted_budgets=tuple(map(float, fitted)),
            predictor="approach3", runs=len(runs), predicted_loss=float(predicted.mean()),
            achieved_loss=float(achieved.mean()), log_error=float(errors.mean()),
            noise_std=fit.noise.std * math.sqrt(float(np.mean(achieved**-2.0)) / len(runs)),
            curvature_factor=curvature_factor(fitted, left)))
    return tuple(found), "; ".join(reasons) or None


def pooled_model_error(fits: Mapping[str, StudyFit]) -> tuple[Any, str | None]:
    """The ``ModelError`` of every label's backtests, or None and why."""
    from marin.scaling_laws.model_error import model_error_from

    found = [e for fit in fits.values() for e in fit.extrapolations]
    if not found:
        reasons = "; ".join(f"{label}: {fit.why_no_extrapolation}" for label, fit in fits.items()
                            if fit.why_no_extrapolation)
        return None, f"no backtest could be made ({reasons or 'no label'})"
    try:
        return model_error_from(found), None
    except ValueError as e:
        return None, one_line(e)
