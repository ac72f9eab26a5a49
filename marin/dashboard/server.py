"""Serving the dashboard: bind, check the prefix, print the address, run uvicorn.

    serve(DashboardConfig(prefix="gs://bucket/experiments", port=8050))
    # marin dashboard --prefix gs://bucket/experiments --port 8050
    # marin dashboard        # $MARIN_PREFIX, else ./local_store, as the executor

On loopback (the default) no token is needed. On any other interface the dashboard refuses
to start without one, unless it makes one: ``MARIN_DASHBOARD_TOKEN``, ``--token``, or a fresh
random token printed in the address to open.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import secrets
import socket

from marin.dashboard.config import DashboardConfig


class ServeError(Exception):
    """The server cannot start; the message names the setting and the fix."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def prepare(config: DashboardConfig) -> DashboardConfig:
    """``config`` checked: a usable prefix, and a token whenever the host is not loopback."""
    from marin.dashboard.reader import DashboardError, normalize_prefix
    from marin.storage import StorageError, get_storage

    try:
        prefix = normalize_prefix(config.prefix)
        get_storage(prefix)
    except (DashboardError, StorageError) as e:
        raise ServeError(str(e)) from None
    if isinstance(config.port, bool) or not isinstance(config.port, int) \
            or not 0 <= config.port <= 65535:
        raise ServeError(f"port {config.port!r} is no TCP port: give 0 to 65535 (0 picks a "
                         "free one)")
    token = config.token or os.environ.get("MARIN_DASHBOARD_TOKEN") or None
    if token is None and not is_loopback(config.host):
        token = secrets.token_urlsafe(24)
    return dataclasses.replace(config, prefix=prefix, token=token)


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as e:
        sock.close()
        raise ServeError(f"cannot listen on {host}:{port} ({e.strerror or e}); choose another "
                         "--port, or stop what uses it") from None
    sock.listen(128)
    return sock


def address(config: DashboardConfig, port: int) -> str:
    host = f"[{config.host}]" if ":" in config.host else config.host
    url = f"http://{host}:{port}/"
    return f"{url}?token={config.token}" if config.token else url


def serve(config: DashboardConfig, announce=print) -> None:
    """Run the dashboard until interrupted. Raises ServeError when it cannot start."""
    import uvicorn

    from marin.dashboard.app import create_app

    config = prepare(config)
    sock = bind(config.host, config.port)
    port = sock.getsockname()[1]
    announce(f"marin dashboard for {config.prefix} at {address(config, port)}")
    if config.token and not is_loopback(config.host):
        announce("requests without the token are refused (it is in the address above)")
    server = uvicorn.Server(uvicorn.Config(create_app(config), log_level="warning",
                                           access_log=False))
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()

