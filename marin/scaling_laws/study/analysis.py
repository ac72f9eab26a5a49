"""What the fit step adds to each label's fit: run-to-run noise, backtests, epochs per
budget, the model error pooled over the labels, and the comparison of the labels
(``marin.scaling_laws.calibration``, ``marin.scaling_laws.model_error`` and
``marin.scaling_laws.comparison`` do the statistics).

    fields = noise_of(fit, rows)          # {"noise": NoiseEstimate, "backtest": ...}
    comparisons = compare(rows_by_label, "plays", (3e11, 1e12), bootstrap=200)
    interval, parts = prediction_interval(fits, "plays", 3.2, (3.18, 3.22), 2e11, "approach3")
    parts.terms                           # ("fit", "noise", "model error")

The noise comes from seed replicates when the study planned them (the spread of the final
metric between seeds of one candidate), else from the residuals of the per-budget
parabolas; ``NoiseEstimate.source`` says which, and the report repeats it. The model error
comes from backtests of each label's prediction law (``study.extrapolation``), pooled over
the labels.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from marin.execution.errors import one_line
from marin.scaling_laws.run_status import RunStatus
from marin.scaling_laws.study.artifacts import (
    Epochs,
    LabelComparison,
    RunOutcome,
    RunRow,
    StudyFit,
    StudyFits,
)
from marin.scaling_laws.study.configs import StudyRun
from marin.scaling_laws.study.extrapolation import (
    extrapolation_budgets,
    extrapolations_of,
    pooled_model_error,
)
from marin.scaling_laws.study.fitting import clean_rows, fit_label

__all__ = ["IntervalParts", "compare", "epochs_of", "fit_labels", "missing_row", "noise_of",
           "prediction_interval"]

logger = logging.getLogger("marin.scaling_laws")


def fit_labels(rows: Sequence[RunRow], labels: Sequence[str], *, metric: str,
               targets: Sequence[float] = (), holdout_budget: float | None = None,
               bootstrap: int = 200, baseline: str | None = None,
               compare_at: Sequence[float] = ()) -> StudyFits:
    """Every label's ``StudyFit`` (with its noise and backtests), the model error pooled
    over the labels and their compute multipliers at ``compare_at``: what the study's fit
    step and ``marin scaling fit`` both write as ``fit.json``."""
    from dataclasses import replace

    fits = {}
    for label in labels:
        mine = [r for r in rows if r.label == label]
        fit = fit_label(mine, label=label, metric=metric, targets=targets,
                        holdout_budget=holdout_budget, bootstrap=bootstrap)
        fit = replace(fit, **noise_of(fit, mine))
        found, why_not = extrapolations_of(fit, mine)
        fits[label] = replace(fit, extrapolations=found, why_no_extrapolation=why_not)
    model_error, why_no_model_error = pooled_model_error(fits)
    baseline = baseline or labels[0]
    comparisons, why = compare({label: [r for r in rows if r.label == label]
                                for label in labels}, baseline, compare_at, bootstrap)
    return StudyFits(metric=metric, labels=tuple(labels), fits=fits, baseline=baseline,
                     comparisons=comparisons, comparison_error=why, model_error=model_error,
                     why_no_model_error=why_no_model_error)


def missing_row(run: StudyRun) -> RunRow:
    """The row of a run that left no outcome (excluded from the fits as ``missing``)."""
    nan = math.nan
    return RunRow(run=run.name, group=run.group, label=run.label, budget=run.budget,
                  params=nan, tokens=nan, flops=nan, loss=nan, status=RunStatus.MISSING,
                  reason=f"no outcome.json in {run.path}")


def epochs_of(outcomes: Sequence[RunOutcome], corpus_tokens: Mapping[str, int]
              ) -> tuple[Epochs, ...]:
    """Per budget, the mean number of passes the runs made over each training corpus."""
    by_budget: dict[float, dict[str, list[float]]] = {}
    for o in outcomes:
        if o.summary is None or o.replicate_of is not None:
            continue
        drawn = o.summary.tokens_by_component or {o.label: o.summary.tokens}
        for corpus, tokens in drawn.items():
            if corpus_tokens.get(corpus):
                by_budget.setdefault(o.budget, {}).setdefault(corpus, []).append(
                    tokens / corpus_tokens[corpus])
    return tuple(Epochs(b, {c: sum(v) / len(v) for c, v in sorted(corpora.items())})
                 for b, corpora in sorted(by_budget.items()))


def _replicate_groups(rows: Sequence[RunRow]) -> list[list[float]]:
    ok = {r.run: r for r in rows if r.status == RunStatus.OK and math.isfinite(r.loss)}
    groups: dict[str, list[float]] = {}
    for r in ok.values():
        if r.replicate_of is not None and r.replicate_of in ok:
            groups.setdefault(r.replicate_of, [ok[r.replicate_of].loss]).append(r.loss)
    return [g for g in groups.values() if len(g) >= 2]


def noise_of(fit: StudyFit, rows: Sequence[RunRow]) -> dict[str, Any]:
    """``noise``, ``backtest`` and ``backtest_error`` for a label's ``StudyFit``."""
    from marin.scaling_laws.calibration import (
        backtest,
        noise_from_replicates,
        noise_from_residuals,
        why_no_backtest,
    )

    records, _ = clean_rows(rows)
    groups = _replicate_groups(rows)
    try:
        noise = noise_from_replicates(groups) if groups else noise_from_residuals(records)
    except ValueError as e:
        return {"noise": None, "backtest": None,
                "backtest_error": f"no noise estimate: {one_line(e)}"}
    try:
        result = backtest(records, fit.label, noise)
    except ValueError as e:
        return {"noise": noise, "backtest": None, "backtest_error": one_line(e)}
    return {"noise": noise, "backtest": result,
            "backtest_error": None if result is not None else why_no_backtest(records)}


