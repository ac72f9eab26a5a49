"""Which invocations ``marin gc`` keeps: per experiment, its newest ones and its newest
complete one.

    rule = Retention(keep_last=1)
    kept = retained(scan.invocations, rule)   # {invocation id: (invocation, why kept)}
    keys = retained_keys(scan, rule)          # the outputs they name, and the pins

Per experiment gc keeps the newest ``keep_last`` invocations (by start time) and the newest
one that finished with every step done (``InvocationRecord.complete``): a killed or failed
run of a changed config leaves the last complete version reachable. Every invocation that
may still be running is kept too. With ``keep`` (``--keep``), only the experiments it names
(by the experiment as typed, its name or its script) and the invocations it names by id.

An experiment (``experiment_of``) is the script's resolved path and the experiment's name
(``marin.execution.experiments.experiment_id``), together with the names of its steps: one
file that builds another set of steps (by the environment, say) keeps each set's versions.
A record of format 1 or 2 names neither script nor name; it counts by the experiment as
typed and the names of its steps, as those records always did.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass

from marin.execution.gc.scan import Invocation, Output, Scan

__all__ = ["SKEW_SECONDS", "Retention", "experiment_of", "from_the_future", "retained",
           "retained_keys", "unknown_keeps", "why_unreachable"]


@dataclass(frozen=True)
class Retention:
    """What ``marin gc`` keeps of the invocation records."""

    keep_last: int = 1
    """The newest invocations kept per experiment (``--keep-last``; at least 1)."""
    keep: tuple[str, ...] = ()
    """Only these experiments (as typed, by name or by script) and invocation ids
    (``--keep``); empty: every experiment."""

    def __post_init__(self) -> None:
        if self.keep_last < 1:
            raise ValueError(f"--keep-last {self.keep_last}: keep at least the latest "
                             "invocation of each experiment (1 or more)")


def experiment_of(inv: Invocation) -> tuple[str, str, frozenset[str]]:
    """The experiment ``inv`` belongs to (see the module's docstring)."""
    record = inv.record
    if record.name is None:  # format 1 or 2
        return "", record.experiment, inv.names
    return record.script or "", record.name, inv.names


def _names(inv: Invocation) -> set[str | None]:
    """What ``--keep`` may call ``inv``'s experiment by."""
    return {inv.record.experiment, inv.record.name, inv.record.script}


def _spellings(keep: str) -> set[str]:
    """``keep`` and, where it is a file here, its resolved path: ``./train.py`` names the
    script that the records hold as ``/abs/train.py``."""
    with contextlib.suppress(OSError):
        if os.path.isfile(keep):
            return {keep, os.path.realpath(keep)}
    return {keep}


def _named(inv: Invocation, keep: tuple[str, ...]) -> bool:
    return any(_names(inv) & _spellings(k) for k in keep)


def unknown_keeps(invocations: Iterable[Invocation], keep: Iterable[str]) -> list[str]:
    """The ``keep`` values that name no experiment and no invocation id."""
    known: set[str | None] = set()
    for inv in invocations:
        known |= _names(inv) | {inv.id}
    return [k for k in keep if not _spellings(k) & known]


#: how far in the future an invocation's start may lie (clock skew between hosts)
SKEW_SECONDS = 300.0


def from_the_future(invocations: Iterable[Invocation], now: float | None = None
                    ) -> list[Invocation]:
    """The invocations whose record says they started later than ``now`` (and the skew
    allowed between hosts): a wrong clock, or a record written by hand."""
    now = time.time() if now is None else now
    return [i for i in invocations if i.started > now + SKEW_SECONDS]


def retained(invocations: Iterable[Invocation], rule: Retention, now: float | None = None
             ) -> dict[str, tuple[Invocation, str]]:
    """The invocations ``rule`` keeps, by id, each with why. One that started in the future
    (``from_the_future``) is kept and not counted among the latest, which it would
    otherwise always be, leaving the experiment's real latest invocation unprotected."""
    invocations = list(invocations)
    future = {i.id for i in from_the_future(invocations, now)}
    groups: dict[tuple[str, str, frozenset[str]], list[Invocation]] = {}
    everything = sorted(invocations, key=lambda i: (i.started, i.id), reverse=True)
    for inv in everything:  # the newest first
        if inv.id not in future:
            groups.setdefault(experiment_of(inv), []).append(inv)
    kept: dict[str, tuple[Invocation, str]] = {
        inv.id: (inv, "its record says it started in the future: kept, not counted as the "
                      "latest") for inv in everything if inv.id in future}
    for group in groups.values():
        if rule.keep and not any(_named(i, rule.keep) for i in group):
            continue
        for n, inv in enumerate(group[:rule.keep_last]):
            kept[inv.id] = (inv, "the experiment's latest invocation" if n == 0 else
                            f"one of the experiment's {rule.keep_last} latest invocations")
        complete = next((i for i in group if i.record.complete), None)
        if complete is not None and complete.id not in kept:
            kept[complete.id] = (complete, "the experiment's last complete invocation")
    for inv in everything:
        if inv.id in rule.keep and inv.id not in kept:
            kept[inv.id] = (inv, "named by --keep")
        if inv.id not in kept and inv.may_be_running:
            kept[inv.id] = (inv, "it may still be running")
    return kept


def retained_keys(scan: Scan, rule: Retention) -> set[str]:
    """The outputs kept (``Scan.kept_keys``) when ``rule`` says which invocations are."""
    return scan.kept_keys(inv for inv, _ in retained(scan.invocations, rule).values())


def why_unreachable(scan: Scan, out: Output, rule: Retention) -> str:
    """Why no kept invocation names ``out`` (one line)."""
    naming = sorted((i for i in scan.invocations if out.key in i.keys),
                    key=lambda i: (i.started, i.id))
    if not naming:
        return "no invocation under .marin/invocations references it, and it is not pinned"
    last = naming[-1]
    if rule.keep:
        return (f"referenced last by invocation {last.id} ({last.experiment}), which --keep "
                "does not keep")
    future = {i.id for i in from_the_future(scan.invocations)}
    mine = [i for i in scan.invocations if experiment_of(i) == experiment_of(last)
            and i.id not in future] or [last]
    latest = max(mine, key=lambda i: (i.started, i.id))
    complete = "" if last.record.complete else ", which did not complete"
    newest = (f"latest invocation {latest.id}" if rule.keep_last == 1 else
              f"{rule.keep_last} latest invocations (the latest {latest.id})")
    return (f"referenced last by invocation {last.id} ({last.experiment}){complete}; the "
            f"experiment's {newest} and its last complete one no longer use it")
