"""Running one service in the foreground: the process a service is.

    python -m marin.services.serve logger --data /var/marin/logger --cluster marin
    marin services serve kv --port 7001 --data /var/marin/kv      # the same, from the CLI

``marin services up`` starts each service this way, detached. The arguments live here,
beside the process's entry point (``marin services serve`` adds the same ones), so that
the server module needs nothing of the command line. A service that cannot start (a bad
setting, no token off loopback) says why in one line on stderr and exits 2.
"""

from __future__ import annotations

import argparse
import os
import sys

__all__ = ["add_serve_arguments", "main", "serve_parser", "service_config"]


def add_serve_arguments(serve: argparse.ArgumentParser) -> argparse.ArgumentParser:
    serve.add_argument("kind", choices=["logger", "kv"])
    serve.add_argument("--data", required=True, help="storage folder")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=0, help="0 picks a free port")
    serve.add_argument("--cluster", help="register the endpoint in this cluster's registry")
    serve.add_argument("--clusters", metavar="ROOT", help="where registries live "
                       "(default: $MARIN_CLUSTERS, else ~/.marin/clusters)")
    serve.add_argument("--token-file", help="file holding the token callers must present "
                       "(default: $MARIN_SERVICES_TOKEN, else the cluster's token)")
    serve.add_argument("--advertise", help="host:port's host written to the registry")
    serve.add_argument("--retention-days", type=float, default=30.0,
                       help="delete log entries older than this (0 keeps all; default 30)")
    serve.add_argument("--synchronous", choices=["full", "normal"], default="full",
                       help="full: fsync every commit (default); normal: survive a crash of "
                       "the service, not of the machine")
    serve.add_argument("--max-batch-entries", type=int, default=100_000)
    serve.add_argument("--max-message-bytes", type=int, default=16 << 20)
    return serve


def serve_parser() -> argparse.ArgumentParser:
    return add_serve_arguments(argparse.ArgumentParser(prog="python -m marin.services.serve"))


def service_config(args: argparse.Namespace):
    """The ``ServiceConfig`` that the arguments of ``add_serve_arguments`` name."""
    from marin.services.endpoints import TOKEN_ENV, read_token_file
    from marin.services.server import ServiceConfig

    token = read_token_file(args.token_file) if args.token_file else \
        os.environ.get(TOKEN_ENV) or None
    return ServiceConfig(kind=args.kind, data=args.data, host=args.host, port=args.port,
                         cluster=args.cluster, clusters_root=args.clusters, token=token,
                         advertise=args.advertise, retention_days=args.retention_days,
                         synchronous=args.synchronous, max_batch_entries=args.max_batch_entries,
                         max_message_bytes=args.max_message_bytes)


def main(argv: list[str] | None = None) -> int:
    """Serve until stopped; a service that cannot start: one line on stderr, exit 2 (a
    setting and its fix) or 1 (``marin.services.errors``)."""
    from marin.services.errors import exit_statuses
    from marin.services.server import serve_forever

    args = serve_parser().parse_args(argv)
    statuses = exit_statuses()
    try:
        return serve_forever(service_config(args))
    except tuple(t for types, _ in statuses for t in types) as e:
        print(f"error: {e}", file=sys.stderr)
        return next(status for types, status in statuses if isinstance(e, types))


if __name__ == "__main__":
    sys.exit(main())
