"""A study's ``report.md``, ``study.json`` and plots, from its ``StudyResult``.

    render_report(load_study("local_store/isoflop-tiny"), "out/report")   # -> out/report/report.md

The report opens with the findings; with several labels, a comparison (the exponents side
by side, the predicted loss of each label at the next tiers, the compute multipliers, the
epochs per budget); then, per label, its runs, fits and checked prediction with the source
of its noise estimate, its backtests and what its prediction interval is made of; then the
model error pooled over the labels' backtests. Plots are drawn into a temporary folder and moved to
the output, which may be any URL ``marin.storage.files`` writes to; each file appears whole,
``report.md`` last.
"""

from __future__ import annotations

import json
import os
import tempfile

from marin.scaling_laws.run_status import RunStatus
from marin.scaling_laws.study.artifacts import RESULT, Prediction, StudyFit, StudyResult
from marin.scaling_laws.study.summary import (
    comparison_line,
    exponent_error,
    fmt,
    fmt_interval,
    law_text,
    parameter_text,
    prediction_lines,
    summary_lines,
)
from marin.scaling_laws.values import RunRow
from marin.storage.files import join_url, move_into_place

__all__ = ["render_report", "trained_from"]


def render_report(result: StudyResult, output_path: str) -> str:
    from marin.scaling_laws.study.report_plots import draw_plots

    with tempfile.TemporaryDirectory() as tmp:
        plots = draw_plots(result, tmp)
        with open(os.path.join(tmp, RESULT), "w", encoding="utf-8") as f:
            json.dump(result.to_json(), f, indent=1, allow_nan=False)
        with open(os.path.join(tmp, "report.md"), "w", encoding="utf-8") as f:
            f.write(markdown(result, plots))
        # the plots first: report.md never links to a plot not there yet
        for name in sorted(os.listdir(tmp), key=lambda n: (n == "report.md", n)):
            move_into_place(os.path.join(tmp, name), join_url(output_path, name))
    return join_url(output_path, "report.md")


def markdown(result: StudyResult, plots: list[str]) -> str:
    out = [f"# {result.title or 'IsoFLOP study'}", "",
           f"Fitted on `{result.metric}`{_metric_note(result.metric)}.", ""]
    out += [f"- {line.strip()}" for line in summary_lines(result)]
    if len(result.labels) > 1:
        out += _comparison_section(result)
    out += _epochs_section(result)
    for label in result.labels:
        out += _label_section(result, label, len(result.labels) > 1)
    out += _model_error_section(result)
    if plots:
        out += ["", "## Plots", ""]
        for stem in plots:
            out += [f"![{stem}]({stem}.png)", "", f"[{stem} (interactive)]({stem}.html)", ""]
    return "\n".join(out) + "\n"


def _metric_note(metric: str) -> str:
    if metric.endswith("bpb"):
        return " (bits per byte of the validation text: the same yardstick for any tokenizer)"
    return " (mean next-token loss in nats)"


def _se(law) -> str:
    return f"{law.exponent:.3f} {exponent_error(law)}"


def _a3_cell(a3, name: str) -> str:
    """``0.686 (0.21 - 1.1)``, or ``not identified`` (``parameter_text``'s rule)."""
    value = getattr(a3, name)
    if "not identified" in parameter_text(name, value, a3.standard_errors.get(name)):
        return "not identified"
    return f"{value:.3f} ({fmt_interval(a3.intervals.get(name))})"


