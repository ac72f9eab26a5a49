"""IsoFLOP and scaling plots, as PNG (matplotlib) and interactive HTML (plotly).

    write_isoflop_plots(analysis, records, "out/isoflops")      # .png and .html
    write_scaling_plots(analysis, "out/scaling", target=3e19)   # .png and .html
    write_isoflop_overlay({"plays": (fit1.budgets, rows1), "docs": (fit2.budgets, rows2)},
                          "out/isoflops")                 # labels: optima and runs of each
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
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


def label_colors(labels: Sequence[str | None]) -> dict[str | None, str]:
    """One colour per label, the same in every plot of a report (matplotlib's tab10)."""
    cmap = plt.get_cmap("tab10")
    return {label: matplotlib.colors.to_hex(cmap(i % 10)) for i, label in enumerate(labels)}


def legend_outside(ax) -> None:
    """The legend to the right of the axes, off the data."""
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)


@dataclass(frozen=True)
class Forecast:
    """A predicted optimum at a budget past the fit, with its 95% intervals (None: none)."""

    budget: float
    params: float
    tokens: float
    params_interval: tuple[float, float] | None = None
    tokens_interval: tuple[float, float] | None = None


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
                          stem: str | Path, metric: str = "loss",
                          colors: Mapping[str | None, str] | None = None) -> list[Path]:
    """The IsoFLOP curves of several labels on one plot, each given as its budgets' optima
    and its runs: with labels, a colour and marker per label and a line style per budget;
    one unnamed label (None) is coloured by budget."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    budgets = sorted({f.budget for optima, _ in by_label.values() for f in optima})
    by_budget = dict(zip(budgets, _colors(len(budgets)), strict=True))
    named = list(by_label) != [None]
    of_label = colors or label_colors(list(by_label))
    fig, ax = plt.subplots(figsize=(9.5, 5.5))
    html = go.Figure()
    for i, (label, (optima, records)) in enumerate(by_label.items()):
        groups = group_by_budget(records)
        symbol = _SYMBOLS[i % len(_SYMBOLS)]
        for fit in optima:
            color = of_label[label] if named else by_budget[fit.budget]
            k = budgets.index(fit.budget) if named else i
            dash = _DASHES[k % len(_DASHES)]
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
                                            "dash": _PLOTLY_DASHES[k % len(_PLOTLY_DASHES)]}))
            html.add_trace(go.Scatter(x=[fit.optimal_tokens], y=[fit.optimal_loss],
                                      mode="markers", name=f"{name} optimum",
                                      marker={"symbol": "star", "size": 14, "color": color}))
    ax.set_xscale("log")
    ax.set_xlabel("training tokens")
    ax.set_ylabel(metric)
    ax.set_title("IsoFLOP curves (robust parabola in log tokens; stars are minima)")
    ax.grid(True, which="both", alpha=0.3)
    legend_outside(ax)
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
                          stem: str | Path, target: float | None = None,
                          forecasts: Mapping[str | None, Sequence[Forecast]] | None = None,
                          colors: Mapping[str | None, str] | None = None) -> list[Path]:
    """Optimal N and D against C for several labels on the same axes, each given as its
    budgets' optima and its laws of N_opt and D_opt, one colour per label; a label's
    ``forecasts`` (the optima predicted past the fit) are drawn with their intervals, and
    the laws extend to the furthest of them (or to ``target``, marked on each law).
    ``colors`` (label to colour, ``label_colors``'s by default) keeps a label's colour the
    same across the plots of one report."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    forecasts = forecasts or {}
    every = [f.budget for optima, _, _ in by_label.values() for f in optima]
    far = [f.budget for points in forecasts.values() for f in points]
    high = max([*every, target or 0, *far]) * 1.5
    grid = np.geomspace(min(every) / 1.5, high, 100)
    color_of = colors or label_colors(list(by_label))
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.5))
    html = go.Figure()
    for i, (label, (optima, params_law, tokens_law)) in enumerate(by_label.items()):
        budgets = np.array([f.budget for f in optima])
        color = color_of[label]
        series = (("params", params_law, [f.optimal_params for f in optima]),
                  ("tokens", tokens_law, [f.optimal_tokens for f in optima]))
        for ax, (name, fit, values) in zip(axes, series, strict=True):
            shown = _named(label, name)
            law = f"{fit.coefficient:.3g} C^{fit.exponent:.3f}"
            ax.loglog(budgets, values, "osD^x"[i % 5], color=color,
                      label=f"optimal {shown} per budget")
            ax.loglog(grid, fit.predict(grid), _DASHES[i % len(_DASHES)], color=color,
                      label=_named(label, law))
            html.add_trace(go.Scatter(x=budgets, y=values, mode="markers",
                                      name=f"optimal {shown}", marker={"color": color}))
            html.add_trace(go.Scatter(x=grid, y=fit.predict(grid), mode="lines",
                                      name=f"{shown} = {law}", line={"color": color}))
            if target:
                predicted = float(fit.predict(target))
                ax.loglog([target], [predicted], "*", markersize=14, color=color,
                          label=f"{_named(label, budget_label(target))}: {predicted:.3g}")
                html.add_trace(go.Scatter(x=[target], y=[predicted], mode="markers",
                                          name=f"{shown} at {budget_label(target)}",
                                          marker={"symbol": "star", "size": 14,
                                                  "color": color}))
            for point in forecasts.get(label, ()):
                _forecast(ax, html, point, name, shown, color)
            ax.set_xlabel("training FLOPs C")
            ax.set_ylabel(f"compute-optimal {name}")
            ax.grid(True, which="both", alpha=0.3)
    for ax in axes:
        legend_outside(ax)
    fig.suptitle("Compute-optimal scaling (Approach 2)")
    html.update_layout(title="Compute-optimal parameters and tokens",
                       xaxis={"type": "log", "title": "FLOPs"}, yaxis={"type": "log"})
    return _save(fig, html, stem)


def _forecast(ax, html: go.Figure, point: Forecast, name: str, shown: str, color: str) -> None:
    """One predicted optimum past the fit, with its 95% interval as an error bar."""
    value = point.params if name == "params" else point.tokens
    interval = point.params_interval if name == "params" else point.tokens_interval
    low, high = interval if interval and all(np.isfinite(interval)) else (value, value)
    yerr = [[max(value - low, 0.0)], [max(high - value, 0.0)]]
    ax.errorbar([point.budget], [value], yerr=yerr, fmt="D", color=color, capsize=4,
                markerfacecolor="white",
                label=f"{shown} predicted at {budget_label(point.budget)} (95%)")
    html.add_trace(go.Scatter(x=[point.budget], y=[value], mode="markers",
                              name=f"{shown} predicted at {budget_label(point.budget)}",
                              marker={"symbol": "diamond-open", "size": 11, "color": color},
                              error_y={"type": "data", "symmetric": False,
                                       "array": yerr[1], "arrayminus": yerr[0]}))


def _save(fig, html: go.Figure, stem: Path) -> list[Path]:
    png, page = stem.with_suffix(".png"), stem.with_suffix(".html")
    fig.tight_layout()
    fig.savefig(png, dpi=120, bbox_inches="tight")
    plt.close(fig)
    html.write_html(page, include_plotlyjs=True, full_html=True)
    return [png, page]
