"""Rendering plans and run results for people (rich) and for scripts (JSON).

    print_plan(plan, Console())              # a table, or a summary for large plans
    print_plan(plan, Console(), show_all=True)   # every step, however many
    print_plan(plan, Console(), packs=plan_packs(plan, 4))   # and which steps pack together
    print(json.dumps(plan.to_json()))

A plan of more than ``SUMMARY_ABOVE`` steps prints a summary: the counts per action, one
row per name family (a step's name up to its last ``/``), and the rows that will run, wait
or failed; skipped rows are folded into counts. Rendering ten thousand table rows costs
seconds and shows nothing one can read; the summary costs milliseconds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rich.table import Table
from rich.text import Text

from marin.execution.graph import nonblocking_keys
from marin.execution.planning import Plan, PlanEntry
from marin.execution.states import StepState

if TYPE_CHECKING:
    from rich.console import Console

    from marin.execution.executor import InvocationResult

_ACTION_STYLE = {"run": "bold yellow", "skip": "green", "wait": "cyan"}

#: Plans with more steps than this print a summary (``--all`` prints every row).
SUMMARY_ABOVE = 50
#: Steps that will run, wait or failed, listed one per row in a summary; more are counted.
SUMMARY_ROWS = 100
#: Name families listed in a summary; the others share one row.
SUMMARY_FAMILIES = 30
#: The family of a step whose name has no ``/``.
TOP_LEVEL = "(top level)"

#: A packed step's node -> (its pack's number, the names of the other members).
_Mates = dict[Any, tuple[int, list[str]]]


def print_plan(plan: Plan, console: Console, show_skipped: bool = True,
               show_all: bool = False, packs: Sequence[Sequence[PlanEntry]] = ()) -> None:
    """The whole table for small plans or with ``show_all``; a summary otherwise. Each
    step of one of ``packs`` (``marin.execution.packs.plan_packs``) names its pack."""
    mates = {e.node: (i, [m.name for m in pack if m is not e])
             for i, pack in enumerate(packs, 1) for e in pack}
    if show_all or len(plan.entries) <= SUMMARY_ABOVE:
        _print_table(plan, console, show_skipped, mates)
    else:
        print_summary(plan, console, mates=mates)
    if packs:
        console.print(f"packs: {len(packs)}, of {sum(map(len, packs))} steps (--pack)",
                      highlight=False)


def _print_table(plan: Plan, console: Console, show_skipped: bool, mates: _Mates) -> None:
    table = _entry_table(f"dry run: {plan.prefix}")
    shown = 0
    for entry in plan.entries:
        if not show_skipped and entry.action == "skip":
            continue
        shown += 1
        _add_entry(table, entry, mates)
    if shown:
        console.print(table)
    console.print(_totals_line(plan))


def _entry_table(title: str) -> Table:
    table = Table(title=title, title_justify="left", expand=False)
    table.add_column("step", overflow="fold")
    table.add_column("action")
    table.add_column("why", overflow="fold")
    table.add_column("output", overflow="fold", style="dim")
    return table


def _add_entry(table: Table, entry: PlanEntry, mates: _Mates) -> None:
    why = Text(entry.reason)
    if entry.node in mates:
        number, others = mates[entry.node]
        why.append(f"\n  pack {number}: trains together with {', '.join(others)}",
                   style="bold")
    for change in entry.changed_fields[3:]:
        why.append(f"\n  {change}", style="dim")
    for warning in entry.warnings:
        why.append(f"\n  warning: {warning}", style="red")
    for key in nonblocking_keys(entry.node):
        why.append(f"\n  reads {key} without waiting: starts once it has started", style="dim")
    table.add_row(entry.name, Text(entry.action, style=_ACTION_STYLE[entry.action]), why,
                  entry.output_path)


@dataclass
class FamilyCounts:
    """Steps of one name family, by action; ``failed`` counts steps whose last status is
    FAILED (retried or not)."""

    family: str
    steps: int = 0
    actions: dict[str, int] = field(default_factory=lambda: {"run": 0, "skip": 0, "wait": 0})
    failed: int = 0


@dataclass
class PlanSummary:
    """What a summary shows, computed in one pass over the plan."""

    families: list[FamilyCounts]
    listed: list[PlanEntry]
    """Steps that will run or wait, and refused failures, in plan order (at most ``rows``)."""
    unlisted: int
    """Such steps beyond the first ``rows``."""
    folded: int
    """Skipped steps, shown only as counts."""
    folded_warnings: list[str]
    """Warnings of folded steps, prefixed by the step's name."""


