"""The ``marin`` command. Thin: each subcommand parses, calls the library and prints.

    marin executor --dry-run experiments/isoflop_3e19.py
    marin executor --prefix gs://bucket/x --max-concurrent 4 experiments.tiny --json
    marin trace summarize gs://bucket/train/run-1234 --top 15
    python -m marin.cli plugins list         # the same command, without the console script

One module per command group, each with ``register(subparsers)``: ``executor``,
``scaling``, ``cache``, ``trace``, ``services`` (``services``, ``kv``, ``status``), ``logs``,
``dashboard``, ``export``, ``evaluate`` (``eval``), ``gc`` (``gc``, ``du``, ``pin``,
``unpin``), ``plugins``, ``hardware``, ``storage``. ``console`` is what they all print
with (one-line errors, exit statuses, ``--json``); ``service_options`` the options the
service commands share.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

__all__ = ["main", "run"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    raw = argv[1:]
    if argv[:1] == ["executor"]:
        from marin.execution.frontend.options import normalize

        argv = ["executor", *normalize(raw, positionals=True)]
    args, extra = parser.parse_known_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    args.raw = raw
    return args.handler(args, extra)


class _Parser(argparse.ArgumentParser):
    """Usage errors in one line (exit status 2), pointing at ``--help``."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _parser() -> argparse.ArgumentParser:
    from marin.cli import (
        cache,
        dashboard,
        evaluate,
        executor,
        export,
        gc,
        hardware,
        logs,
        plugins,
        scaling,
        services,
        storage,
        trace,
    )

    parser = _Parser(prog="marin", description="Scaling-law experiments, "
                                     "from a laptop to a cluster.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for group in (executor, plugins, storage, hardware, cache, scaling, dashboard, trace, gc,
                  services, logs, export, evaluate):
        group.register(sub)
    return parser


def run() -> None:
    """The console script: ``main``, then exit. After a dry run the process ends without
    tearing down its objects one by one (a tenth of a 100,000-step dry run's time); other
    commands exit normally, so that atexit handlers (Ray's shutdown among them) run."""
    from marin.cli import executor

    try:
        code = main()
        if executor.exit_at_once:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    except BrokenPipeError:  # the reader went away (``| head``): exit as a shell would
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        os._exit(128 + 13)
    sys.exit(code)

