"""``marin gc``: what nothing needs under a prefix, listed (a dry run), then deleted.

    scan = scan_prefix(prefix)
    found = collect(scan, Retention(keep_last=1))   # nothing newer than GRACE_SECONDS
    for item in found: print(item.path, item.bytes, item.reason)
    delete(scan, found)              # under the prefix's gc lease (marin.execution.prefix_guard)
    run = run_gc(prefix, Retention(), older_than=0, yes=True)   # all of it, in one call

What goes: attempt folders of steps with no live lease (but the attempt whose checkpoints
a resume would continue from, and the one a commit cut short puts in place), orbax's
temporary folders of saves cut short, checkpoint folders that were written but never
published (an attempt that lost its lease), and step outputs that no kept invocation
(``marin.execution.gc.retention``) and no pin references.
Nothing modified in the last ``older_than`` seconds goes (24 hours unless told: a grace
period, as git's reflog gives). A step whose lease is live is never touched, and each is
checked again right before its files go: an output's status goes first, so a reader never
sees SUCCESS over a half-deleted output. Before the deletes begin, every one of them is
listed in a log under the prefix (``marin.execution.gc.log``).

Design note: the lease, not the status, says whether a step runs. An executor writes
RUNNING only once it holds the lease and gives the lease up only after the final status,
so every running step's lease is live; a RUNNING status under a stale lease (or none) is
an executor killed mid-step. So an unreachable output's status is never read: gc of
10,000 outputs costs a listing, a read per lease and the batched deletes.
"""

from __future__ import annotations

import re
import time
import uuid
from dataclasses import dataclass

from marin.execution.commit import read_pending
from marin.execution.gc.log import GcLogEntry, write_log
from marin.execution.gc.reach import info_of, inside, resumes
from marin.execution.gc.retention import Retention, retained_keys, why_unreachable
from marin.execution.gc.scan import (
    Output,
    Scan,
    confined,
    newest_time,
    read_records,
    record_file,
    scan_prefix,
    sum_sizes,
)
from marin.execution.prefix_guard import GcRefused, take_prefix_for_gc
from marin.execution.shared import PUBLISHED_BY, RUNS, adopted_attempt, published_by
from marin.execution.states import StepState
from marin.execution.status import (
    ATTEMPTS_FOLDER,
    COMMIT_FILE,
    INFO_FILE,
    LEASE_FILE,
    STATUS_FILE,
)
from marin.storage import FileEntry, get_storage

__all__ = ["GRACE_SECONDS", "Candidate", "GcRun", "collect", "delete", "parse_age", "run_gc"]

#: What gc keeps by default however unreachable: anything modified in the last 24 hours.
GRACE_SECONDS = 24 * 3600.0

_TMP = ".orbax-checkpoint-tmp"
_AGE = re.compile(r"^(\d+(?:\.\d+)?)([smhdw])$")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


@dataclass(frozen=True)
class Candidate:
    kind: str
    """``output``, ``attempt``, ``orbax-tmp`` or ``unpublished``."""
    output: str
    """The step's key."""
    path: str
    files: tuple[FileEntry, ...]
    reason: str

    bytes = property(lambda self: sum_sizes(self.files))
    newest = property(lambda self: newest_time(self.files))

    def to_json(self) -> dict[str, object]:
        return {"kind": self.kind, "step": self.output, "path": self.path,
                "bytes": self.bytes, "files": len(self.files), "reason": self.reason,
                "modified": self.newest}


def parse_age(text: str) -> float:
    """Seconds in ``30d``, ``12h``, ``90m``, ``2w`` (``0``: any age); ValueError naming the
    forms otherwise."""
    if text.strip() == "0":
        return 0.0
    match = _AGE.match(text.strip())
    if not match:
        raise ValueError(f"--older-than {text!r} is not an age: write a number and a unit, "
                         "s, m, h, d or w (30d, 12h), or 0 for any age")
    return float(match.group(1)) * _SECONDS[match.group(2)]


