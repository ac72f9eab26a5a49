"""The one fitting pipeline: runs in, a ``StudyFit`` out. The study's fit step and
``marin scaling fit`` both call it.

    fit = fit_label(rows, label="plays", metric="macro_bpb", targets=(3e11, 1e12),
                    holdout_budget=2e11, bootstrap=200)
    fit.approach2.params.exponent, fit.approach3.alpha, fit.holdout.approach2.params
    predict_at(fit, 1e21)                 # TargetPrediction: the optimum by each approach

The cleaning rules, in order: a run whose status is not ``ok`` (diverged, out of memory,
invalid config, missing) is excluded with its reason; so is one whose params, tokens,
FLOPs or loss are NaN, infinite or not positive; a seed replicate (``replicate_of``) is
kept out of the fits (it measures run-to-run noise). Then, per budget, a robust parabola
needs 3 runs; the power laws across budgets need 2 fitted budgets; Approach 3 needs 5 runs.
A part the data cannot support is reported with its reason instead of raising.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from marin.scaling_laws.run_status import RunStatus
from marin.scaling_laws.study.artifacts import RunRow, StudyFit
from marin.scaling_laws.study.laws import (
    Approach2,
    Approach3,
    BudgetNotFitted,
    BudgetOptimum,
    ExcludedRun,
    Optimum,
    TargetPrediction,
)
from marin.scaling_laws.values import MIN_RUNS_PARAMETRIC, MIN_RUNS_PER_BUDGET

__all__ = ["MIN_RUNS_PARAMETRIC", "MIN_RUNS_PER_BUDGET", "clean_rows", "fit_label",
           "fit_parametric", "loss_interval", "predict_at", "predicted_loss"]

LEVEL = 0.95


def clean_rows(rows: Sequence[RunRow]) -> tuple[list[RunRow], list[ExcludedRun]]:
    """The rows the fits use, and those excluded with the reason (replicates are neither:
    they are not fitted, and not a failure)."""
    used, excluded = [], []
    for r in rows:
        if r.status != RunStatus.OK:
            excluded.append(ExcludedRun(r.run, r.budget, r.status, r.reason or ""))
            continue
        values = (r.params, r.tokens, r.flops, r.loss)
        if not all(math.isfinite(v) and v > 0 for v in values):
            excluded.append(ExcludedRun(
                r.run, r.budget, RunStatus.INVALID, f"params={r.params:.3g} tokens={r.tokens:.3g} "
                f"flops={r.flops:.3g} loss={r.loss}: NaN, infinite or not positive"))
        elif r.replicate_of is None:
            used.append(r)
    return used, excluded


def fit_label(rows: Sequence[RunRow], *, label: str = "default", metric: str = "loss",
              targets: Sequence[float] = (), holdout_budget: float | None = None,
              bootstrap: int = 200, seed: int = 0) -> StudyFit:
    """Approach 2 per budget and across budgets, Approach 3, and the optima at ``targets``
    and ``holdout_budget``, from one label's runs."""
    used, excluded = clean_rows(rows)
    budgets, not_fitted, a2, a2_error = _approach2(used)
    a3, a3_error = fit_parametric(used, bootstrap, seed)
    fit = StudyFit(label=label, metric=metric, runs=len(rows), used=len(used),
                   excluded=tuple(excluded), budgets=tuple(budgets),
                   budgets_not_fitted=tuple(not_fitted), approach2=a2, approach2_error=a2_error,
                   approach3=a3, approach3_error=a3_error)
    return replace(fit, predictions=tuple(predict_at(fit, b) for b in targets),
                   holdout=predict_at(fit, holdout_budget) if holdout_budget else None)


def _approach2(records: list[RunRow]) -> tuple[list[BudgetOptimum], list[BudgetNotFitted],
                                            Approach2 | None, str | None]:
    import numpy as np

    from marin.scaling_laws.isoflop_analysis import (
        ScalingFitError,
        fit_budget,
        fit_power_law,
        group_by_budget,
    )

    fitted, not_fitted = [], []
    for budget, runs in group_by_budget(records).items():
        if len(runs) < MIN_RUNS_PER_BUDGET:
            not_fitted.append(BudgetNotFitted(budget, len(runs), f"{len(runs)} usable run(s); "
                                              f"a parabola needs at least {MIN_RUNS_PER_BUDGET}"))
            continue
        try:
            fitted.append(fit_budget(budget, runs))
        except ScalingFitError as e:
            not_fitted.append(BudgetNotFitted(budget, len(runs), str(e)))
    if len(fitted) < 2:
        return fitted, not_fitted, None, (f"{len(fitted)} budget(s) could be fitted; the "
                                           "power laws N_opt(C) and D_opt(C) need at least 2")
    c = np.array([f.budget for f in fitted])
    laws = {q: fit_power_law(c, np.array([getattr(f, f"optimal_{q}") for f in fitted]), q)
            for q in ("params", "tokens", "loss")}
    return fitted, not_fitted, Approach2(**laws), None


