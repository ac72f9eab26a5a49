"""The report's plots, every label overlaid: ``isoflops``, ``scaling`` and ``prediction``,
each as PNG and interactive HTML.

    stems = draw_plots(result, "/tmp/plots")     # ["isoflops", "scaling", "prediction"]
"""

from __future__ import annotations

import os
from typing import Any

from marin.scaling_laws.study.artifacts import StudyResult

__all__ = ["draw_plots"]


def draw_plots(result: StudyResult, folder: str, target: float | None = None) -> list[str]:
    """The plots into ``folder``; their stems. Each label has one colour in every plot; the
    scaling plot draws each label's held-out optimum with its intervals, and marks
    ``target`` on the laws when given."""
    from marin.scaling_laws.plots import label_colors, write_isoflop_overlay, write_scaling_overlay
    from marin.scaling_laws.study.fitting import clean_rows

    named = len(result.labels) > 1
    colors = label_colors([label if named else None for label in result.labels])
    fits = {label: result.fits[label] for label in result.labels}
    curves = {label if named else None: (fit.budgets, clean_rows(result.runs_of(label))[0])
              for label, fit in fits.items() if fit.budgets}
    made = []
    if curves:
        write_isoflop_overlay(curves, os.path.join(folder, "isoflops"), result.metric,
                              colors=colors)
        made.append("isoflops")
    laws = {label if named else None: (fit.budgets, fit.approach2.params, fit.approach2.tokens)
            for label, fit in fits.items() if fit.approach2 is not None}
    if laws:
        forecasts = {label if named else None: [f for p in result.checks_of(label)
                                                for f in _forecasts(p)]
                     for label in result.labels}
        write_scaling_overlay(laws, os.path.join(folder, "scaling"), target=target,
                              forecasts=forecasts, colors=colors)
        made.append("scaling")
    checked = {label: p for label, p in result.predictions.items()
               if p.achieved_loss is not None and p.predicted_loss is not None
               and p.candidate is not None}
    if checked:
        _prediction_plot(result, checked, os.path.join(folder, "prediction"), colors, named)
        made.append("prediction")
    return made


def _forecasts(p: Any) -> list[Any]:
    """A prediction's optimum as the scaling plot draws it (none without an optimum)."""
    from marin.scaling_laws.plots import Forecast

    if p.optimum is None or p.optimum.best is None:
        return []
    _, o = p.optimum.best
    return [Forecast(p.budget, o.params, o.tokens, o.params_interval, o.tokens_interval)]


def _prediction_plot(result: StudyResult, checked: dict[str, Any], stem: str,
                     colors: dict[Any, str], named: bool) -> None:
    """Per label: the predicted metric against model size at the held-out budget (Approach 3
    along the budget), the prediction with its interval, and the trained run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    import plotly.graph_objects as go

    from marin.scaling_laws.plots import legend_outside

    fig, ax = plt.subplots(figsize=(8.5, 4.5))
    page = go.Figure()
    for label, p in checked.items():
        c = p.candidate
        color = colors[label if named else None]
        a3 = result.fits[label].approach3
        if a3 is not None:
            grid = np.geomspace(c.params / 8, c.params * 8, 100)
            # a fixed budget: D scales as 1 / N (C ~ 6 N D)
            curve = a3.loss(grid, c.tokens * c.params / grid)
            ax.plot(grid, curve, color=color, label=f"{label}: Approach 3 at this budget")
            page.add_trace(go.Scatter(x=grid, y=curve, mode="lines", line={"color": color},
                                      name=f"{label}: Approach 3"))
        low, high = p.predicted_loss_interval or (p.predicted_loss,) * 2
        ax.errorbar([c.params], [p.predicted_loss], yerr=[[p.predicted_loss - low],
                                                          [high - p.predicted_loss]],
                    fmt="o", capsize=4, color=color, label=f"{label}: predicted (95%)")
        ax.plot([c.params], [p.achieved_loss], "*", markersize=14, color=color,
                markeredgecolor="black", label=f"{label}: achieved")
        error_y = {"type": "data", "symmetric": False, "array": [high - p.predicted_loss],
                   "arrayminus": [p.predicted_loss - low]}
        page.add_trace(go.Scatter(x=[c.params], y=[p.predicted_loss], mode="markers",
                                  name=f"{label}: predicted", error_y=error_y,
                                  marker={"color": color}))
        page.add_trace(go.Scatter(x=[c.params], y=[p.achieved_loss], mode="markers",
                                  name=f"{label}: achieved",
                                  marker={"symbol": "star", "size": 14, "color": color}))
    budget = next(iter(checked.values())).budget
    errors = ", ".join(f"{label} {p.error_percent:+.2f}%" for label, p in checked.items())
    ax.set_xscale("log")
    ax.set_xlabel("parameters")
    ax.set_ylabel(result.metric)
    ax.set_title(f"Held-out budget {budget:.3g} FLOPs: error {errors}", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    legend_outside(ax)
    fig.tight_layout()
    fig.savefig(f"{stem}.png", dpi=120, bbox_inches="tight")
    plt.close(fig)
    page.update_layout(title=f"Held-out budget {budget:.3g} FLOPs",
                       xaxis={"type": "log", "title": "parameters"},
                       yaxis={"title": result.metric})
    page.write_html(f"{stem}.html", include_plotlyjs=True, full_html=True)
