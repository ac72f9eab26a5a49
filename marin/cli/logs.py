"""The ``marin logs`` commands: entries of the log service, printed a page at a time.

    marin logs tail -n 50 --run r1 --follow
    marin logs query --level ERROR --since 1h --json

An answer with no entries prints nothing on stdout and says on stderr what it searched for
and what to check.
"""

from __future__ import annotations

import argparse
import os
import time

from rich.console import Console

from marin.cli.console import UsageError, command, print_json, say
from marin.cli.service_options import cluster, cluster_args, parse_time
from marin.services.errors import exit_statuses

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    logs = sub.add_parser("logs", help="read the log service")
    lsub = logs.add_subparsers(dest="logs_command", metavar="ACTION", required=True)
    tail = lsub.add_parser("tail", help="the latest entries; --follow for new ones")
    _log_filters(tail)
    tail.add_argument("-n", "--lines", type=int, default=20)
    tail.add_argument("--follow", "-f", action="store_true")
    tail.set_defaults(handler=_logs_tail)
    query = lsub.add_parser("query", help="entries matching filters, oldest first")
    _log_filters(query)
    query.add_argument("--limit", type=int, default=1000)
    query.set_defaults(handler=_logs_query)


def _log_filters(p: argparse.ArgumentParser) -> None:
    cluster_args(p)
    p.add_argument("--url", help="the log service (default: $MARIN_LOGGER, else "
                   "iris://CLUSTER?endpoint=/system/logger)")
    p.add_argument("--run")
    p.add_argument("--step", type=int)
    p.add_argument("--level", help="minimum level: DEBUG, INFO, WARNING, ERROR, CRITICAL")
    p.add_argument("--grep", help="text the message contains")
    p.add_argument("--since", help="epoch seconds, ISO time, or an age such as 10m, 2h, 1d")
    p.add_argument("--until", help="same forms as --since")
    p.add_argument("--json", action="store_true", help="JSON lines")


def _logger_url(args: argparse.Namespace) -> str:
    from marin.services.manage import service_url

    if args.url:
        return args.url
    if os.environ.get("MARIN_LOGGER") and not args.cluster:
        return os.environ["MARIN_LOGGER"]
    return service_url(cluster(args), "logger", args.clusters)


def _show(args: argparse.Namespace, limit: int, newest: bool, after_id: int = 0,
          console: Console | None = None) -> tuple[int, int]:
    """Print the matching entries a page at a time; (how many, the last id seen)."""
    from marin.services.log_service.reader import format_entry, pages

    if limit < 1:
        raise UsageError(f"--limit/-n {limit}: ask for at least 1 entry")
    console = console or Console()
    shown, last = 0, after_id
    found = pages(_logger_url(args), run=args.run, step=args.step, min_level=args.level,
                  since=parse_time(args.since), until=parse_time(args.until), grep=args.grep,
                  limit=limit, newest=newest, after_id=after_id)
    for entries, page_last in found:
        for e in entries:
            if args.json:
                print_json(e, indent=None, flush=True)
            else:
                console.print(format_entry(e), highlight=False, markup=False, soft_wrap=True)
        shown += len(entries)
        last = page_last
    return shown, last


def _say_none(args: argparse.Namespace) -> None:
    """What an empty answer means, on stderr (stdout stays empty for a pipe)."""
    filters = " ".join(f"--{name} {value}" for name, value in (
        ("step", args.step), ("level", args.level), ("grep", args.grep),
        ("since", args.since), ("until", args.until)) if value is not None)
    url = _logger_url(args)
    if args.run:
        what = f"no entries for run {args.run}"
        check = (f"check the run name (without --run, the latest entries of every run are "
                 f"shown) and that the run's processes had $MARIN_LOGGER={url} and "
                 f"$MARIN_RUN={args.run} set")
    else:
        what = f"no entries in {url}"
        check = f"check that the writers had $MARIN_LOGGER={url} set"
    if filters:
        what += f" matching {filters}"
        check += "; try fewer filters"
    say(f"{what}; {check}", stderr=True)


@command(exit_statuses)
def _logs_query(args: argparse.Namespace) -> int:
    if not _show(args, args.limit, newest=False)[0]:
        _say_none(args)
    return 0


@command(exit_statuses)
def _logs_tail(args: argparse.Namespace) -> int:
    console = Console()
    shown, last = _show(args, args.lines, newest=True, console=console)
    if not shown:
        _say_none(args)
    try:
        while args.follow:
            time.sleep(0.5)
            last = _show(args, 10_000, newest=False, after_id=last, console=console)[1]
    except KeyboardInterrupt:
        pass
    return 0
