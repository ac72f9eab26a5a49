"""IsoFLOP and scaling plots, as PNG (matplotlib) and interactive HTML (plotly).

    write_isoflop_plots(analysis, records, "out/isoflops")      # .png and .html
    write_scaling_plots(analysis, "out/scaling", target=3e19)   # .png and .html
    write_isoflop_overlay({"plays": (fit1.budgets, rows1), "docs": (fit2.budgets, rows2)},
                          "out/isoflops")                 # labels: optima and runs of each
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import plotly.graph_objects as go

from marin.scaling_laws.isoflop_analysis import IsoFlopAnalysis, group_by_budget
from marin.scaling_laws.values import BudgetOptimum, PowerLaw, RunRow


def budget_label(flops: float) -> str:
    """The shortest ``g`` spelling that reads back as ``flops``: ``2.5e+10``, never the
    ``2e+10`` a fixed one-digit format gives, so a label names the budget it shows."""
    for digits in range(1, 18):
        text = f"{flops:.{digits}g}"
        if float(text) == flops:
            return text
    return repr(flops)


def _colors(n: int) -> list[str]:
    cmap = plt.get_cmap("viridis")
    return [matplotlib.colors.to_hex(cmap(i / max(1, n - 1))) for i in range(n)]


_DASHES = ("-", "--", ":", "-.")
_SYMBOLS = ("circle", "square", "diamond", "triangle-up", "cross")
_PLOTLY_DASHES = ("solid", "dash", "dot", "dashdot")


def _named(label: str | None, text: str) -> str:
    return text if label is None else f"{label} {text}"


def write_isoflop_plots(analysis: IsoFlopAnalysis, records: Sequence[RunRow],
                        stem: str | Path) -> list[Path]:
    """Loss against tokens per budget, the fitted parabolas and their minima."""
    return write_isoflop_overlay({None: (analysis.budgets, records)}, stem)


def write_isoflop_overlay(by_label: Mapping[str | None, tuple[Sequence[BudgetOptimum],
                                                              Sequence[RunRow]]],
                          stem: str | Path, metric: str = "loss") -> list[Path]:
    """The IsoFLOP curves of several labels on one plot, each given as its budgets' optima
    and its runs: colour by budget, a line style and marker per label (a label of None: no
    label in the legend)."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    budgets = sorted({f.budget for optima, _ in by_label.values() for f in optima})
    color_of = dict(zip(budgets, _colors(len(budgets)), strict=True))
    fig, ax = plt.subplots(figsize=(8, 5.5))
    html = go.Figure()
    for i, (label, (optima, records)) in enumerate(by_label.items()):
        groups = group_by_budget(records)
        dash, symbol = _DASHES[i % len(_DASHES)], _SYMBOLS[i % len(_SYMBOLS)]
        for fit in optima:
            color = color_of[fit.budget]
            runs = groups.get(fit.budget, [])
            tokens = np.array([r.tokens for r in runs])
            losses = np.array([r.loss for r in runs])
            grid = np.geomspace(tokens.min() / 1.3, tokens.max() * 1.3, 200)
            name = _named(label, f"{budget_label(fit.budget)} FLOPs")
            ax.scatter(tokens, losses, color=color, s=22, zorder=3, marker="osD^x"[i % 5])
            ax.plot(grid, fit.loss_at(grid), color=color, linestyle=dash, label=name)
            ax.scatter([fit.optimal_tokens], [fit.optimal_loss], marker="*", s=160,
                       color=color, edgecolor="black", zorder=4)
            html.add_trace(go.Scatter(x=tokens, y=losses, mode="markers", name=f"{name} runs",
                                      marker={"color": color, "symbol": symbol},
                                      text=[f"N={r.params:.3g}" for r in runs]))
            html.add_trace(go.Scatter(x=grid, y=fit.loss_at(grid), mode="lines", name=name,
                                      line={"color": color,
                                            "dash": _PLOTLY_DASHES[i % len(_PLOTLY_DASHES)]}))
            html.add_trace(go.Scatter(x=[fit.optimal_tokens], y=[fit.optimal_loss],
                                      mode="markers", name=f"{name} optimum",
                                      marker={"symbol": "star", "size": 14, "color": color}))
    ax.set_xscale("log")
    ax.set_xlabel("training tokens")
    ax.set_ylabel(metric)
    ax.set_title("IsoFLOP curves (robust parabola in log tokens; stars are minima)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    html.update_layout(title="IsoFLOP curves", xaxis={"type": "log", "title": "tokens"},
                       yaxis={"title": metric})
    return _save(fig, html, stem)


def write_scaling_plots(analysis: IsoFlopAnalysis, stem: str | Path,
                        target: float | None = None) -> list[Path]:
    """Optimal N and D against C, log-log, with fitted lines extrapolated to ``target``."""
    return write_scaling_overlay(
        {None: (analysis.budgets, analysis.params_fit, analysis.tokens_fit)}, stem, target)


def write_scaling_overlay(by_label: Mapping[str | None, tuple[Sequence[BudgetOptimum],
                                                              PowerLaw, PowerLaw]],
                          stem: str | Path, target: float | None = None) -> list[Path]:
    """Optimal N and D against C for several labels on the same axes, each given as its
    budgets' optima and its laws of N_opt and D_opt."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    every = [f.budget for optima, _, _ in by_label.values() for f in optima]
    high = max(max(every), target or 0) * 1.5
    grid = np.geomspace(min(every) / 1.5, high, 100)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    html = go.Figure()
    for i, (label, (optima, params_law, tokens_law)) in enumerate(by_label.items()):
        budgets = np.array([f.budget for f in optima])
        series = (("params", params_law, [f.optimal_params for f in optima]),
                  ("tokens", tokens_law, [f.optimal_tokens for f in optima]))
        for ax, (name, fit, values) in zip(axes, series, strict=True):
            shown = _named(label, name)
            law = f"{fit.coefficient:.3g} C^{fit.exponent:.3f}"
            ax.loglog(budgets, values, "osD^x"[i % 5], label=f"optimal {shown} per budget")
            ax.loglog(grid, fit.predict(grid), _DASHES[i % len(_DASHES)],
                      label=_named(label, law))
            html.add_trace(go.Scatter(x=budgets, y=values, mode="markers",
                                      name=f"optimal {shown}"))
            html.add_trace(go.Scatter(x=grid, y=fit.predict(grid), mode="lines",
                                      name=f"{shown} = {law}"))
            if target:
                predicted = float(fit.predict(target))
                ax.loglog([target], [predicted], "*", markersize=14,
                          label=f"{_named(label, budget_label(target))}: {predicted:.3g}")
                html.add_trace(go.Scatter(x=[target], y=[predicted], mode="markers",
                                          name=f"{shown} at {budget_label(target)}",
                                          marker={"symbol": "star", "size": 14}))
            ax.set_xlabel("training FLOPs C")
            ax.set_ylabel(f"compute-optimal {name}")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8)
    fig.suptitle("Compute-optimal scaling (Approach 2)")
    html.update_layout(title="Compute-optimal parameters and tokens",
                       xaxis={"type": "log", "title": "FLOPs"}, yaxis={"type": "log"})
    return _save(fig, html, stem)


def _save(fig, html: go.Figure, stem: Path) -> list[Path]:
    png, page = stem.with_suffix(".png"), stem.with_suffix(".html")
    fig.tight_layout()
    fig.savefig(png, dpi=120)
    plt.close(fig)
    html.write_html(page, include_plotlyjs=True, full_html=True)
    return [png, page]
