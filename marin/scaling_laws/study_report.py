"""The report of an IsoFLOP study: ``report.md`` with its plots, and the closing summary.

    render_report("IsoFLOP study tiny", rows, fit, prediction, "out/report")
    for line in summary_lines(fit, prediction): print(line)

``rows`` are ``runs.csv`` rows, ``fit`` is ``fit.json`` and ``prediction`` is
``prediction.json`` (or None), as written by ``marin.scaling_laws.study``. Plots are drawn
into a temporary folder and moved to the output, which may be any URL
``marin.storage.files`` writes to; each file appears whole, ``report.md`` last.
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Sequence
from typing import Any

from marin.storage.files import join_url, move_into_place


def _g(value: Any, digits: int = 3) -> str:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return "-"
    return "-" if not math.isfinite(number) else f"{number:.{digits}g}"


def _interval(pair: Sequence[float] | None) -> str:
    """``low - high``, or ``n/a`` when there is no finite interval."""
    if not pair or not all(isinstance(v, (int, float)) and math.isfinite(v) for v in pair):
        return "n/a"
    return f"{_g(pair[0])} - {_g(pair[1])}"


def _law(law: dict[str, Any], symbol: str) -> str:
    error = (f"+/- {law['exponent_se']:.3f}" if law["exponent_se"] > 0 else
             "no error estimate from two budgets")
    return f"{symbol} = {law['coefficient']:.3g} * C^{law['exponent']:.3f} (exponent {error})"


def summary_lines(fit: dict[str, Any], prediction: dict[str, Any] | None) -> list[str]:
    """What a study found, in a few lines: the exponents, the optimum at the held-out budget,
    and the prediction's error."""
    lines = [f"runs: {fit['used']} used, {len(fit['excluded'])} excluded"]
    a2 = fit.get("approach2") or {}
    if "params" in a2:
        lines.append("Approach 2: " + _law(a2["params"], "N_opt") + "; "
                     + _law(a2["tokens"], "D_opt"))
    else:
        lines.append(f"Approach 2: not fitted ({a2.get('error')})")
    a3 = fit.get("approach3") or {}
    if "E" in a3:
        se = a3.get("standard_errors") or {}
        lines.append("Approach 3: L(N, D) = E + A/N^alpha + B/D^beta with " + ", ".join(
            f"{k}={a3[k]:.4g}" + (f" (+/- {se[k]:.2g})" if k in se else "")
            for k in ("E", "A", "B", "alpha", "beta")))
    else:
        lines.append(f"Approach 3: not fitted ({a3.get('error')})")
    if prediction:
        lines.extend(_prediction_lines(prediction))
    return lines


def _prediction_lines(p: dict[str, Any]) -> list[str]:
    budget = p["budget"]
    if "candidate" not in p:
        return [f"held-out {budget:.3g} FLOPs: no prediction ({p.get('reason')})"]
    source = p["predicted"][p["size_from"]]
    c = p["candidate"]
    lines = [f"held-out {budget:.3g} FLOPs: predicted optimum N = {_g(source['params'])} params "
             f"(95% {_interval(source['params_interval'])}), D = {_g(source['tokens'])} tokens; "
             f"trained hidden {c['hidden_dim']}, {c['num_layers']} layers, {_g(c['params'])} "
             f"params, {_g(c['tokens'])} tokens"]
    if p.get("achieved_loss") is None:
        lines.append(f"  run {p['status']}: {p.get('reason')}")
    elif p.get("predicted_loss") is None:
        lines.append(f"  achieved loss {p['achieved_loss']:.4f}; no loss was predicted")
    else:
        lines.append(f"  predicted loss {p['predicted_loss']:.4f} (95% "
                     f"{_interval(p['predicted_loss_interval'])}), achieved "
                     f"{p['achieved_loss']:.4f}: error {p['error_percent']:+.2f}%")
    return lines


def render_report(title: str, rows: list[dict[str, Any]], fit: dict[str, Any],
                  prediction: dict[str, Any] | None, output_path: str) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        plots = _plots(rows, fit, prediction, tmp)
        text = _markdown(title, rows, fit, prediction, plots)
        with open(os.path.join(tmp, "report.md"), "w", encoding="utf-8") as f:
            f.write(text)
        # the plots first: report.md never links to a plot not there yet
        for name in sorted(os.listdir(tmp), key=lambda n: (n == "report.md", n)):
            move_into_place(os.path.join(tmp, name), join_url(output_path, name))
    return join_url(output_path, "report.md")


