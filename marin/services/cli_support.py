"""What the service commands share: cluster options, one-line errors, tables, times.

    @wrap
    def _handler(args): ...            # UsageError and ValueError: exit 2; service errors: 1
    print_rows(rows, as_json, ["service", "address"], "services of cluster marin")
    parse_time("2h")                   # an epoch time two hours ago
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import time
from datetime import datetime

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from marin.services.log_service.reader import visible

__all__ = ["CLUSTER_ENV", "UsageError", "cluster", "cluster_args", "console", "fail",
           "parse_time", "print_rows", "wrap"]

CLUSTER_ENV = "MARIN_CLUSTER"
_PIPED_WIDTH = 10_000


def cluster_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cluster", default=None,
                   help="cluster name (default: $MARIN_CLUSTER, else marin)")
    p.add_argument("--clusters", metavar="ROOT", default=None,
                   help="where cluster registries live, a folder or fsspec URL "
                   "(default: $MARIN_CLUSTERS, else ~/.marin/clusters)")


def cluster(args: argparse.Namespace) -> str:
    return args.cluster or os.environ.get(CLUSTER_ENV) or "marin"


class UsageError(ValueError):
    pass


def fail(message: str, code: int = 2) -> int:
    Console(stderr=True).print(f"[bold red]error:[/] {escape(message)}", highlight=False,
                               soft_wrap=True)
    return code


def _run(fn, args: argparse.Namespace) -> int:
    from marin.services.channel import ServiceError
    from marin.services.kv_service.client import VersionConflictError
    from marin.services.manage import ServicesError
    from marin.services.resolve import ResolutionError
    from marin.services.server import ServiceConfigError

    try:
        return fn(args)
    except (UsageError, ServiceConfigError, ValueError) as e:
        return fail(str(e))
    except (ServiceError, ResolutionError, ServicesError, VersionConflictError) as e:
        return fail(str(e), 1)


def wrap(fn):
    def handler(args: argparse.Namespace, extra: list[str]) -> int:
        if extra:
            return fail(f"unrecognized arguments: {' '.join(extra)}")
        return _run(fn, args)
    return handler


def console(stderr: bool = False) -> Console:
    """A console for a table or entries: the terminal's width on a terminal; piped into a
    file or another program, wide enough that no cell is cut or wrapped."""
    plain = Console(stderr=stderr)
    return plain if plain.is_terminal else Console(stderr=stderr, width=_PIPED_WIDTH)


def print_rows(rows: list[dict], as_json: bool, columns: list[str], title: str) -> None:
    if as_json:
        print(json.dumps(rows, indent=1))
        return
    table = Table(title=Text(visible(title)))
    for c in columns:
        table.add_column(c)
    for r in rows:  # as Text: a value is shown as it is, never read as rich markup
        table.add_row(*[Text("" if r.get(c) is None else visible(str(r.get(c))))
                        for c in columns])
    console().print(table)


def parse_time(text: str | None, now: float | None = None) -> float | None:
    if not text:
        return None
    now = time.time() if now is None else now
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([smhd])", text.strip())
    if m:
        return now - float(m.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        if not math.isfinite(seconds):
            raise UsageError(f"--since/--until {text!r}: use a finite number of epoch seconds")
        return seconds
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise UsageError(f"--since/--until {text!r}: use epoch seconds, an ISO time "
                         "(2025-01-31T12:00) or an age such as 10m, 2h, 1d") from None