def family_of(name: str) -> str:
    """A step's name up to its last ``/`` (``TOP_LEVEL`` when it has none)."""
    head, slash, _ = name.rpartition("/")
    return head if slash else TOP_LEVEL


def is_listed(entry: PlanEntry) -> bool:
    """Whether a summary lists the step: it will run or wait, or it failed."""
    return entry.action != "skip" or entry.refused_failure


def summarize(plan: Plan, rows: int = SUMMARY_ROWS) -> PlanSummary:
    families: dict[str, FamilyCounts] = {}
    listed: list[PlanEntry] = []
    unlisted = folded = 0
    folded_warnings: list[str] = []
    for entry in plan.entries:
        name = entry.node.step.name
        family = family_of(name)
        counts = families.get(family)
        if counts is None:
            counts = families[family] = FamilyCounts(family)
        counts.steps += 1
        counts.actions[entry.action] += 1
        counts.failed += entry.status is StepState.FAILED
        if is_listed(entry):
            if len(listed) < rows:
                listed.append(entry)
            else:
                unlisted += 1
        else:
            folded += 1
            folded_warnings.extend(f"{name}: {w}" for w in entry.warnings)
    return PlanSummary(list(families.values()), listed, unlisted, folded, folded_warnings)


def print_summary(plan: Plan, console: Console, rows: int = SUMMARY_ROWS,
                  max_families: int = SUMMARY_FAMILIES, mates: _Mates | None = None) -> None:
    summary = summarize(plan, rows)
    console.print(Text.assemble((f"dry run: {plan.prefix}", "bold"),
                                f": {len(plan.entries)} steps, summarized "
                                "(--all prints every step, --json every field)"),
                  soft_wrap=True)
    console.print(_family_table(summary.families, max_families))
    if summary.listed:
        table = _entry_table("steps that will run, wait or failed")
        for entry in summary.listed:
            _add_entry(table, entry, mates or {})
        console.print(table)
    if summary.unlisted:
        console.print(f"... and {summary.unlisted} more steps that will run, wait or failed "
                      "(--all lists them)", highlight=False)
    if summary.folded:
        console.print(Text.assemble((f"{summary.folded} skipped steps", "green"),
                                    " folded (already succeeded; --all lists them)"))
    if summary.folded_warnings:
        first = summary.folded_warnings[0]
        more = len(summary.folded_warnings) - 1
        console.print(Text.assemble(("warning: ", "red"), first,
                                    f" (+{more} more warnings; --all shows them)"
                                    if more else ""), soft_wrap=True)
    console.print(_totals_line(plan))


def _family_table(families: list[FamilyCounts], max_families: int) -> Table:
    table = Table(title="steps by name family", title_justify="left", expand=False)
    table.add_column("family", overflow="fold")
    for column in ("steps", "run", "skip", "wait", "failed"):
        table.add_column(column, justify="right")
    shown = families if len(families) <= max_families else families[: max_families - 1]
    for counts in shown:
        _add_family(table, counts.family, counts)
    rest = families[len(shown):]
    if rest:
        merged = FamilyCounts(f"({len(rest)} more families)")
        for counts in rest:
            merged.steps += counts.steps
            merged.failed += counts.failed
            for action, n in counts.actions.items():
                merged.actions[action] += n
        _add_family(table, merged.family, merged)
    return table


def _add_family(table: Table, label: str, counts: FamilyCounts) -> None:
    a = counts.actions
    table.add_row(label, str(counts.steps),
                  Text(str(a["run"]), style=_ACTION_STYLE["run"] if a["run"] else ""),
                  Text(str(a["skip"]), style=_ACTION_STYLE["skip"] if a["skip"] else ""),
                  Text(str(a["wait"]), style=_ACTION_STYLE["wait"] if a["wait"] else ""),
                  Text(str(counts.failed), style="red" if counts.failed else ""))


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


def print_result(result: InvocationResult, console: Console) -> None:
    style = "green" if result.ok else "red"
    first, *rest = result.summary().splitlines()
    console.print(Text(first, style=f"bold {style}"))
    for line in rest:
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    if result.interrupted:
        console.print("interrupted: in-flight steps were marked CANCELLED and their leases "
                      "released; run again to resume")
