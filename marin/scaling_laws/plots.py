"""IsoFLOP and scaling plots, as PNG (matplotlib) and interactive HTML (plotly).

    write_isoflop_plots(analysis, records, "out/isoflops")      # .png and .html
    write_scaling_plots(analysis, "out/scaling", target=3e19)   # .png and .html
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import plotly.graph_objects as go

from marin.scaling_laws.isoflop_analysis import (
    IsoFlopAnalysis,
    RunRecord,
    group_by_budget,
)


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


def write_isoflop_plots(analysis: IsoFlopAnalysis, records: Sequence[RunRecord],
                        stem: str | Path) -> list[Path]:
    """Loss against tokens per budget, the fitted parabolas and their minima."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    groups = group_by_budget(records)
    colors = _colors(len(analysis.budgets))
    fig, ax = plt.subplots(figsize=(8, 5.5))
    html = go.Figure()
    for fit, color in zip(analysis.budgets, colors, strict=True):
        runs = groups.get(fit.budget, [])
        tokens = np.array([r.tokens for r in runs])
        losses = np.array([r.loss for r in runs])
        grid = np.geomspace(tokens.min() / 1.3, tokens.max() * 1.3, 200)
        label = f"{budget_label(fit.budget)} FLOPs"
        ax.scatter(tokens, losses, color=color, s=22, zorder=3)
        ax.plot(grid, fit.loss_at(grid), color=color, label=label)
        ax.scatter([fit.optimal_tokens], [fit.optimal_loss], marker="*", s=160,
                   color=color, edgecolor="black", zorder=4)
        html.add_trace(go.Scatter(x=tokens, y=losses, mode="markers", name=f"{label} runs",
                                  marker={"color": color},
                                  text=[f"N={r.params:.3g}" for r in runs]))
        html.add_trace(go.Scatter(x=grid, y=fit.loss_at(grid), mode="lines", name=label,
                                  line={"color": color}))
        html.add_trace(go.Scatter(x=[fit.optimal_tokens], y=[fit.optimal_loss],
                                  mode="markers", name=f"{label} optimum",
                                  marker={"symbol": "star", "size": 14, "color": color}))
    ax.set_xscale("log")
    ax.set_xlabel("training tokens")
    ax.set_ylabel("loss")
    ax.set_title("IsoFLOP curves (robust parabola in log tokens; stars are minima)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    html.update_layout(title="IsoFLOP curves", xaxis={"type": "log", "title": "tokens"},
                       yaxis={"title": "loss"})
    return _save(fig, html, stem)


def write_scaling_plots(analysis: IsoFlopAnalysis, stem: str | Path,
                        target: float | None = None) -> list[Path]:
    """Optimal N and D against C, log-log, with fitted lines extrapolated to ``target``."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    budgets = np.array([f.budget for f in analysis.budgets])
    high = max(budgets.max(), target or 0) * 1.5
    grid = np.geomspace(budgets.min() / 1.5, high, 100)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    html = go.Figure()
    series = (("params", analysis.params_fit, [f.optimal_params for f in analysis.budgets]),
              ("tokens", analysis.tokens_fit, [f.optimal_tokens for f in analysis.budgets]))
    for ax, (name, fit, values) in zip(axes, series, strict=True):
        ax.loglog(budgets, values, "o", label=f"optimal {name} per budget")
        ax.loglog(grid, fit.predict(grid), "-", label=f"{fit.coefficient:.3g} C^{fit.exponent:.3f}")
        html.add_trace(go.Scatter(x=budgets, y=values, mode="markers",
                                  name=f"optimal {name}"))
        html.add_trace(go.Scatter(x=grid, y=fit.predict(grid), mode="lines",
                                  name=f"{name} = {fit.coefficient:.3g} C^{fit.exponent:.3f}"))
        if target:
            predicted = float(fit.predict(target))
            ax.loglog([target], [predicted], "*", markersize=14,
                      label=f"{budget_label(target)}: {predicted:.3g}")
            html.add_trace(go.Scatter(x=[target], y=[predicted], mode="markers",
                                      name=f"{name} at {budget_label(target)}",
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