def collect(scan: Scan, keep: Retention | list[str], older_than: float | None = GRACE_SECONDS,
            now: float | None = None) -> list[Candidate]:
    """What ``scan`` holds that nothing needs: ``keep`` says which invocations are kept (a
    list: ``Retention(keep=...)``); only what is older than ``older_than`` seconds (None or
    0: whatever its age)."""
    rule = keep if isinstance(keep, Retention) else Retention(keep=tuple(keep))
    kept = retained_keys(scan, rule)
    # Statuses matter only for what gc keeps (a succeeded step's attempts all go): an
    # unreachable output goes whatever its status says, unless its lease is live.
    read_records(get_storage(scan.prefix), scan.prefix,
                 [o for o in scan.outputs.values() if o.key in kept], (STATUS_FILE,))
    found: list[Candidate] = []
    for out in sorted(scan.outputs.values(), key=lambda o: o.key):
        if out.live:
            continue
        if out.key not in kept:
            found.append(Candidate("output", out.key, out.path, tuple(out.files),
                                   why_unreachable(scan, out, rule)))
            continue
        found += _leftovers(scan, out)
    if older_than:
        cutoff = (time.time() if now is None else now) - older_than
        found = [c for c in found if c.newest < cutoff]
    return found


def _leftovers(scan: Scan, out: Output) -> list[Candidate]:
    """Attempt folders, temporary and unpublished checkpoint folders of a kept output."""
    groups: dict[tuple[str, str], list[FileEntry]] = {}
    succeeded = out.status is not None and out.status.status is StepState.SUCCEEDED
    needed = set() if succeeded else {_adopted(scan.prefix, out), _committing(scan.prefix, out)}
    for entry in out.files:
        parts = entry.path[len(out.path) + 1:].split("/")
        if parts[0] == ATTEMPTS_FOLDER and len(parts) > 2:
            if parts[1] not in needed:
                groups.setdefault(("attempt", "/".join(parts[:2])), []).append(entry)
            continue
        if inside(f"{out.key}/{'/'.join(parts)}", scan.copies):
            continue  # a copy of an output inside this one: kept whole, whatever it holds
        tmp = next((i for i, p in enumerate(parts) if _TMP in p), None)
        if tmp is not None:
            groups.setdefault(("orbax-tmp", "/".join(parts[:tmp + 1])), []).append(entry)
            continue
        if len(parts) > 4 and parts[1] == RUNS:
            folder = f"{out.path}/{'/'.join(parts[:4])}"
            if folder not in scan.markers:
                groups.setdefault(("unpublished", "/".join(parts[:4])), []).append(entry)
    reasons = {"attempt": "attempt folder of a step with no live lease",
               "orbax-tmp": "temporary folder of a checkpoint save cut short",
               "unpublished": "checkpoint written by an attempt that lost its lease; never "
                              "published"}
    return [Candidate(kind, out.key, f"{out.path}/{rel}", tuple(files), reasons[kind])
            for (kind, rel), files in sorted(groups.items(), key=lambda g: g[0][1])]


def _adopted(prefix: str, out: Output) -> str | None:
    """The attempt a resume of ``out`` adopts (``adopted_attempt``, the worker's rule), from
    the listing: its attempts, and the shared folders a ``.published_by`` shows."""
    attempts, shared = set(), []
    for entry in out.files:
        parts = entry.path[len(out.path) + 1:].split("/")
        if parts[0] == ATTEMPTS_FOLDER and len(parts) > 2:
            attempts.add(parts[1])
        elif (len(parts) == 2 and parts[1] == PUBLISHED_BY and not parts[0].startswith(".")
              and confined(prefix, [entry.path])):
            shared.append(parts[0])
    if not attempts or not _resumes(prefix, out):
        return None
    return adopted_attempt(sorted(attempts), published_by(get_storage(out.path), out.path,
                                                          shared))


def _committing(prefix: str, out: Output) -> str | None:
    """The attempt a commit under way puts in place (its ``.executor_commit``): the next
    executor finishes that commit from it, so it stays."""
    path = f"{out.path}/{COMMIT_FILE}"
    if record_file(out, COMMIT_FILE) is None or not confined(prefix, [path]):
        return None
    pending = read_pending(get_storage(path), out.path)
    return pending.record.run_id if pending is not None and pending.record else None


