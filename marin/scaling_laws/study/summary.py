"""A study's findings in a few lines: what ``print_study_summary`` prints and what the
report opens with.

    for line in summary_lines(load_study("local_store/isoflop-tiny")):
        print(line)

Per label: the runs used, the exponents with their errors, Approach 3's parameters, and the
checked prediction; then what the prediction intervals are made of, and each label's
compute multiplier against the baseline. A study of one corpus prints its lines without a
label.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from marin.scaling_laws.study.artifacts import LabelComparison, Prediction, StudyFit, StudyResult
from marin.scaling_laws.study.laws import PowerLaw

__all__ = ["comparison_line", "fmt", "fmt_interval", "intervals_line", "label_lines",
           "law_text", "prediction_lines", "summary_lines"]


def fmt(value: Any, digits: int = 3) -> str:
    """``value`` to ``digits`` significant figures; ``-`` for None, NaN or a non-number."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return "-"
    return "-" if not math.isfinite(number) else f"{number:.{digits}g}"


def fmt_interval(pair: Sequence[float] | None) -> str:
    """``low - high``, or ``n/a`` when there is no finite interval."""
    if not pair or not all(isinstance(v, (int, float)) and math.isfinite(v) for v in pair):
        return "n/a"
    return f"{fmt(pair[0])} - {fmt(pair[1])}"


def law_text(law: PowerLaw, symbol: str) -> str:
    error = (f"+/- {law.exponent_se:.3f}" if law.exponent_se > 0 else
             "no error estimate from two budgets")
    return f"{symbol} = {law.coefficient:.3g} * C^{law.exponent:.3f} (exponent {error})"


def label_lines(fit: StudyFit, prediction: Prediction | None) -> list[str]:
    lines = [f"runs: {fit.used} used, {len(fit.excluded)} excluded"]
    if fit.approach2 is not None:
        lines.append("Approach 2: " + law_text(fit.approach2.params, "N_opt") + "; "
                     + law_text(fit.approach2.tokens, "D_opt"))
    else:
        lines.append(f"Approach 2: not fitted ({fit.approach2_error})")
    a3 = fit.approach3
    if a3 is not None:
        se = a3.standard_errors
        lines.append("Approach 3: L(N, D) = E + A/N^alpha + B/D^beta with " + ", ".join(
            f"{k}={getattr(a3, k):.4g}" + (f" (+/- {se[k]:.2g})" if k in se else "")
            for k in ("E", "A", "B", "alpha", "beta")))
    else:
        lines.append(f"Approach 3: not fitted ({fit.approach3_error})")
    if prediction is not None:
        lines.extend(prediction_lines(prediction))
    return lines


def prediction_lines(p: Prediction) -> list[str]:
    if p.candidate is None or p.optimum is None or p.optimum.best is None:
        return [f"held-out {p.budget:.3g} FLOPs: no prediction ({p.reason})"]
    _, source = p.optimum.best
    c = p.candidate
    lines = [f"held-out {p.budget:.3g} FLOPs: predicted optimum N = {fmt(source.params)} "
             f"params (95% {fmt_interval(source.params_interval)}), D = {fmt(source.tokens)} "
             f"tokens; trained hidden {c.hidden_dim}, {c.num_layers} layers, {fmt(c.params)} "
             f"params, {fmt(c.tokens)} tokens"]
    if p.achieved_loss is None:
        lines.append(f"  run {p.status}: {p.reason}")
    elif p.predicted_loss is None or p.error_percent is None:
        lines.append(f"  achieved loss {p.achieved_loss:.4f}; no loss was predicted")
    else:
        lines.append(f"  predicted loss {p.predicted_loss:.4f} (95% "
                     f"{fmt_interval(p.predicted_loss_interval)}), achieved "
                     f"{p.achieved_loss:.4f}: error {p.error_percent:+.2f}%")
    return lines


def intervals_line(study: StudyResult) -> str:
    """What the predictions' intervals are made of, with the model error's size."""
    noise = any(fit.noise is not None for fit in study.fits.values())
    if not noise:
        return "intervals: the fit's spread alone (no run-to-run noise could be estimated)"
    error = study.model_error
    if error is None:
        return (f"intervals: fit spread + run-to-run noise; no model error "
                f"({study.why_no_model_error})")
    sized = [p for p in study.predictions.values()
             if p.model_error_std is not None and p.predicted_loss]
    where = (f"{100 * sized[0].model_error_std / sized[0].predicted_loss:.2f}% of the loss at "
             f"{sized[0].budget:.3g} FLOPs" if sized else
             f"a bend of {error.curvature:.2g} per (ln C)^2")
    labels = f"{error.dof} label{'s' if error.dof != 1 else ''}"
    return (f"intervals: fit spread + run-to-run noise + model error ({where}, from backtests "
            f"of {labels}, {error.dof} dof)")


def comparison_line(c: LabelComparison) -> str:
    verdict = "the interval excludes 1" if c.excludes_one else "the interval includes 1"
    return (f"compute multiplier of {c.label} against {c.baseline} at {c.target_budget:.3g} "
            f"FLOPs (loss {fmt(c.loss, 4)}): {fmt(c.compute_multiplier)}x (95% "
            f"{fmt_interval(c.interval)}); {verdict}")


def summary_lines(study: StudyResult) -> list[str]:
    """What a study found, label by label, then the comparison."""
    if len(study.labels) == 1:
        label = study.labels[0]
        return [*label_lines(study.fits[label], study.predictions.get(label)),
                intervals_line(study)]
    lines = [f"metric: {study.metric}; labels: {', '.join(study.labels)}"]
    for label in study.labels:
        lines += [f"{label}: {line.strip()}" for line in
                  label_lines(study.fits[label], study.predictions.get(label))]
    lines.append(intervals_line(study))
    lines += [comparison_line(c) for c in study.comparisons]
    if not study.comparisons and study.comparison_error:
        lines.append(f"labels not compared: {study.comparison_error}")
    return lines
