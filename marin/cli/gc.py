"""The ``marin gc``, ``marin du``, ``marin pin`` and ``marin unpin`` commands.

    marin gc --prefix gs://bucket/x                  # a dry run: what would go, and why
    marin gc --prefix gs://bucket/x --yes --older-than 30d
    marin du --prefix gs://bucket/x --json
    marin pin train/tiny-3f9c01ab --prefix gs://bucket/x
"""

from __future__ import annotations

import argparse
import math
import time
from typing import TYPE_CHECKING

from marin.cli.console import error, out, print_json, reject_extra, warn

if TYPE_CHECKING:
    from marin.execution.gc.scan import Scan

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    gcp = sub.add_parser("gc", help="list (dry run) or delete what nothing under a prefix "
                         "needs: old step versions, killed attempts, cut checkpoint saves")
    gcp.add_argument("--prefix", required=True)
    gcp.add_argument("--keep", action="append", default=[], metavar="EXPERIMENT",
                     help="keep only these experiments (or invocation ids); repeatable")
    gcp.add_argument("--older-than", metavar="AGE",
                     help="only what is older (30d, 12h; 0 for any age; default 24h)")
    gcp.add_argument("--keep-last", type=int, default=1, metavar="N",
                     help="keep the newest N invocations of each experiment (default 1), "
                          "and its last complete one")
    gcp.add_argument("--yes", action="store_true", help="delete (default: a dry run)")
    gcp.add_argument("--wait", type=float, default=60.0,
                     help="seconds to wait for executors that are planning (default 60)")
    gcp.add_argument("--json", action="store_true")
    gcp.set_defaults(handler=_gc)
    dup = sub.add_parser("du", help="bytes per experiment, step and version under a prefix, "
                         "and what marin gc would free")
    dup.add_argument("--prefix", required=True)
    dup.add_argument("--json", action="store_true")
    dup.set_defaults(handler=_du)
    for name, help_ in (("pin", "keep a step output from marin gc"),
                        ("unpin", "let marin gc judge a pinned step output again")):
        p = sub.add_parser(name, help=help_)
        p.add_argument("key", nargs="?" if name == "pin" else None, metavar="STEP_KEY")
        p.add_argument("--prefix", required=True)
        if name == "pin":
            p.add_argument("--list", action="store_true", help="list the pins")
        p.set_defaults(handler=_pin, remove=name == "unpin")


def _gc(args: argparse.Namespace, extra: list[str]) -> int:
    return reject_extra(extra) or _run_gc(args.prefix, args.keep, args.older_than, args.yes,
                                     args.json, args.wait, args.keep_last)


def _du(args: argparse.Namespace, extra: list[str]) -> int:
    return reject_extra(extra) or _run_du(args.prefix, args.json)


def _pin(args: argparse.Namespace, extra: list[str]) -> int:
    return reject_extra(extra) or _pin_command(args.prefix, args.key,
                                              getattr(args, "list", False), args.remove)


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def _age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:g}s"


def _checked_prefix(prefix: str) -> str | None:
    from marin.storage import StorageError, get_storage

    try:
        if not get_storage(prefix).list_dir(prefix):
            return (f"--prefix {prefix} does not exist or is empty; name the folder that "
                    "`marin executor --prefix` wrote to")
    except StorageError as e:
        return str(e)
    return None


def _notes(scan: Scan) -> list[str]:
    """One line for each part of the prefix gc leaves alone, and why."""
    notes = [f"left alone {n}: a prefix of its own (it holds .marin/); run marin gc "
             f"--prefix {n} for it" for n in scan.nested]
    notes += [_unreadable_note(r) for r in scan.unreadable]
    from marin.execution.gc.retention import from_the_future

    notes += [f"invocation {i.id} ({i.experiment}) says it started "
              f"{time.strftime('%Y-%m-%d %H:%M', time.localtime(i.started))}, in the future: "
              "kept, and not counted as its experiment's latest (check the clock of "
              f"{i.record.host or 'its host'})" for i in from_the_future(scan.invocations)]
    return notes


def _unreadable_note(record: str) -> str:
    return (f"kept every step output: the record {record} is unreadable, so gc cannot tell "
            "what it names; delete or repair it")


