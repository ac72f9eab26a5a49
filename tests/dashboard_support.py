"""Helpers for the dashboard tests: a real uvicorn server on loopback in a thread, headless
Chromium through Playwright, and independent readings of the executor's files."""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.servers import free_port


@contextmanager
def running_dashboard(prefix: str, **options: Any) -> Iterator[str]:
    """The dashboard for ``prefix`` served by uvicorn on a free loopback port."""
    import uvicorn

    from marin.dashboard import DashboardConfig, create_app

    port = free_port()
    config = DashboardConfig(prefix=prefix, port=port, **{"poll_seconds": 0.5, **options})
    server = uvicorn.Server(uvicorn.Config(create_app(config), host="127.0.0.1", port=port,
                                           log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, daemon=True, name="dashboard-server")
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the dashboard server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)


def chromium_path() -> str:
    """Debian's chromium (installed by .ci/run); a clear failure, never a skip, without it."""
    found = os.environ.get("MARIN_CHROMIUM") or shutil.which("chromium") \
        or shutil.which("chromium-browser")
    if not found:
        raise RuntimeError("the browser tests need Chromium: `apt-get install -y chromium` "
                           "(Debian), or set MARIN_CHROMIUM to a Chromium binary")
    return found


@contextmanager
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    args = ["--no-sandbox"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=chromium_path(), args=args)
        try:
            yield chromium
        finally:
            chromium.close()


def status_of(output: Path) -> str:
    """A step's state read straight from its status file (PENDING when there is none)."""
    path = output / ".executor_status"
    return json.loads(path.read_text())["status"] if path.exists() else "PENDING"


def invocation_records(prefix: Path) -> list[dict[str, Any]]:
    folder = prefix / ".marin" / "invocations"
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]