def _resumes(prefix: str, out: Output) -> bool:
    """Whether a rerun of ``out``'s step adopts an attempt, from its info record (read
    here when the scan did not need it)."""
    if out.resumes is None:
        path = f"{out.path}/{INFO_FILE}"
        found = confined(prefix, [path]) and record_file(out, INFO_FILE) is not None
        out.resumes = resumes(info_of(get_storage(path).read(path)) if found else None)
    return out.resumes


def _changed_since(scan: Scan,
                   candidates: list[Candidate]) -> tuple[dict[str, Output], list[str]]:
    """The candidates' outputs whose lease may have changed since ``scan``, with their
    leases read again: those where the listing now shows a lease or a status file that
    changed (a status is rewritten only under the step's lease); and the nested prefixes
    the listing shows now. One listing of the prefix, few reads."""
    storage = get_storage(scan.prefix)
    fresh = scan_prefix(scan.prefix, storage, read=False)
    now = fresh.outputs
    wanted = {c.output for c in candidates}
    changed = []
    for key in wanted & now.keys():
        out, before = now[key], scan.outputs.get(key)
        old = record_file(before, STATUS_FILE) if before is not None else None
        if record_file(out, LEASE_FILE) is not None or record_file(out, STATUS_FILE) != old:
            changed.append(out)
    read_records(storage, scan.prefix, changed, (LEASE_FILE,))
    return {out.key: out for out in changed}, fresh.nested


def _overlaps(path: str, prefixes: list[str]) -> bool:
    """Whether ``path`` is, holds or lies inside one of the nested ``prefixes``."""
    return any(path == p or path.startswith(p + "/") or p.startswith(path + "/")
               for p in prefixes)


@dataclass(frozen=True)
class GcRun:
    """What one gc found (a dry run) or deleted."""

    found: list[Candidate]
    """Deleted (``yes``) or to be deleted (a dry run)."""
    skipped: list[str]
    """A note for each step left alone because its lease became live since the scan."""
    log: str | None = None
    """The log listing the deletions (``marin.execution.gc.log``); None: nothing deleted."""


def run_gc(prefix: str, rule: Retention, older_than: float | None = GRACE_SECONDS,
           yes: bool = False, wait: float = 60.0, scan: Scan | None = None) -> GcRun:
    """gc of ``prefix``: a dry run (of ``scan`` when given), or with ``yes`` the deletes,
    under the prefix's gc lease (``GcRefused`` when another gc holds it, an executor keeps
    planning, or an invocation record or a pin is unreadable)."""
    if not yes:
        return GcRun(collect(scan or scan_prefix(prefix), rule, older_than), [])
    lease = take_prefix_for_gc(prefix, get_storage(prefix), f"gc-{uuid.uuid4().hex[:8]}",
                               wait)
    try:  # read under the lease: executors may have recorded runs since any earlier scan
        scan = scan_prefix(prefix)
        if scan.unreadable:
            raise GcRefused(f"the record {scan.unreadable[0]} is unreadable, so "
                            "gc cannot tell what it names; delete or repair it, then run gc "
                            "--yes again")
        return delete(scan, collect(scan, rule, older_than))
    finally:
        lease.release()


def delete(scan: Scan, candidates: list[Candidate]) -> GcRun:
    """Delete ``candidates``, found in ``scan`` (the caller holds the gc lease), once the
    log lists them: the deleted ones, with a note for each step skipped because it became
    live since the scan."""
    storage = get_storage(scan.prefix)
    fresh, nested = _changed_since(scan, candidates)
    done, skipped = [], []
    for c in candidates:
        now = fresh.get(c.output)
        if _overlaps(c.path, nested):
            skipped.append(f"{c.output}: a nested prefix appeared there; left alone")
        elif now is not None and now.live:
            skipped.append(f"{c.output}: its lease is live now; left alone")
        else:
            done.append(c)
    at = time.time()
    log = write_log(scan.prefix, storage, [GcLogEntry.of(c, at) for c in done])
    statuses = [f"{c.path}/{STATUS_FILE}" for c in done if c.kind == "output"]
    storage.delete_files(statuses, scan.prefix)  # first: no SUCCESS over a half-deleted output
    first = set(statuses)  # (a copy's status inside an output goes with the rest)
    storage.delete_files([f.path for c in done for f in c.files if f.path not in first],
                         scan.prefix)
    return GcRun(done, skipped, log)
