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
    NotCompared,
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

__all__ = ["IntervalParts", "compare", "epochs_of", "fit_labels", "improves", "missing_row",
           "noise_of", "prediction_interval", "screen_comparisons"]

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
    comparisons, not_compared = screen_comparisons(comparisons, fits, baseline, metric)
    return StudyFits(metric=metric, labels=tuple(labels), fits=fits, baseline=baseline,
                     comparisons=comparisons, comparison_error=why, not_compared=not_compared,
                     model_error=model_error, why_no_model_error=why_no_model_error)


def improves(fit: StudyFit) -> bool:
    """Whether the label's optimal loss falls with compute over the budgets swept: the 95%
    interval of its Approach 2 loss exponent lies below 0; from two budgets (no such
    interval), the drop between their minima is beyond the run-to-run noise (1.96 standard
    deviations of a difference). Without Approach 2, Approach 3's form falls by
    construction, and the label counts as improving."""
    law = fit.approach2.loss if fit.approach2 is not None else None
    if law is None:
        return True
    if law.exponent_se > 0 and math.isfinite(law.exponent_se):
        return law.exponent + 1.96 * law.exponent_se < 0
    minima = sorted(fit.budgets, key=lambda b: b.budget)
    if len(minima) < 2:
        return law.exponent < 0
    drop = minima[0].optimal_loss - minima[-1].optimal_loss
    noise = fit.noise.std if fit.noise is not None else 0.0
    return drop > 1.96 * math.sqrt(2) * noise and law.exponent < 0


def screen_comparisons(comparisons: Sequence[LabelComparison], fits: Mapping[str, StudyFit],
                       baseline: str, metric: str
                       ) -> tuple[tuple[LabelComparison, ...], tuple[NotCompared, ...]]:
    """The comparisons that mean something, and why the others were left out: a label
    (the baseline included) whose loss does not fall with compute has no multiplier, nor
    has one whose loss to reach lies below the label's fitted irreducible loss E."""
    stalled = sorted({c.label for c in comparisons} | {baseline}, key=list(fits).index)
    stalled = [label for label in stalled if label in fits and not improves(fits[label])]
    out = [NotCompared(label, f"{label} does not improve on {metric} over the budgets swept")
           for label in stalled]
    if baseline in stalled:
        out += [NotCompared(c.label, f"no compute multiplier against {baseline}, whose loss "
                            "does not fall with compute", c.target_budget)
                for c in comparisons if c.label not in stalled]
        return (), tuple(out)
    kept = []
    for c in comparisons:
        a3 = fits[c.label].approach3 if c.label in fits else None
        if c.label in stalled:
            continue
        if a3 is not None and c.loss < a3.E:
            out.append(NotCompared(c.label, f"{c.label} cannot reach {c.loss:.4g} on {metric} "
                                   f"(the loss of {baseline} at {c.target_budget:.3g} FLOPs): "
                                   f"below its fitted irreducible loss E={a3.E:.4g}",
                                   c.target_budget))
        else:
            kept.append(c)
    return tuple(kept), tuple(out)


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
    ``model error``, with the noise and the model error's standard deviation (loss units);
    ``loss`` is the prediction once corrected by the backtests' lean (``lean``, the
    relative correction ``ln(corrected / uncorrected)``; 0 without a model error)."""

    terms: tuple[str, ...]
    noise: Any = None  # NoiseEstimate
    model_std: float | None = None
    model_dof: int | None = None
    loss: float | None = None
    lean: float = 0.0


def prediction_interval(fits: StudyFits, label: str, loss: float | None,
                        fit_interval: tuple[float, float] | None, budget: float,
                        loss_from: str | None) -> tuple[tuple[float, float] | None,
                                                        IntervalParts]:
    """The 95% interval of ``label``'s loss predicted at ``budget`` (by ``loss_from``) for
    one run, and the prediction corrected by the lean the backtests show
    (``IntervalParts.loss``): the fit's spread, the label's run-to-run noise and the pooled
    model error (the bends' spread and the lean's uncertainty), each where it could be
    estimated."""
    fit = fits.fits[label]
    terms = ("fit",) if fit_interval is not None else ()
    if loss is None or fit.noise is None:
        return fit_interval, IntervalParts(terms, loss=loss)
    from marin.scaling_laws.calibration import calibrated_interval

    error = fits.model_error
    std, lean = None, 0.0
    if error is not None:
        try:
            fitted = extrapolation_budgets(fit, loss_from)
            lean = -error.lean_at(fitted, budget)
            std = loss * math.exp(lean) * error.std_at(fitted, budget)
        except ValueError:  # fewer than 2 budgets: no line to extrapolate, no bend to add
            error, lean = None, 0.0
    corrected = loss * math.exp(lean)
    if fit_interval is not None:
        fit_interval = (fit_interval[0] * math.exp(lean), fit_interval[1] * math.exp(lean))
    terms += ("noise",) + (("model error",) if std is not None else ())
    interval = calibrated_interval(corrected, fit_interval, fit.noise, model_std=std or 0.0,
                                   model_dof=error.dof if error is not None else None)
    return interval, IntervalParts(terms, fit.noise, std, error.dof if error else None,
                                   loss=corrected, lean=lean)


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