def _run_gc(prefix: str, keep: list[str], older_than: str | None, yes: bool, as_json: bool,
            wait: float = 60.0, keep_last: int = 1) -> int:
    from marin.execution.gc import GRACE_SECONDS, parse_age, run_gc
    from marin.execution.gc.reach import prefix_of
    from marin.execution.gc.retention import Retention, unknown_keeps
    from marin.execution.gc.scan import scan_prefix
    from marin.execution.prefix_guard import GcRefused

    prefix = prefix_of(prefix)
    problem = _checked_prefix(prefix)
    try:
        age = parse_age(older_than) if older_than is not None else GRACE_SECONDS
        rule = Retention(keep_last, tuple(keep))
    except ValueError as e:
        problem = problem or str(e)
    if problem is None and not (math.isfinite(wait) and wait >= 0):
        problem = (f"--wait {wait:g}: give the seconds to wait for planning executors, 0 or "
                   "more (e.g. --wait 60)")
    if problem is not None:
        return error(problem)
    scan = scan_prefix(prefix)
    unknown = unknown_keeps(scan.invocations, keep)
    if unknown:
        known = sorted({i.experiment for i in scan.invocations})
        return error(f"--keep {unknown[0]} names no experiment or invocation id under "
                    f"{prefix}/.marin/invocations; the experiments there: "
                    f"{', '.join(known) or 'none'}")
    try:
        run = run_gc(prefix, rule, age, yes, wait, scan=scan)
    except GcRefused as e:
        return error(str(e))
    found, skipped = run.found, run.skipped
    total = sum(c.bytes for c in found)
    if as_json:
        print_json({"prefix": prefix, "dry_run": not yes, "bytes": total,
                    "candidates": [c.to_json() for c in found], "skipped": skipped,
                    "older_than": age, "log": run.log, "notes": _notes(scan)})
        return 0
    console = out()
    verb = "deleted" if yes else "would delete"
    for c in found:
        console.print(f"{c.path}  {_size(c.bytes)}  {c.kind}: {c.reason}", highlight=False)
    for note in skipped:
        console.print(f"skipped {note}", highlight=False)
    for note in _notes(scan):
        console.print(note, highlight=False)
    console.print(f"{verb} {len(found)} item(s), {_size(total)}"
                  + ("" if yes else "; run again with --yes to delete them")
                  + (f"; nothing modified in the last {_age(age)} (--older-than)" if age else "")
                  + (f"; listed in {run.log}" if run.log else ""), highlight=False)
    return 0


def _run_du(prefix: str, as_json: bool) -> int:
    from marin.execution.gc.reach import prefix_of
    from marin.execution.gc.usage import prefix_usage

    prefix = prefix_of(prefix)
    problem = _checked_prefix(prefix)
    if problem is not None:
        return error(problem)
    usage = prefix_usage(prefix)
    if as_json:
        print_json({"prefix": prefix, "steps": [r.to_json() for r in usage.rows],
                    "experiments": usage.by_experiment, "step_names": usage.by_step,
                    "bytes": usage.bytes, "gc_frees": usage.gc_frees,
                    "nested_prefixes": list(usage.nested),
                    "unreadable": list(usage.unreadable)})
        return 0
    from rich.table import Table

    table = Table("experiment", "step", "version", "size", "modified", "gc frees")
    for r in usage.rows:
        table.add_row(r.experiment, r.step, r.version, _size(r.bytes),
                      time.strftime("%Y-%m-%d %H:%M", time.localtime(r.modified)),
                      _size(r.gc_frees))
    console = out()
    console.print(table)
    for title, totals in (("experiment", usage.by_experiment), ("step", usage.by_step)):
        console.print(f"per {title}: " + ", ".join(f"{name} {_size(size)}"
                                                    for name, size in totals.items()),
                      highlight=False)
    for nested in usage.nested:
        console.print(f"left out {nested}: a prefix of its own (it holds .marin/); run marin "
                      f"du --prefix {nested} for it", highlight=False)
    for record in usage.unreadable:
        console.print(_unreadable_note(record), highlight=False)
    console.print(f"{len(usage.rows)} step output(s), {_size(usage.bytes)}"
                  f"; marin gc --older-than 0 would free {_size(usage.gc_frees)} (by default gc "
                  "leaves what is under 24 hours old)", highlight=False)
    return 0


def _pin_command(prefix: str, key: str | None, listing: bool, remove: bool) -> int:
    from marin.execution.gc.pins import PinError, damaged_pins, pin, pins, unpin
    from marin.storage import StorageError

    try:
        if listing or key is None:
            for name in pins(prefix):
                print(name)
            for path in damaged_pins(prefix):
                warn(f"{path} names no step key, so gc keeps every output while it is "
                     "there; delete it, or pin the output again")
            return 0
        (unpin if remove else pin)(prefix, key)
    except (PinError, StorageError) as e:
        return error(str(e))
    return 0