def _comparison_section(result: StudyResult) -> list[str]:
    out = ["", "## Comparison of the labels", "",
           "| label | N_opt exponent | D_opt exponent | L_opt exponent | alpha (95%) | "
           "beta (95%) |", "|---|---|---|---|---|---|"]
    for label in result.labels:
        fit = result.fits[label]
        a2, a3 = fit.approach2, fit.approach3
        cells = [_se(a2.params), _se(a2.tokens), _se(a2.loss)] if a2 else ["-", "-", "-"]
        if a3 is not None:
            cells += [_a3_cell(a3, "alpha"), _a3_cell(a3, "beta")]
        else:
            cells += ["-", "-"]
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    tiers = study_tiers(result)
    if tiers:
        out += ["", "Predicted optimal loss at the study's held-out budgets and 10x past them "
                "(Approach 2's loss law; Approach 3 in brackets):", "",
                "| label | " + " | ".join(f"{b:.3g}" for b in tiers) + " |",
                "|---|" + "---|" * len(tiers)]
        below = []
        for label in result.labels:
            cells = []
            for budget in tiers:
                a2, a3, under = tier_losses(result.fits[label], budget)
                cells.append(f"{fmt(a2, 4)}{'*' if under else ''} ({fmt(a3, 4)})")
                if under:
                    below.append(f"{label} at {budget:.3g}")
            out.append(f"| {label} | " + " | ".join(cells) + " |")
        if below:
            out += ["", "\\* Approach 2's loss law falls below Approach 3's irreducible loss E "
                    f"there ({', '.join(below)}): a pure power law cannot follow the loss's "
                    "floor, so read Approach 3's figure."]
    out += ["", f"Compute multipliers against `{result.baseline}`: how many times the "
            "baseline's compute a label needs to reach the loss the baseline is predicted to "
            "reach at the tier (above 1: the label is less efficient), with a joint bootstrap "
            "95% interval.", ""]
    if result.comparisons:
        out += ["| label | tier | loss | multiplier | 95% | excludes 1 | from |",
                "|---|---|---|---|---|---|---|"]
        out += [f"| {c.label} | {c.target_budget:.3g} | {fmt(c.loss, 4)} | "
                f"{fmt(c.compute_multiplier)} | {fmt_interval(c.interval)} | "
                f"{'yes' if c.excludes_one else 'no'} | {c.source} |"
                for c in result.comparisons]
        out += [""] + [f"- {comparison_line(c)}" for c in result.comparisons]
        out += [f"- {n.reason}" for n in result.not_compared]
    elif result.not_compared:
        out += [f"- {n.reason}" for n in result.not_compared]
    else:
        out.append(f"Not compared: {result.comparison_error or 'no tier to compare at'}")
    return out


def study_tiers(result: StudyResult) -> list[float]:
    """The budgets the report forecasts at: the study's held-out budgets (else its largest
    fitted one) and 10x past each, not tiers of another scale."""
    held_out = {p.budget for p in result.predictions.values()}
    if not held_out:
        fitted = [b.budget for fit in result.fits.values() for b in fit.budgets]
        held_out = {max(fitted)} if fitted else set()
    return sorted(held_out | {10 * b for b in held_out})


def tier_losses(fit: StudyFit, budget: float) -> tuple[float | None, float | None, bool]:
    """Approach 2's and Approach 3's optimal loss at ``budget`` (None where not fitted), and
    whether Approach 2's falls below Approach 3's irreducible loss E."""
    a2 = float(fit.approach2.loss.predict(budget)) if fit.approach2 is not None else None
    a3 = None
    if fit.approach3 is not None:
        optimum = fit.approach3.predict_optimal(budget)
        a3 = float(fit.approach3.loss(optimum.params, optimum.tokens))
    under = a2 is not None and fit.approach3 is not None and a2 < fit.approach3.E
    return a2, a3, under


def _epochs_section(result: StudyResult) -> list[str]:
    rows = [(label, e) for label in result.labels for e in result.fits[label].epochs]
    if not rows:
        return []
    out = ["", "## Epochs per budget", "",
           "Passes over each training corpus at each budget (the mean over the budget's "
           "runs). A small corpus repeated many times skews a comparison.", "",
           "| label | budget | epochs by corpus |", "|---|---|---|"]
    out += [f"| {label} | {e.budget:.3g} | " + ", ".join(
        f"{c} {v:.2f}" for c, v in e.by_corpus.items()) + " |" for label, e in rows]
    return out


def trained_from(row: RunRow) -> str:
    """``from scratch``, or ``cooldown of <stable run folder> from step <k>``."""
    if row.parent_run is None:
        return "from scratch"
    return f"cooldown of {str(row.parent_run).rstrip('/').rpartition('/')[2]} from step " \
           f"{row.branch_step}"


def _label_section(result: StudyResult, label: str, named: bool) -> list[str]:
    fit = result.fits[label]
    level = "###" if named else "##"
    out = ["", f"## Label {label}"] if named else []
    out += ["", f"{level} Runs", "",
            f"| run | budget | hidden | layers | params | tokens | {result.metric} "
            "(first -> final) | trained | status |", "|---|---|---|---|---|---|---|---|---|"]
    for r in result.runs_of(label):
        ok = r.status == RunStatus.OK
        status = r.status if ok else f"**excluded: {r.status}**"
        if r.replicate_of and ok:
            status = f"seed replicate of {r.replicate_of}"
        out.append(f"| {r.run} | {fmt(r.budget)} | {r.hidden_dim or '-'} | "
                   f"{r.num_layers or '-'} | {fmt(r.params)} | {fmt(r.tokens)} | "
                   f"{fmt(r.first_eval_loss, 4)} -> {fmt(r.loss, 4)} | {trained_from(r)} | "
                   f"{status} |")
    if fit.excluded:
        out += ["", f"{level}# Excluded runs", ""]
        out += [f"- `{e.run}` ({fmt(e.budget)} FLOPs): {e.status}: {e.reason}"
                for e in fit.excluded]
    out += _approach2_section(fit, level) + _approach3_section(fit, level)
    out += _targets_section(fit, level) + _noise_section(fit, level)
    for prediction in result.checks_of(label):
        out += _prediction_section(prediction, level)
    return out


