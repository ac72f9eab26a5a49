"""Rendering plans and run results for people (rich) and for scripts (JSON).

    print_plan(plan, Console())          # a table: step, action, why, output path
    print(json.dumps(plan.to_json()))
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from marin.execution.executor import RunResult
from marin.execution.planning import Plan

_ACTION_STYLE = {"run": "bold yellow", "skip": "green", "wait": "cyan"}


def print_plan(plan: Plan, console: Console, show_skipped: bool = True) -> None:
    table = Table(title=f"dry run: {plan.prefix}", title_justify="left", expand=False)
    table.add_column("step", overflow="fold")
    table.add_column("action")
    table.add_column("why", overflow="fold")
    table.add_column("output", overflow="fold", style="dim")
    shown = 0
    for entry in plan.entries:
        if not show_skipped and entry.action == "skip":
            continue
        shown += 1
        why = Text(entry.reason)
        for change in entry.changed_fields[3:]:
            why.append(f"\n  {change}", style="dim")
        for warning in entry.warnings:
            why.append(f"\n  warning: {warning}", style="red")
        table.add_row(entry.name, Text(entry.action, style=_ACTION_STYLE[entry.action]), why,
                      entry.output_path)
    if shown:
        console.print(table)
    console.print(_totals_line(plan))


def _totals_line(plan: Plan) -> Text:
    t = plan.totals()
    line = Text.assemble(
        ("totals: ", "bold"), f"{t['steps']} steps, ",
        (f"{t['run']} to run", _ACTION_STYLE["run"]), ", ",
        (f"{t['skip']} skipped", _ACTION_STYLE["skip"]), ", ",
        (f"{t['wait']} running elsewhere", _ACTION_STYLE["wait"]),
    )
    if t["estimated_flops"] or t["estimated_device_hours"]:
        line.append(f"; estimated compute to run: {t['estimated_flops']:.3g} FLOPs, "
                    f"{t['estimated_device_hours']:.3g} device-hours")
    return line


def print_result(result: RunResult, console: Console) -> None:
    style = "green" if result.ok else "red"
    first, *rest = result.summary().splitlines()
    console.print(Text(first, style=f"bold {style}"))
    for line in rest:
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    if result.interrupted:
        console.print("interrupted: in-flight steps were marked CANCELLED and their leases "
                      "released; run again to resume")
