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

__all__ = ["UNIDENTIFIED_RATIO", "comparison_line", "factor_text", "fmt", "fmt_interval",
           "intervals_line", "label_lines", "law_text", "parameter_text", "prediction_lines",
           "summary_lines"]

# An Approach 3 parameter whose standard error is above this many times its value is not
# identified by the runs: the data leave it free, and a number with a huge error bar would
# read as a finding.
UNIDENTIFIED_RATIO = 10.0


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


def exponent_error(law: PowerLaw) -> str:
    """``+/- 0.012``, or why there is no error: a law through two budgets has no residual."""
    if law.exponent_se > 0 and math.isfinite(law.exponent_se):
        return f"+/- {law.exponent_se:.3f}"
    return "no error estimate from two budgets"


def law_text(law: PowerLaw, symbol: str) -> str:
    return (f"{symbol} = {law.coefficient:.3g} * C^{law.exponent:.3f} "
            f"(exponent {exponent_error(law)})")


def parameter_text(name: str, value: float, se: float | None) -> str:
    """``alpha=0.6857 (+/- 0.41)``; ``B=not identified`` when the runs leave the parameter
    free (its standard error above ``UNIDENTIFIED_RATIO`` times its value, or not finite);
    no error at all when the fit gave none. NaN never prints."""
    if not math.isfinite(value):
        return f"{name}=not identified"
    if se is None:
        return f"{name}={value:.4g}"
    if not math.isfinite(se) or se > UNIDENTIFIED_RATIO * abs(value):
        return f"{name}=not identified"
    return f"{name}={value:.4g} (+/- {se:.2g})"


def factor_text(value: float | None, interval: Sequence[float] | None) -> str:
    """A positive quantity's interval as a factor around it: ``x/÷ 2.1`` (from value / 2.1
    to value * 2.1, the wider side of a skewed interval); ``n/a`` without a finite one."""
    if value is None or not (isinstance(value, (int, float)) and math.isfinite(value)
                             and value > 0):
        return "n/a"
    if not interval or not all(isinstance(v, (int, float)) and math.isfinite(v) and v > 0
                               for v in interval):
        return "n/a"
    low, high = interval
    return f"\u00d7/\u00f7 {fmt(max(value / low, high / value, 1.0), 2)}"


def label_lines(fit: StudyFit, prediction: Prediction | None,
                further: Sequence[Prediction] = ()) -> list[str]:
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
            parameter_text(k, getattr(a3, k), se.get(k)) for k in ("E", "A", "B", "alpha",
                                                                   "beta")))
    else:
        lines.append(f"Approach 3: not fitted ({fit.approach3_error})")
    for p in ([prediction] if prediction is not None else []) + list(further):
        lines.extend(prediction_lines(p))
    return lines


def prediction_lines(p: Prediction) -> list[str]:
    if p.candidate is None or p.optimum is None or p.optimum.best is None:
        return [f"held-out {p.budget:.3g} FLOPs: no prediction ({p.reason})"]
    _, source = p.optimum.best
    c = p.candidate
    lines = [f"held-out {p.budget:.3g} FLOPs: predicted optimum N = {fmt(source.params)} "
             f"params (95% {factor_text(source.params, source.params_interval)}), "
             f"D = {fmt(source.tokens)} "
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
    labels = f"{len(error.labels)} label{'s' if len(error.labels) != 1 else ''}"
    lean = (f"; predictions corrected by the backtests' lean, {sized[0].lean_percent:+.2f}% "
            f"at {sized[0].budget:.3g}" if sized and sized[0].lean_percent else "")
    return (f"intervals: fit spread + run-to-run noise + model error ({where}, from "
            f"{error.extrapolations} backtests of {labels}, {error.dof} dof{lean})")


def comparison_line(c: LabelComparison) -> str:
    verdict = "the interval excludes 1" if c.excludes_one else "the interval includes 1"
    return (f"compute multiplier of {c.label} against {c.baseline} at {c.target_budget:.3g} "
            f"FLOPs (loss {fmt(c.loss, 4)}): {fmt(c.compute_multiplier)}x (95% "
            f"{fmt_interval(c.interval)}); {verdict}")


def _once(items: Sequence[Any]) -> list[Any]:
    """``not_compared`` without repeats of one reason (a label stalled at every tier)."""
    seen: set[str] = set()
    return [n for n in items if not (n.reason in seen or seen.add(n.reason))]


def summary_lines(study: StudyResult) -> list[str]:
    """What a study found, label by label, then the comparison."""
    if len(study.labels) == 1:
        label = study.labels[0]
        return [*label_lines(study.fits[label], study.predictions.get(label),
                             study.checks_of(label)[1:]),
                intervals_line(study)]
    lines = [f"metric: {study.metric}; labels: {', '.join(study.labels)}"]
    for label in study.labels:
        lines += [f"{label}: {line.strip()}" for line in
                  label_lines(study.fits[label], study.predictions.get(label),
                              study.checks_of(label)[1:])]
    lines.append(intervals_line(study))
    lines += [comparison_line(c) for c in study.comparisons]
    lines += [n.reason for n in _once(study.not_compared)]
    if not study.comparisons and study.comparison_error:
        lines.append(f"labels not compared: {study.comparison_error}")
    return lines
