"""What every ``marin`` subcommand prints with: consoles, one-line errors, exit codes, JSON.

    out().print(table)                      # tables keep their columns in logs and pipes
    return error(f"--top must be positive, got {top}")           # one line on stderr, 2
    return reject_extra(extra) or body(args)                    # stray arguments: 2
    print_json(report, allow_nan=False)                         # --json: indent 1

    @command(service_errors)                # handler(args, extra); errors become one line
    def _get(args): ...

Exit statuses: 0 done, 1 the command ran and found something wrong (a broken plugin, a
service that refused), 2 bad input or a refusal before anything was done.
"""

from __future__ import annotations

import argparse
import functools
import json
from collections.abc import Callable, Iterable
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

__all__ = ["USAGE", "UsageError", "command", "error", "out", "print_json", "print_rows",
           "reject_extra", "say", "warn", "wide"]

USAGE = 2  # bad input: the exit status of every one-line refusal unless told otherwise
_PIPED_WIDTH = 200
_WIDE_PIPED_WIDTH = 10_000


class UsageError(ValueError):
    """Bad input to a command: printed as one line, exit status 2."""


def out() -> Console:
    """stdout: the terminal's width on a terminal; piped, 200 columns, so that tables in
    logs and pipes keep their columns."""
    console = Console(soft_wrap=True)
    if not console.is_terminal:
        console.width = _PIPED_WIDTH
    return console


def wide(stderr: bool = False) -> Console:
    """A console for rows or entries: the terminal's width on a terminal; piped into a file
    or another program, wide enough that no cell is cut or wrapped."""
    plain = Console(stderr=stderr)
    return plain if plain.is_terminal else Console(stderr=stderr, width=_WIDE_PIPED_WIDTH)


def error(message: str, code: int = USAGE) -> int:
    """``error: MESSAGE`` in one line on stderr (the message shown as it is, never read as
    markup); returns ``code`` for the command to exit with."""
    Console(stderr=True).print(f"[bold red]error:[/] {escape(message)}", highlight=False,
                               soft_wrap=True)
    return code


def say(message: str, stderr: bool = False) -> None:
    """One plain line (never read as markup): on stdout, or a note on stderr."""
    Console(stderr=stderr).print(message, markup=False, highlight=False, soft_wrap=True)


def warn(message: str, label: str = "warning") -> None:
    """``warning: MESSAGE`` in one line on stderr; the command goes on."""
    Console(stderr=True).print(f"[yellow]{label}:[/] {escape(message)}", highlight=False,
                               soft_wrap=True)


def reject_extra(extra: list[str]) -> int | None:
    """Arguments no option took: one line and 2; None when there are none."""
    if extra:
        return error(f"unrecognized arguments: {' '.join(extra)}")
    return None


def print_json(document: Any, indent: int | None = 1, flush: bool = False,
               **options: Any) -> None:
    """A ``--json`` answer on stdout (``options`` go to ``json.dumps``); ``indent=None``
    for one line, as JSON lines are."""
    print(json.dumps(document, indent=indent, **options), flush=flush)


def print_rows(rows: list[dict], as_json: bool, columns: list[str], title: str) -> None:
    """Rows as JSON, or as a table of ``columns`` whose cells are shown as they are (no
    markup, no control characters)."""
    from marin.services.log_service.reader import visible

    if as_json:
        print_json(rows)
        return
    table = Table(title=Text(visible(title)))
    for c in columns:
        table.add_column(c)
    for r in rows:
        table.add_row(*[Text("" if r.get(c) is None else visible(str(r.get(c))))
                        for c in columns])
    wide().print(table)


Errors = Callable[[], Iterable[tuple[tuple[type[BaseException], ...], int]]]


def command(errors: Errors | None = None):
    """Make ``fn(args) -> int`` a subcommand's handler ``(args, extra) -> int``: stray
    arguments exit 2; a ``UsageError`` or ``ValueError`` is one line and 2; each exception
    ``errors()`` names (imported when the command runs) is one line and its status."""
    def decorate(fn: Callable[[argparse.Namespace], int]):
        @functools.wraps(fn)
        def handler(args: argparse.Namespace, extra: list[str]) -> int:
            refused = reject_extra(extra)
            if refused is not None:
                return refused
            mapping = [*(errors() if errors else ()), ((ValueError,), USAGE)]
            caught = tuple(t for types, _ in mapping for t in types)
            try:
                return fn(args)
            except caught as e:
                return error(str(e), next(code for types, code in mapping
                                          if isinstance(e, types)))
        return handler
    return decorate