def fit_parametric(records: Sequence[RunRow], bootstrap: int = 0, seed: int = 0
                   ) -> tuple[Approach3 | None, str | None]:
    """Approach 3 of the runs, or None and why it cannot be made."""
    if len(records) < MIN_RUNS_PARAMETRIC:
        return None, (f"{len(records)} usable run(s); L(N, D) needs at least "
                      f"{MIN_RUNS_PARAMETRIC}")
    import numpy as np
    from threadpoolctl import threadpool_limits

    from marin.scaling_laws.parametric import fit_parametric_loss

    try:
        # L-BFGS makes thousands of tiny BLAS calls; a multithreaded BLAS spends far more
        # time waking its threads than computing (18x slower on two busy cores).
        with threadpool_limits(limits=1, user_api="blas"), np.errstate(all="ignore"):
            return fit_parametric_loss([r.params for r in records],
                                       [r.tokens for r in records], [r.loss for r in records],
                                       bootstrap=bootstrap, flops=[r.flops for r in records],
                                       seed=seed), None
    except ValueError as e:
        return None, str(e)


def loss_interval(parametric: Approach3, params: float, tokens: float, level: float = LEVEL
                  ) -> tuple[float, float] | None:
    """A bootstrap interval of the parametric loss at (params, tokens); None when too few
    resamples gave a finite loss."""
    import numpy as np

    s = parametric.samples()
    if s is None or len(s) < 2:
        value = float(parametric.loss(params, tokens))
        return value, value
    with np.errstate(all="ignore"):  # resamples that ran off to infinity are dropped
        losses = s[:, 0] + s[:, 1] / params ** s[:, 3] + s[:, 2] / tokens ** s[:, 4]
    losses = losses[np.isfinite(losses)]
    if len(losses) < 2:
        return None
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(losses, [tail, 100 - tail])
    return float(low), float(high)


def predict_at(fit: StudyFit, budget: float) -> TargetPrediction:
    """Optimal params, tokens and loss at ``budget`` by each fit that exists."""
    a2 = a3 = None
    if fit.approach2 is not None:
        laws = fit.approach2
        a2 = Optimum(params=laws.params.predict(budget), tokens=laws.tokens.predict(budget),
                     loss=laws.loss.predict(budget),
                     params_interval=laws.params.interval(budget),
                     tokens_interval=laws.tokens.interval(budget),
                     loss_interval=laws.loss.interval(budget))
    if fit.approach3 is not None:
        parametric = fit.approach3
        optimum = parametric.predict_optimal(budget)
        a3 = Optimum(params=optimum.params, tokens=optimum.tokens,
                     loss=float(parametric.loss(optimum.params, optimum.tokens)),
                     params_interval=optimum.params_interval,
                     tokens_interval=optimum.tokens_interval,
                     loss_interval=loss_interval(parametric, optimum.params, optimum.tokens))
    return TargetPrediction(budget=float(budget), approach2=a2, approach3=a3)


def predicted_loss(fit: StudyFit, budget: float, params: float, tokens: float
                   ) -> tuple[float | None, tuple[float, float] | None, str | None]:
    """The loss predicted for a run of ``params`` and ``tokens`` at ``budget``: Approach 3
    at that (N, D) with its bootstrap interval; else Approach 2's loss law at the budget.
    Returns (loss, the fit's 95% interval, the approach)."""
    if fit.approach3 is not None:
        parametric = fit.approach3
        return (float(parametric.loss(params, tokens)),
                loss_interval(parametric, params, tokens), "approach3")
    if fit.approach2 is not None:
        law = fit.approach2.loss
        return law.predict(budget), law.interval(budget), "approach2"
    return None, None, None