def _markdown(title: str, rows: list[dict[str, Any]], fit: dict[str, Any],
              prediction: dict[str, Any] | None, plots: list[str]) -> str:
    out = [f"# {title}", ""]
    out += [f"- {line.strip()}" for line in summary_lines(fit, prediction)]
    out += ["", "## Runs", "",
            "| run | budget | hidden | layers | params | tokens | eval loss (first -> final) "
            "| status |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        status = r["status"] if r["status"] == "ok" else f"**excluded: {r['status']}**"
        out.append(f"| {r['run']} | {_g(r['budget'])} | {r.get('hidden_dim') or '-'} | "
                   f"{r.get('num_layers') or '-'} | {_g(r.get('params'))} | "
                   f"{_g(r.get('tokens'))} | {_g(r.get('first_eval_loss'), 4)} -> "
                   f"{_g(r.get('loss'), 4)} | {status} |")
    if fit["excluded"]:
        out += ["", "### Excluded runs", ""]
        out += [f"- `{e['run']}` ({_g(e['budget'])} FLOPs): {e['status']}: {e['reason']}"
                for e in fit["excluded"]]
    out += _approach2_section(fit) + _approach3_section(fit) + _targets_section(fit)
    if prediction:
        out += _prediction_section(prediction)
    if plots:
        out += ["", "## Plots", ""]
        for stem in plots:
            out += [f"![{stem}]({stem}.png)", "", f"[{stem} (interactive)]({stem}.html)", ""]
    return "\n".join(out) + "\n"


def _approach2_section(fit: dict[str, Any]) -> list[str]:
    out = ["", "## Approach 2: IsoFLOP minima", "",
           "| budget | runs | optimal tokens | 95% interval | optimal params | minimum loss |",
           "|---|---|---|---|---|---|"]
    for b in fit["budgets"]:
        out.append(f"| {_g(b['budget'])} | {b['points']} | {_g(b['optimal_tokens'])} | "
                   f"{_interval(b['optimal_tokens_interval'])} | {_g(b['optimal_params'])} | "
                   f"{_g(b['optimal_loss'], 4)} |")
    for b in fit["budgets_not_fitted"]:
        out.append(f"| {_g(b['budget'])} | {b['runs']} | not fitted: {b['reason']} | | | |")
    a2 = fit.get("approach2") or {}
    out.append("")
    if "params" in a2:
        out += [f"- {_law(a2['params'], 'N_opt')}", f"- {_law(a2['tokens'], 'D_opt')}",
                f"- {_law(a2['loss'], 'L_opt')}"]
    else:
        out.append(f"- not fitted across budgets: {a2.get('error')}")
    return out


def _approach3_section(fit: dict[str, Any]) -> list[str]:
    a3 = fit.get("approach3") or {}
    out = ["", "## Approach 3: L(N, D) = E + A / N^alpha + B / D^beta", ""]
    if "E" not in a3:
        return [*out, f"Not fitted: {a3.get('error')}"]
    se = a3.get("standard_errors") or {}
    out += ["| parameter | value | bootstrap s.e. |", "|---|---|---|"]
    out += [f"| {k} | {a3[k]:.4g} | {_g(se.get(k), 2)} |" for k in ("E", "A", "B", "alpha",
                                                                       "beta")]
    return out


def _targets_section(fit: dict[str, Any]) -> list[str]:
    out = ["", "## Predicted optima at larger budgets", "",
           "| budget | N_opt (A2) | 95% | D_opt (A2) | N_opt (A3) | 95% | D_opt (A3) | "
           "loss (A3) | 95% |", "|---|---|---|---|---|---|---|---|---|"]
    for p in fit["predictions"]:
        a2, a3 = p.get("approach2") or {}, p.get("approach3") or {}
        out.append(f"| {_g(p['budget'])} | {_g(a2.get('params'))} | "
                   f"{_interval(a2.get('params_interval'))} | {_g(a2.get('tokens'))} | "
                   f"{_g(a3.get('params'))} | {_interval(a3.get('params_interval'))} | "
                   f"{_g(a3.get('tokens'))} | {_g(a3.get('loss'), 4)} | "
                   f"{_interval(a3.get('loss_interval'))} |")
    return out


def _prediction_section(p: dict[str, Any]) -> list[str]:
    out = ["", f"## Checked prediction at the held-out budget ({_g(p['budget'])} FLOPs)", "",
           "The fit saw only the smaller budgets. The heuristic's candidate nearest the "
           f"predicted optimal size (from {p.get('size_from')}) was trained at the held-out "
           "budget, and its loss compared with the loss predicted for that candidate "
           f"(from {p.get('loss_from')}).", ""]
    out += [f"- {line.strip()}" for line in _prediction_lines(p)]
    if p.get("within_interval") is not None:
        out.append(f"- achieved loss within the 95% interval: "
                   f"{'yes' if p['within_interval'] else 'no'}")
    return out


def _records(rows: list[dict[str, Any]]) -> list[Any]:
    from marin.scaling_laws.isoflop_analysis import RunRecord

    return [RunRecord(float(r["params"]), float(r["tokens"]), float(r["flops"]),
                      float(r["loss"]), float(r["budget"])) for r in rows if r["status"] == "ok"]


def _analysis(fit: dict[str, Any]) -> Any:
    from marin.scaling_laws.isoflop_analysis import BudgetFit, IsoFlopAnalysis, ScalingFit

    a2 = fit.get("approach2") or {}
    budgets = [BudgetFit(**{**b, "coefficients": tuple(b["coefficients"]),
                            "optimal_tokens_interval": tuple(b["optimal_tokens_interval"])})
               for b in fit["budgets"]]
    laws = {q: ScalingFit(**a2[q]) for q in ("params", "tokens") if q in a2}
    return IsoFlopAnalysis(budgets=budgets, params_fit=laws.get("params"),
                           tokens_fit=laws.get("tokens"))


def _plots(rows: list[dict[str, Any]], fit: dict[str, Any], prediction: dict[str, Any] | None,
           folder: str) -> list[str]:
    from marin.scaling_laws.plots import write_isoflop_plots, write_scaling_plots

    analysis = _analysis(fit)
    made = []
    if analysis.budgets:
        write_isoflop_plots(analysis, _records(rows), os.path.join(folder, "isoflops"))
        made.append("isoflops")
    if analysis.params_fit is not None:
        target = prediction["budget"] if prediction else None
        write_scaling_plots(analysis, os.path.join(folder, "scaling"), target=target)
        made.append("scaling")
    if prediction and prediction.get("achieved_loss") is not None:
        _prediction_plot(fit, prediction, os.path.join(folder, "prediction"))
        made.append("prediction")
    return made


def _prediction_plot(fit: dict[str, Any], p: dict[str, Any], stem: str) -> None:
    """Predicted loss against model size at the held-out budget, and the trained run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    import plotly.graph_objects as go

    c, budget = p["candidate"], p["budget"]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    page = go.Figure()
    parametric = parametric_of(fit)
    if parametric is not None:
        grid = np.geomspace(c["params"] / 8, c["params"] * 8, 100)
        # a fixed budget: D scales as 1 / N (C ~ 6 N D)
        curve = parametric.loss(grid, c["tokens"] * c["params"] / grid)
        ax.plot(grid, curve, label="Approach 3 at this budget")
        page.add_trace(go.Scatter(x=grid, y=curve, mode="lines", name="Approach 3"))
    low, high = p["predicted_loss_interval"] or (p["predicted_loss"],) * 2
    ax.errorbar([c["params"]], [p["predicted_loss"]],
                yerr=[[p["predicted_loss"] - low], [high - p["predicted_loss"]]], fmt="o",
                capsize=4, label="predicted (95%)")
    ax.plot([c["params"]], [p["achieved_loss"]], "*", markersize=14, label="achieved")
    error_y = {"type": "data", "symmetric": False, "array": [high - p["predicted_loss"]],
               "arrayminus": [p["predicted_loss"] - low]}
    page.add_trace(go.Scatter(x=[c["params"]], y=[p["predicted_loss"]], mode="markers",
                              name="predicted", error_y=error_y))
    page.add_trace(go.Scatter(x=[c["params"]], y=[p["achieved_loss"]], mode="markers",
                              name="achieved", marker={"symbol": "star", "size": 14}))
    ax.set_xscale("log")
    ax.set_xlabel("parameters")
    ax.set_ylabel("loss")
    ax.set_title(f"Held-out budget {budget:.3g} FLOPs: error {p['error_percent']:+.2f}%")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(f"{stem}.png", dpi=120)
    plt.close(fig)
    page.update_layout(title=f"Held-out budget {budget:.3g} FLOPs",
                       xaxis={"type": "log", "title": "parameters"}, yaxis={"title": "loss"})
    page.write_html(f"{stem}.html", include_plotlyjs=True, full_html=True)


def parametric_of(fit: dict[str, Any]):
    """The ``ParametricFit`` stored in fit.json, or None."""
    import numpy as np

    from marin.scaling_laws.parametric import ParametricFit

    a3 = fit.get("approach3") or {}
    if "error" in a3 or "E" not in a3:
        return None
    samples = np.array(a3.get("bootstrap_samples") or [], dtype=float)
    return ParametricFit(E=a3["E"], A=a3["A"], B=a3["B"], alpha=a3["alpha"], beta=a3["beta"],
                         objective=a3.get("objective", math.nan),
                         standard_errors=a3.get("standard_errors", {}),
                         bootstrap_samples=samples if samples.ndim == 2 and len(samples) else None,
                         flops_coefficient=a3.get("flops_coefficient", 6.0),
                         flops_exponent=a3.get("flops_exponent", 1.0))
