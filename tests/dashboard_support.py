"""Helpers for the dashboard tests: a real uvicorn server on loopback in a thread, headless
Chromium through Playwright, GET without following redirects, steps that write given files,
and independent readings of the executor's files."""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from marin.execution import Executor, ExecutorStep, this_output_path
from tests.servers import free_port


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, str, dict[str, str]]:
    """Status, body and headers of a GET (redirects are returned, not followed)."""

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    opener = urllib.request.build_opener(NoRedirect)
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with opener.open(request, timeout=60) as response:
            return response.status, response.read().decode(), dict(response.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(), dict(e.headers)


@dataclass(frozen=True)
class FilesConfig:
    """Files to write into the step's output: (relative path, text) pairs."""

    files: tuple[tuple[str, str], ...]
    output_path: str = this_output_path()


def write_files(config: FilesConfig) -> None:
    for rel, text in config.files:
        path = Path(config.output_path) / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def run_file_steps(prefix: Path, steps: dict[str, dict[str, str]]) -> dict[str, str]:
    """Run one step per name, each writing its files, under ``prefix``; their keys."""
    planned = [ExecutorStep(name, write_files, FilesConfig(tuple(files.items())))
               for name, files in steps.items()]
    result = Executor(str(prefix), max_concurrent=1).run(planned)
    assert result.ok
    return {s.name: s.key for s in result.steps}


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