@dataclass(frozen=True)
class IntervalParts:
    """What a prediction's interval is made of: ``terms`` among ``fit``, ``noise`` and
    ``model error``, with the noise and the model error's standard deviation (loss units)."""

    terms: tuple[str, ...]
    noise: Any = None  # NoiseEstimate
    model_std: float | None = None
    model_dof: int | None = None


def prediction_interval(fits: StudyFits, label: str, loss: float | None,
                        fit_interval: tuple[float, float] | None, budget: float,
                        loss_from: str | None) -> tuple[tuple[float, float] | None,
                                                        IntervalParts]:
    """The 95% interval of ``label``'s loss predicted at ``budget`` (by ``loss_from``) for
    one run: the fit's spread, the label's run-to-run noise and the pooled model error, each
    where it could be estimated."""
    fit = fits.fits[label]
    terms = ("fit",) if fit_interval is not None else ()
    if loss is None or fit.noise is None:
        return fit_interval, IntervalParts(terms)
    from marin.scaling_laws.calibration import calibrated_interval

    error = fits.model_error
    std = None
    if error is not None:
        try:
            std = loss * error.std_at(extrapolation_budgets(fit, loss_from), budget)
        except ValueError:  # fewer than 2 budgets: no line to extrapolate, no bend to add
            error = None
    terms += ("noise",) + (("model error",) if std is not None else ())
    interval = calibrated_interval(loss, fit_interval, fit.noise, model_std=std or 0.0,
                                   model_dof=error.dof if error is not None else None)
    return interval, IntervalParts(terms, fit.noise, std, error.dof if error else None)


def compare(rows_by_label: Mapping[str, Sequence[RunRow]], baseline: str,
            targets: Sequence[float], bootstrap: int, seed: int = 0
            ) -> tuple[tuple[LabelComparison, ...], str | None]:
    """Each label's compute multiplier against ``baseline`` at each target tier, and why
    there are none when the laws cannot be fitted (none either for a study of one label)."""
    if len(rows_by_label) < 2 or not targets:
        return (), None
    from marin.scaling_laws.comparison import compare_labels

    records = {label: clean_rows(rows)[0] for label, rows in rows_by_label.items()}
    try:
        found = compare_labels(records, baseline, list(targets), bootstrap=max(bootstrap, 0),
                               seed=seed)
    except ValueError as e:
        logger.warning("the labels could not be compared: %s", one_line(e))
        return (), one_line(e)
    return tuple(LabelComparison(baseline=m.baseline, label=m.label,
                                 target_budget=m.target_budget, loss=m.loss,
                                 compute_multiplier=m.multiplier, interval=m.interval,
                                 excludes_one=m.excludes_one, source=m.source) for m in found), None
