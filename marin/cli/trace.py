"""The ``marin trace`` commands: a summary or a comparison as rich tables, JSON or a chart.

    marin trace summarize gs://bucket/train/run-1234 --top 15 --html breakdown.html
    marin trace summarize run.xplane.pb --json
    marin trace summarize local_store/train/tiny-*/     # several traces: a summary each
    marin trace compare before/ after/
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from marin.cli.console import error, out, print_json, reject_extra, warn

if TYPE_CHECKING:
    from marin.profiling.trace_summary import TraceSummary

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    trace = sub.add_parser("trace", help="summaries of JAX profiles (XPlane traces)")
    trace_sub = trace.add_subparsers(dest="trace_command", metavar="ACTION", required=True)
    summ = trace_sub.add_parser("summarize", help="top kernels, time per category, steps "
                                "and hints of a trace")
    summ.add_argument("paths", nargs="+", metavar="PATH", help="an .xplane.pb, a profile "
                      "folder, or a training step's output folder (any fsspec URL); several "
                      "give a summary each (--json: a list)")
    summ.add_argument("--top", type=int, default=10, help="kernels to list (default 10)")
    summ.add_argument("--json", action="store_true")
    summ.add_argument("--html", metavar="OUT", help="write a breakdown chart (plotly HTML)")
    summ.add_argument("--png", metavar="OUT", help="write a breakdown chart (PNG)")
    summ.set_defaults(handler=_trace_summarize)
    comp = trace_sub.add_parser("compare", help="per category and per top kernel: the "
                                "change from trace A to trace B")
    comp.add_argument("before")
    comp.add_argument("after")
    comp.add_argument("--top", type=int, default=10)
    comp.add_argument("--json", action="store_true")
    comp.set_defaults(handler=_trace_compare)


def _trace_summarize(args: argparse.Namespace, extra: list[str]) -> int:
    return reject_extra(extra) or _summarize(args.paths, args.top, args.json, args.html,
                                             args.png)


def _trace_compare(args: argparse.Namespace, extra: list[str]) -> int:
    return reject_extra(extra) or _compare(args.before, args.after, args.top, args.json)


def _summarize(paths: str | Sequence[str], top: int = 10, as_json: bool = False,
              html: str | None = None, png: str | None = None) -> int:
    """Print the summary of each trace in ``paths``, in order (several: one after another;
    with ``--json`` a list). Every trace is read before anything is printed or written, so
    a bad one fails the command in one line with no partial output."""
    from marin.profiling.charts import write_chart
    from marin.profiling.trace_summary import TraceError, load

    paths = [paths] if isinstance(paths, str) else list(paths)
    if top <= 0:
        return error(f"--top must be positive, got {top}")
    charts = [(flag, out) for flag, out in (("--html", html), ("--png", png)) if out]
    if charts and len(paths) > 1:
        return error(f"{charts[0][0]} writes the chart of one trace, and {len(paths)} were "
                    f"given ({', '.join(paths)}): pass one path, or run once per trace")
    for _, chart in charts:
        if not os.path.isdir(os.path.dirname(os.path.abspath(chart))):
            return error(f"cannot write the chart to {chart}: its folder does not exist")
    try:
        summaries = [load(path, top=top) for path in paths]
    except TraceError as e:
        return error(str(e))
    for _, chart in charts:
        write_chart(summaries[0], chart)
    if as_json:
        documents = [summary.to_json() for summary in summaries]
        print_json(documents[0] if len(paths) == 1 else documents)
    else:
        console = out()
        for i, summary in enumerate(summaries):
            if i:
                console.print()
            _render(summary, console, top)
    for summary in summaries:
        for problem in summary.analyzer_errors:
            warn(problem)
    return 0


def _compare(before: str, after: str, top: int = 10, as_json: bool = False) -> int:
    from marin.profiling.trace_summary import TraceError, load

    try:
        a, b = load(before, top=top), load(after, top=top)
    except TraceError as e:
        return error(str(e))
    comparison = a.compare(b, top)
    if as_json:
        print_json(comparison.to_json())
        return 0
    console = out()
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


def _render(summary: TraceSummary, console: Console, top: int) -> None:
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