def _approach2_section(fit: StudyFit, level: str) -> list[str]:
    out = ["", f"{level} Approach 2: IsoFLOP minima", "",
           "| budget | runs | optimal tokens | 95% interval | optimal params | minimum loss |",
           "|---|---|---|---|---|---|"]
    for b in fit.budgets:
        out.append(f"| {fmt(b.budget)} | {b.points} | {fmt(b.optimal_tokens)} | "
                   f"{fmt_interval(b.optimal_tokens_interval)} | {fmt(b.optimal_params)} | "
                   f"{fmt(b.optimal_loss, 4)} |")
    for b in fit.budgets_not_fitted:
        out.append(f"| {fmt(b.budget)} | {b.runs} | not fitted: {b.reason} | | | |")
    out.append("")
    if fit.approach2 is not None:
        a2 = fit.approach2
        out += [f"- {law_text(a2.params, 'N_opt')}", f"- {law_text(a2.tokens, 'D_opt')}",
                f"- {law_text(a2.loss, 'L_opt')}"]
    else:
        out.append(f"- not fitted across budgets: {fit.approach2_error}")
    return out


def _approach3_section(fit: StudyFit, level: str) -> list[str]:
    out = ["", f"{level} Approach 3: L(N, D) = E + A / N^alpha + B / D^beta", ""]
    a3 = fit.approach3
    if a3 is None:
        return [*out, f"Not fitted: {fit.approach3_error}"]
    out += ["| parameter | value | bootstrap s.e. | 95% |", "|---|---|---|---|"]
    for k in ("E", "A", "B", "alpha", "beta"):
        se = a3.standard_errors.get(k)
        if "not identified" in parameter_text(k, getattr(a3, k), se):
            out.append(f"| {k} | {fmt(getattr(a3, k), 4)} | not identified | - |")
        else:
            out.append(f"| {k} | {getattr(a3, k):.4g} | {fmt(se, 2)} | "
                       f"{fmt_interval(a3.intervals.get(k))} |")
    return out


def _targets_section(fit: StudyFit, level: str) -> list[str]:
    out = ["", f"{level} Predicted optima at larger budgets", "",
           "| budget | N_opt (A2) | 95% | D_opt (A2) | N_opt (A3) | 95% | D_opt (A3) | "
           "loss (A3) | 95% |", "|---|---|---|---|---|---|---|---|---|"]
    for p in fit.predictions:
        a2, a3 = p.approach2, p.approach3
        out.append(f"| {fmt(p.budget)} | {fmt(a2 and a2.params)} | "
                   f"{fmt_interval(a2 and a2.params_interval)} | {fmt(a2 and a2.tokens)} | "
                   f"{fmt(a3 and a3.params)} | {fmt_interval(a3 and a3.params_interval)} | "
                   f"{fmt(a3 and a3.tokens)} | {fmt(a3 and a3.loss, 4)} | "
                   f"{fmt_interval(a3 and a3.loss_interval)} |")
    return out


