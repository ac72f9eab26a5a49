"""The bodies of ``marin gc``, ``marin du`` and ``marin pin``.

    marin gc --prefix gs://bucket/x                  # a dry run: what would go, and why
    marin gc --prefix gs://bucket/x --yes --older-than 30d
    marin du --prefix gs://bucket/x --json
    marin pin train/tiny-3f9c01ab --prefix gs://bucket/x
"""

from __future__ import annotations

import json
import sys
import time
import uuid

from rich.console import Console

from marin.execution.gc import Candidate, collect, delete, parse_age
from marin.execution.gc_scan import Scan, read_records, scan_prefix
from marin.execution.pins import PinError, pin, pins, unpin
from marin.execution.prefix_guard import GcRefused, take_prefix_for_gc
from marin.execution.status import STATUS_FILE
from marin.storage import StorageError, get_storage


def _err(message: str) -> int:
    """One line on stderr; exit status 2 (bad input, or a gc already running)."""
    print(f"error: {message}", file=sys.stderr)
    return 2


def _out() -> Console:
    return Console(soft_wrap=True, width=None if sys.stdout.isatty() else 200)


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def _checked_prefix(prefix: str) -> str | None:
    try:
        if not get_storage(prefix).list_dir(prefix):
            return (f"--prefix {prefix} does not exist or is empty; name the folder that "
                    "`marin executor --prefix` wrote to")
    except StorageError as e:
        return str(e)
    return None


def gc(prefix: str, keep: list[str], older_than: str | None, yes: bool, as_json: bool,
       wait: float = 60.0) -> int:
    prefix = prefix.rstrip("/")
    error = _checked_prefix(prefix)
    try:
        age = parse_age(older_than) if older_than is not None else None
    except ValueError as e:
        error = error or str(e)
    if error is not None:
        return _err(error)
    scan = scan_prefix(prefix)
    unknown = scan.unknown_keeps(keep)
    if unknown:
        known = sorted({i.experiment for i in scan.invocations})
        return _err(f"--keep {unknown[0]} names no experiment or invocation id under "
                    f"{prefix}/.marin/invocations; the experiments there: "
                    f"{', '.join(known) or 'none'}")
    skipped: list[str] = []
    if yes:
        try:
            lease = take_prefix_for_gc(prefix, get_storage(prefix),
                                       f"gc-{uuid.uuid4().hex[:8]}", wait)
        except GcRefused as e:
            return _err(str(e))
        try:  # read again under the lease: executors may have recorded runs meanwhile
            fresh = scan_prefix(prefix)
            found, skipped = delete(fresh, collect(fresh, keep, age))
        finally:
            lease.release()
    else:
        found = collect(scan, keep, age)
    total = sum(c.bytes for c in found)
    if as_json:
        print(json.dumps({"prefix": prefix, "dry_run": not yes, "bytes": total,
                          "candidates": [c.to_json() for c in found], "skipped": skipped},
                         indent=1))
        return 0
    console = _out()
    verb = "deleted" if yes else "would delete"
    for c in found:
        console.print(f"{c.path}  {_size(c.bytes)}  {c.kind}: {c.reason}", highlight=False)
    for note in skipped:
        console.print(f"skipped {note}", highlight=False)
    console.print(f"{verb} {len(found)} item(s), {_size(total)}"
                  + ("" if yes else "; run again with --yes to delete them"), highlight=False)
    return 0


def _rows(scan: Scan, reclaim: dict[str, int]) -> list[dict[str, object]]:
    latest = sorted(scan.invocations, key=lambda i: i.started)
    experiment = {}
    for inv in latest:  # the latest invocation naming a step says whose it is
        for key in inv.keys:
            experiment[key] = inv.experiment
    rows = [{"experiment": experiment.get(o.key, "(none)"), "step": o.name, "key": o.key,
             "bytes": o.bytes, "modified": o.newest, "gc_frees": reclaim.get(o.key, 0),
             "status": o.status.status.stored if o.status is not None else None}
            for o in scan.outputs.values()]
    return sorted(rows, key=lambda r: (-float(r["modified"]), str(r["key"])))  # type: ignore[arg-type]


def du(prefix: str, as_json: bool) -> int:
    prefix = prefix.rstrip("/")
    error = _checked_prefix(prefix)
    if error is not None:
        return _err(error)
    scan = scan_prefix(prefix)
    read_records(get_storage(prefix), list(scan.outputs.values()), (STATUS_FILE,))
    reclaim: dict[str, int] = {}
    for c in collect(scan, []):
        reclaim[c.output] = reclaim.get(c.output, 0) + c.bytes
    rows = _rows(scan, reclaim)
    if as_json:
        print(json.dumps({"prefix": prefix, "steps": rows,
                          "bytes": sum(int(r["bytes"]) for r in rows),  # type: ignore[call-overload]
                          "gc_frees": sum(reclaim.values())}, indent=1))
        return 0
    from rich.table import Table

    table = Table("experiment", "step", "version", "size", "modified", "gc frees")
    for r in rows:
        table.add_row(str(r["experiment"]), str(r["step"]), str(r["key"]).rsplit("-", 1)[-1],
                      _size(int(r["bytes"])),  # type: ignore[call-overload]
                      time.strftime("%Y-%m-%d %H:%M", time.localtime(float(r["modified"]))),  # type: ignore[arg-type]
                      _size(int(r["gc_frees"])))  # type: ignore[call-overload]
    console = _out()
    console.print(table)
    held = _size(sum(o.bytes for o in scan.outputs.values()))
    console.print(f"{len(rows)} step output(s), {held}"
                  f"; marin gc would free {_size(sum(reclaim.values()))}", highlight=False)
    return 0


def pin_command(prefix: str, key: str | None, listing: bool, remove: bool) -> int:
    try:
        if listing or key is None:
            for name in pins(prefix):
                print(name)
            return 0
        (unpin if remove else pin)(prefix, key)
    except (PinError, StorageError) as e:
        return _err(str(e))
    return 0


__all__ = ["Candidate", "du", "gc", "pin_command"]
