"""The ``marin trace`` commands: a summary or a comparison as rich tables, JSON or a chart.

    marin trace summarize gs://bucket/train/run-1234 --top 15 --html breakdown.html
    marin trace summarize run.xplane.pb --json
    marin trace summarize local_store/train/tiny-*/     # several traces: a summary each
    marin trace compare before/ after/
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from marin.profiling.trace_summary import CATEGORIES, TraceError, TraceSummary, load


def _out() -> Console:
    console = Console(soft_wrap=True)
    if not console.is_terminal:
        console.width = 200
    return console


def _err(message: str) -> int:
    Console(stderr=True).print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    return 2


def summarize(paths: str | Sequence[str], top: int = 10, as_json: bool = False,
              html: str | None = None, png: str | None = None) -> int:
    """Print the summary of each trace in ``paths``, in order (several: one after another;
    with ``--json`` a list). Every trace is read before anything is printed or written, so
    a bad one fails the command in one line with no partial output."""
    paths = [paths] if isinstance(paths, str) else list(paths)
    if top <= 0:
        return _err(f"--top must be positive, got {top}")
    charts = [(flag, out) for flag, out in (("--html", html), ("--png", png)) if out]
    if charts and len(paths) > 1:
        return _err(f"{charts[0][0]} writes the chart of one trace, and {len(paths)} were "
                    f"given ({', '.join(paths)}): pass one path, or run once per trace")
    for _, out in charts:
        if not os.path.isdir(os.path.dirname(os.path.abspath(out))):
            return _err(f"cannot write the chart to {out}: its folder does not exist")
    try:
        summaries = [load(path, top=top) for path in paths]
    except TraceError as e:
        return _err(str(e))
    for _, out in charts:
        write_chart(summaries[0], out)
    if as_json:
        documents = [summary.to_json() for summary in summaries]
        print(json.dumps(documents[0] if len(paths) == 1 else documents, indent=1))
    else:
        console = _out()
        for i, summary in enumerate(summaries):
            if i:
                console.print()
            render(summary, console, top)
    warn = Console(stderr=True)
    for summary in summaries:
        for error in summary.analyzer_errors:
            warn.print(f"[yellow]warning:[/] {error}", highlight=False, soft_wrap=True)
    return 0


def compare(before: str, after: str, top: int = 10, as_json: bool = False) -> int:
    try:
        a, b = load(before, top=top), load(after, top=top)
    except TraceError as e:
        return _err(str(e))
    comparison = a.compare(b, top)
    if as_json:
        print(json.dumps(comparison.to_json(), indent=1))
        return 0
    console = _out()
    table = Table(title="time per category (fraction of the profiled steps)",
                  title_justify="left")
    for column in ("category", "before", "after", "change"):
        table.add_column(column, justify="left" if column == "category" else "right")
    for category, row in comparison.categories.items():
        table.add_row(category, _share(row["before_seconds"], row["before_fraction"]),
                      _share(row["after_seconds"], row["after_fraction"]),
                      f"{row['delta_seconds'] * 1e3:+.2f} ms ({row['delta_fraction']:+.1%})")
    console.print(table)
    kernels = Table(title="top kernels (seconds over all devices)", title_justify="left")
    for column in ("op", "before", "after", "change"):
        kernels.add_column(column, justify="left" if column == "op" else "right")
    for name, row in comparison.kernels.items():
        kernels.add_row(name, f"{row['before_seconds']:.4f}", f"{row['after_seconds']:.4f}",
                        f"{row['delta_seconds']:+.4f}")
    console.print(kernels)
    steps = comparison.steps
    if steps["before_median"] == steps["before_median"] and \
            steps["after_median"] == steps["after_median"]:
        console.print(f"steady step time: {steps['before_median'] * 1e3:.2f} ms -> "
                      f"{steps['after_median'] * 1e3:.2f} ms ({steps['speedup']:.2f}x)")
    return 0


def _share(seconds: float, fraction: float) -> str:
    return f"{seconds * 1e3:.2f} ms ({fraction:.1%})"


def render(summary: TraceSummary, console: Console, top: int) -> None:
    sources = ", ".join(summary.sources)
    console.print(f"[bold]{sources}[/]", highlight=False)
    console.print(f"platform: {summary.platform} ({len(summary.devices)} device(s): "
                  f"{', '.join(summary.devices) or 'none'}); {summary.data.events} events; "
                  f"window {summary.window_seconds * 1e3:.2f} ms", highlight=False)
    steps = summary.steps()
    if steps.count:
        console.print(f"steps: {steps.count} ({steps.numbers[0]}..{steps.numbers[-1]}); "
                      f"mean {steps.mean * 1e3:.2f} ms, median {steps.median * 1e3:.2f} ms, "
                      f"p90 {steps.p90 * 1e3:.2f} ms; steady (without the first) median "
                      f"{steps.steady_median * 1e3:.2f} ms", highlight=False)
    else:
        console.print("steps: no step markers (jax.profiler.StepTraceAnnotation) in the trace")
    table = Table(title="where the time goes (per device, averaged)", title_justify="left")
    table.add_column("category")
    table.add_column("ms", justify="right")
    table.add_column("share", justify="right")
    for category, share in summary.breakdown().items():
        table.add_row(category, f"{share.seconds * 1e3:.2f}", f"{share.fraction:.1%}")
    console.print(table)
    kernels = Table(title=f"top {top} device ops", title_justify="left")
    for column in ("op", "category", "count", "seconds", "% of op time"):
        kernels.add_column(column, justify="left" if column in ("op", "category") else "right")
    total = summary.kernel_seconds
    for k in summary.top_kernels(top):
        kernels.add_row(k.name, k.category, str(k.count), f"{k.seconds:.4f}",
                        f"{k.seconds / total:.1%}" if total else "-")
    console.print(kernels)
    hints = [h.message for h in summary.hints()]
    for name, section in summary.sections.items():
        if name not in ("kernels", "categories", "steps", "hints"):
            console.print(f"[bold]{name}[/]: {json.dumps(section)}", highlight=False)
            hints += [h if isinstance(h, str) else h.get("message", str(h))
                      for h in section.get("hints", [])]
    for hint in hints:
        console.print(f"[yellow]hint:[/] {hint}", highlight=False)
    if not hints:
        console.print("[green]no hints:[/] no category passed its threshold")


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
