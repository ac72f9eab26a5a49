"""Progress of an invocation: a rich live view on a terminal, plain log lines elsewhere.

    progress = progress_for(Console())    # LiveProgress on a TTY, LineProgress otherwise
    executor.run(steps, progress=progress)
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Protocol

from marin.execution.states import StepState

if TYPE_CHECKING:  # rich is imported when an invocation shows progress, not with the executor
    from rich.console import Console, Group
    from rich.live import Live

    from marin.execution.outcome import StepOutcome
    from marin.execution.planning import Plan, PlanEntry


class Progress(Protocol):
    def invocation_started(self, plan: Plan, pending: int) -> None: ...
    def step_started(self, entry: PlanEntry) -> None: ...
    def step_finished(self, entry: PlanEntry, outcome: StepOutcome) -> None: ...
    def step_blocked(self, entry: PlanEntry, reason: str) -> None: ...
    def invocation_finished(self) -> None: ...


class SilentProgress:
    def invocation_started(self, plan: Plan, pending: int) -> None: ...
    def step_started(self, entry: PlanEntry) -> None: ...
    def step_finished(self, entry: PlanEntry, outcome: StepOutcome) -> None: ...
    def step_blocked(self, entry: PlanEntry, reason: str) -> None: ...
    def invocation_finished(self) -> None: ...


#: How a line or the live table labels each outcome.
_LABEL = {StepState.SUCCEEDED: "done", StepState.REUSED: "reused", StepState.FAILED: "FAILED",
          StepState.LOST_LEASE: "LOST LEASE", StepState.CANCELLED: "cancelled"}


class FlopEta:
    """Steps done, running and left, and an ETA from the steps' declared FLOPs.

    The rate is the FLOPs of the steps finished so far over the time since the first
    estimated step started; the ETA is the FLOPs still to run at that rate. Steps that
    declare no estimate count as steps but not as work. No ETA is given before a tenth of
    the work is done (``ETA_AFTER``): until then the rate misses the work of long steps
    still running (a ladder's stable runs, while their short branches finish first) and
    would give hours for minutes.
    """

    ETA_AFTER = 0.1  # the fraction of the estimated FLOPs done before an ETA is given

    def __init__(self) -> None:
        self.pending: dict[str, float] = {}
        self.running: set[str] = set()
        self.done = 0
        self.failed = 0
        self.flops_done = 0.0
        self._first_start: float | None = None

    def planned(self, plan: Plan) -> None:
        for entry in plan.entries:
            if entry.action != "skip":
                estimate = entry.estimate
                self.pending[entry.node.key] = estimate.flops if estimate else 0.0

    def started(self, key: str) -> None:
        self.running.add(key)
        if self._first_start is None and self.pending.get(key):
            self._first_start = time.monotonic()

    def finished(self, key: str, ok: bool) -> None:
        self.running.discard(key)
        flops = self.pending.pop(key, 0.0)
        if ok:
            self.done += 1
            self.flops_done += flops
        else:
            self.failed += 1

    @property
    def left(self) -> int:
        return len(self.pending) - len(self.running)

    def eta_seconds(self) -> float | None:
        total = self.flops_done + sum(self.pending.values())
        if not self.flops_done or self._first_start is None or \
                self.flops_done < self.ETA_AFTER * total:
            return None
        rate = self.flops_done / max(1e-9, time.monotonic() - self._first_start)
        return sum(self.pending.values()) / rate

    def describe(self) -> str:
        eta = self.eta_seconds()
        text = f"{self.done} done, {len(self.running)} running, {max(0, self.left)} left"
        if self.failed:
            text += f", {self.failed} failed"
        if eta is not None and self.pending:
            text += f", ETA {_duration(eta)}"
        return text


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


class LineProgress:
    """One line per event, for logs and pipes."""

    def __init__(self, console: Console):
        self.console = console
        self._start = time.monotonic()
        self._eta = FlopEta()

    def _line(self, text: str) -> None:
        elapsed = time.monotonic() - self._start
        self.console.print(f"[{elapsed:7.1f}s] {text}", markup=False, highlight=False,
                           soft_wrap=True)

    def invocation_started(self, plan: Plan, pending: int) -> None:
        totals = plan.totals()
        self._eta.planned(plan)
        self._line(f"{totals['run']} steps to run, {totals['wait']} running elsewhere, "
                   f"{totals['skip']} skipped")

    def step_started(self, entry: PlanEntry) -> None:
        self._eta.started(entry.node.key)
        self._line(f"start   {entry.node.key}  ({entry.reason})")

    def step_finished(self, entry: PlanEntry, outcome: StepOutcome) -> None:
        self._eta.finished(entry.node.key, outcome.state.is_done)
        detail = f": {outcome.error}" if outcome.error else ""
        detail += f" ({outcome.note})" if outcome.note else ""
        label = _LABEL.get(outcome.state, outcome.state.value)
        self._line(f"{label:<7} {entry.node.key} in {outcome.seconds:.1f}s"
                   f"{detail}  [{self._eta.describe()}]")

    def step_blocked(self, entry: PlanEntry, reason: str) -> None:
        self._eta.finished(entry.node.key, False)
        self._line(f"blocked {entry.node.key}: {reason}")

    def invocation_finished(self) -> None:
        self._line("finished")


class LiveProgress:
    """A live table: counts of done, running, pending and failed steps, and what runs now."""

    def __init__(self, console: Console):
        self.console = console
        self._live: Live | None = None
        self._start = time.monotonic()
        self._pending = 0
        self._done = 0
        self._failed = 0
        self._running: dict[str, float] = {}
        self._eta = FlopEta()

    def invocation_started(self, plan: Plan, pending: int) -> None:
        from rich.live import Live

        self._pending = pending
        self._eta.planned(plan)
        self._live = Live(self._render(), console=self.console, refresh_per_second=4,
                          transient=False)
        self._live.start()

    def step_started(self, entry: PlanEntry) -> None:
        self._running[entry.node.key] = time.monotonic()
        self._eta.started(entry.node.key)
        self._refresh()

    def step_finished(self, entry: PlanEntry, outcome: StepOutcome) -> None:
        self._running.pop(entry.node.key, None)
        self._eta.finished(entry.node.key, outcome.state.is_done)
        if outcome.state.is_done:
            self._done += 1
        else:
            self._failed += 1
            label = _LABEL.get(outcome.state, outcome.state.value)
            self.console.print(f"[red]{label}[/] {entry.node.key}: "
                               f"{outcome.error or ''}")
        self._refresh()

    def step_blocked(self, entry: PlanEntry, reason: str) -> None:
        self._failed += 1
        self._eta.finished(entry.node.key, False)
        self._refresh()

    def invocation_finished(self) -> None:
        if self._live is not None:
            self._live.update(self._render())
            self._live.stop()

    def _refresh(self) -> None:
        if self._live is not None:
            self._live.update(self._render())

    def _render(self) -> Group:
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        now = time.monotonic()
        remaining = self._pending - self._done - self._failed - len(self._running)
        header = Text.assemble(
            ("done ", "bold"), (str(self._done), "green"), "   ",
            ("running ", "bold"), (str(len(self._running)), "cyan"), "   ",
            ("pending ", "bold"), str(max(0, remaining)), "   ",
            ("failed ", "bold"), (str(self._failed), "red" if self._failed else ""), "   ",
            ("elapsed ", "bold"), f"{now - self._start:.0f}s",
        )
        eta = self._eta.eta_seconds()
        if eta is not None and self._eta.pending:
            header.append(f"   ETA {_duration(eta)} (from FLOP estimates)", style="bold")
        table = Table(show_header=False, box=None, pad_edge=False)
        for key, since in list(self._running.items())[:12]:
            table.add_row(Text("running", style="cyan"), key, f"{now - since:.0f}s")
        return Group(header, table)


def progress_for(console: Console) -> Progress:
    return LiveProgress(console) if console.is_terminal else LineProgress(console)
