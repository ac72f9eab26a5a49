"""Charts of a trace summary: the time per category on each device, and the top ops.

    write_chart(load("run.xplane.pb"), "breakdown.html")      # plotly HTML
    write_chart(summary, "breakdown.png")                      # PNG (matplotlib)

A chart is written to a temporary file beside its path and renamed: never half-written.
``marin trace summarize --html/--png`` draws these.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

from marin.profiling.trace_summary import CATEGORIES, TraceSummary

__all__ = ["write_chart"]


def write_chart(summary: TraceSummary, out: str) -> None:
    """The breakdown per device and the top ops: plotly HTML (``.html``) or PNG."""
    if out.endswith(".html"):
        _atomic_write(out, _plotly(summary).to_html(include_plotlyjs=True, full_html=True).encode())
    else:
        _atomic_write(out, _png(summary))


def _per_device(summary: TraceSummary) -> tuple[list[str], dict[str, list[float]]]:
    window = summary.data.window_ns or 1.0
    devices = summary.devices
    return devices, {c: [summary.data.shares[d][c] / window for d in devices]
                     for c in CATEGORIES}


_COLOURS = {"compute": "#2a9d8f", "communication": "#e76f51", "data_loading": "#e9c46a",
            "host": "#8d99ae", "idle": "#d9d9d9"}


def _plotly(summary: TraceSummary) -> Any:
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    devices, fractions = _per_device(summary)
    top = summary.top_kernels(summary.top)
    fig = make_subplots(rows=1, cols=2, column_widths=[0.45, 0.55],
                        subplot_titles=("share of step time", "top device ops (s)"))
    for category, values in fractions.items():
        fig.add_trace(go.Bar(y=devices, x=values, name=category, orientation="h",
                             marker_color=_COLOURS[category]), row=1, col=1)
    fig.add_trace(go.Bar(y=[k.name for k in top][::-1], x=[k.seconds for k in top][::-1],
                         orientation="h", showlegend=False, marker_color="#264653"),
                  row=1, col=2)
    fig.update_layout(barmode="stack", title=f"{', '.join(summary.sources)} "
                      f"({summary.platform})", height=300 + 20 * max(len(devices), len(top)))
    return fig


def _png(summary: TraceSummary) -> bytes:
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    devices, fractions = _per_device(summary)
    top = summary.top_kernels(summary.top)
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 1.5 + 0.4 * max(len(devices),
                                                                          len(top), 3)))
    offset = [0.0] * len(devices)
    for category, values in fractions.items():
        left.barh(devices, values, left=offset, label=category, color=_COLOURS[category])
        offset = [a + b for a, b in zip(offset, values, strict=True)]
    left.set_xlim(0, 1)
    left.set_title("share of step time")
    left.legend(fontsize="small", loc="lower right")
    right.barh([k.name[:40] for k in top][::-1], [k.seconds for k in top][::-1],
               color="#264653")
    right.set_title("top device ops (s)")
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    plt.close(fig)
    return buffer.getvalue()


def _atomic_write(path: str, data: bytes) -> None:
    """Write to a temporary file beside ``path`` and rename: never a half-written chart."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".chart-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
