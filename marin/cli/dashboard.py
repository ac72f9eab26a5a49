"""The ``marin dashboard`` command: a read-only web page over a prefix.

    marin dashboard --prefix gs://bucket/experiments --port 8050
    marin dashboard        # $MARIN_PREFIX, else ./local_store, as the executor

It prints the address to open and serves until interrupted (``marin.dashboard.server``).
"""

from __future__ import annotations

import argparse

from marin.cli.console import error, reject_extra

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    dash = sub.add_parser("dashboard", help="a read-only web page over a prefix: experiments, "
                          "step graphs, training curves, studies")
    dash.add_argument("--prefix", help="the executor prefix (default: $MARIN_PREFIX, else "
                      "./local_store, as the executor)")
    dash.add_argument("--port", type=_port_number, default=8050,
                      help="TCP port, 0 for any free one (default 8050)")
    dash.add_argument("--host", default="127.0.0.1", help="interface (default 127.0.0.1; any "
                      "other needs a token)")
    dash.add_argument("--token", help="secret for requests (default: $MARIN_DASHBOARD_TOKEN, "
                      "else a random one off loopback)")
    dash.set_defaults(handler=_dashboard)


def _port_number(text: str) -> int:
    """``--port``'s value: a TCP port, 0 to 65535 (0: any free port)."""
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is no TCP port: give 0 to 65535 (0 picks "
                                         "a free one)")
    return port


def _dashboard(args: argparse.Namespace, extra: list[str]) -> int:
    """Serve until interrupted; a dashboard that cannot start: one line, exit 2. Without
    ``--prefix``, the executor's default prefix ($MARIN_PREFIX, else ./local_store)."""
    from marin.dashboard.config import DashboardConfig
    from marin.dashboard.server import ServeError, serve
    from marin.execution.frontend.executor_main import resolve_prefix

    refused = reject_extra(extra)
    if refused is not None:
        return refused
    prefix = resolve_prefix(args.prefix)
    try:
        serve(DashboardConfig(prefix=prefix, host=args.host, port=args.port, token=args.token),
              announce=lambda line: print(line, flush=True))
    except ServeError as e:
        return error(str(e))
    except KeyboardInterrupt:
        pass
    return 0