def _noise_section(fit: StudyFit, level: str) -> list[str]:
    out = ["", f"{level} Run-to-run noise and backtest", ""]
    if fit.noise is None:
        out.append(f"- no noise estimate: the intervals are the fit's alone "
                   f"({fit.backtest_error})")
    else:
        where = ("seed replicates of the same candidates" if fit.noise.source == "replicates"
                 else "the residuals of the per-budget parabolas (no seed replicates)")
        out.append(f"- run-to-run noise: standard deviation {fit.noise.std:.4g} "
                   f"({fit.noise.dof} degrees of freedom), estimated from {where}; the "
                   "prediction intervals include it")
    b = fit.backtest
    if b is not None:
        out.append(f"- backtest: the minimum loss at {b.budget:.3g} FLOPs predicted from the "
                   f"smaller budgets, {b.predicted_loss:.4f} (95% {fmt_interval(b.interval)}), "
                   f"against {b.achieved_loss:.4f} fitted there: error "
                   f"{b.error_percent:+.2f}%, within the interval: "
                   f"{'yes' if b.within_interval else 'no'}")
    elif fit.noise is not None:
        out.append(f"- no backtest: {fit.backtest_error}")
    for e in fit.extrapolations:
        side = "smallest" if e.budget < min(e.fitted_budgets) else "largest"
        against = (f"the mean of its {e.runs} runs" if e.predictor == "approach3"
                   else "its parabola minimum")
        fitted = ", ".join(f"{b:.3g}" for b in e.fitted_budgets)
        out.append(f"- backtest of the prediction's law ({e.predictor}): the {side} budget, "
                   f"{e.budget:.3g}, predicted from {fitted}: {e.predicted_loss:.4f} against "
                   f"{e.achieved_loss:.4f} ({against}), error {100 * e.log_error:+.2f}% (the "
                   f"runs' noise alone: +/- {100 * e.noise_std:.2f}%)")
    if not fit.extrapolations and fit.why_no_extrapolation:
        out.append(f"- no backtest of the prediction's law: {fit.why_no_extrapolation}")
    return out


def _model_error_section(result: StudyResult) -> list[str]:
    out = ["", "## Model error", "",
           "A law that bends beyond what its form can follow is off by more the further it is "
           "extrapolated, which neither the fit's spread nor the run-to-run noise shows. Each "
           "label's backtests (above) measure it: the law is fitted without its smallest, "
           "then without its largest budget, and predicts the one left out. Read as a bend "
           "of the log-loss in ln C, with a curvature of its own per label, their errors "
           "beyond the noise give the spread of the curvature, and so the law's error at the "
           "held-out budget (Student's t, one degree of freedom per label).", ""]
    error = result.model_error
    if error is None:
        return [*out, f"Not estimated: {result.why_no_model_error}; the intervals hold the "
                "fit's spread and the noise only."]
    out.append(f"- curvature spread: {error.curvature:.3g} per (ln C)^2 beyond the noise "
               f"({error.raw_curvature:.3g} before the noise's share is taken out), from "
               f"{error.extrapolations} backtests of {', '.join(error.labels)} ({error.dof} "
               "degrees of freedom)")
    for label, p in result.predictions.items():
        if p.model_error_std is not None and p.predicted_loss:
            out.append(f"- {label}: at {p.budget:.3g} FLOPs, a standard deviation of "
                       f"{p.model_error_std:.4g} ({100 * p.model_error_std / p.predicted_loss:.2f}%"
                       " of the loss)")
    return out


def _prediction_section(p: Prediction, level: str) -> list[str]:
    out = ["", f"{level} Checked prediction at the held-out budget ({fmt(p.budget)} FLOPs)", "",
           "The fit saw only the smaller budgets. The heuristic's candidate nearest the "
           f"predicted optimal size (from {p.size_from}) was trained at the held-out budget, "
           f"and its final metric compared with the one predicted for that candidate (from "
           f"{p.loss_from}).", ""]
    out += [f"- {line.strip()}" for line in prediction_lines(p)]
    if p.noise_source is not None:
        parts = [f"the fit's spread ({fmt_interval(p.fit_interval)} alone)",
                 f"run-to-run noise (standard deviation {p.noise_std:.4g}, from "
                 f"{p.noise_source}" + (f", {p.noise_dof} degrees of freedom)"
                                        if p.noise_dof else ")")]
        if p.model_error_std is not None:
            parts.append(f"the model error (standard deviation {p.model_error_std:.4g}, "
                         f"from backtests, {p.model_error_dof} degrees of freedom)")
        out.append("- the 95% interval is made of " + ", ".join(parts[:-1]) + " and "
                   + parts[-1] + ", added in quadrature, each with its own quantile")
    if p.lean_percent is not None and p.uncorrected_loss is not None:
        out.append(f"- the law's own figure, {p.uncorrected_loss:.4f}, corrected by "
                   f"{p.lean_percent:+.2f}% for the lean its backtests show")
    if p.registered_at is not None:
        out.append(f"- pre-registered: written {p.registered_at} from fit `{p.fit_key}`, "
                   f"before its run started ({p.run_started_at})")
    if p.within_interval is not None:
        out.append(f"- achieved within the 95% interval: {'yes' if p.within_interval else 'no'}")
    return out
