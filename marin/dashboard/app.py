"""The dashboard's web application (Starlette), read-only over one prefix.

    app = create_app(DashboardConfig(prefix="gs://bucket/experiments"))
    uvicorn.run(app, host="127.0.0.1", port=8050)      # or marin.dashboard.serve(config)

Pages render on the server (Jinja2); a little JavaScript polls the JSON routes under
``/api`` for live states and metrics and draws charts with the plotly.js bundled in the
plotly package. Every storage read runs in a worker thread under ``read_timeout``, so an
unreachable bucket gives a page that says so instead of a hung request; any error becomes a
page with one line of explanation, never a traceback.

Design note: files of step outputs are data, not pages of this site. ``/file`` serves them
with ``nosniff`` under a content-security policy whose ``sandbox`` gives them an opaque
origin and which runs no script, except plot pages (``.html``), whose scripts run in that
sandbox (no cookie, no access to the dashboard's pages). An SVG is served as a download:
shown, it could script the dashboard's origin, so pages show it only through ``<img>``,
which never runs its scripts.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlencode

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import (
    FileResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from marin.dashboard import pages
from marin.dashboard.config import DashboardConfig
from marin.dashboard.formatting import fmt_num, fmt_seconds, fmt_time
from marin.dashboard.names import (
    path_tail,
    query_param,
    query_params,
    shown,
    shown_json,
    url_part,
)
from marin.dashboard.reader import DashboardError, PrefixReader
from marin.dashboard.records import ViewState
from marin.dashboard.storage import storage_page
from marin.execution.errors import one_line

logger = logging.getLogger("marin.dashboard")

HERE = Path(__file__).resolve().parent
TOKEN_COOKIE = "marin_dashboard_token"
T = TypeVar("T")
#: The policy of every file served from a step output: an opaque origin, no script.
FILE_POLICY = ("sandbox; default-src 'none'; img-src 'self' data:; style-src 'unsafe-inline'; "
               "form-action 'none'; base-uri 'none'")
#: Plot pages run their scripts, inside the sandbox, with plotly.js from this site only.
PLOT_POLICY = ("sandbox allow-scripts; default-src 'none'; script-src 'self' 'unsafe-inline' "
               "'unsafe-eval'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; "
               "font-src 'self' data:; connect-src 'none'; form-action 'none'; "
               "base-uri 'none'")
_DOWNLOADS = ("application/octet-stream", "image/svg+xml")


def plotly_js_path() -> Path:
    import plotly

    return Path(plotly.__file__).resolve().parent / "package_data" / "plotly.min.js"


def create_app(config: DashboardConfig, reader: PrefixReader | None = None) -> Starlette:
    """The ASGI application for ``config``; ``reader`` replaces the default (tests, bench)."""
    dash = _Dashboard(config, reader or PrefixReader(config.prefix))
    routes = [
        Route("/", dash.experiments),
        Route("/experiments/{inv}", dash.experiment),
        Route("/api/experiments/{inv}/states", dash.api_states),
        Route("/steps/{key:path}", dash.step),
        Route("/file", dash.file),
        Route("/runs", dash.runs),
        Route("/api/metrics", dash.api_metrics),
        Route("/studies", dash.studies),
        Route("/study", dash.study),
        Route("/caches", dash.caches),
        Route("/traces", dash.traces),
        Route("/storage", dash.storage),
        Route("/healthz", lambda request: PlainTextResponse("ok")),
        Route("/static/plotly.min.js", lambda request: FileResponse(plotly_js_path())),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    # DashboardError has a handler of its own: the catch-all one also logs a traceback.
    app = Starlette(routes=routes, exception_handlers={Exception: dash.error_page,
                                                       DashboardError: dash.error_page,
                                                       HTTPException: dash.http_error})
    app.add_middleware(_TokenMiddleware, token=config.token)
    return app


class _Dashboard:
    def __init__(self, config: DashboardConfig, reader: PrefixReader):
        self.config = config
        self.reader = reader
        self.templates = Jinja2Templates(directory=str(HERE / "templates"))
        self.templates.env.globals.update(prefix=reader.prefix, fmt_time=fmt_time,
                                          fmt_seconds=fmt_seconds,
                                          fmt_num=fmt_num, poll=config.poll_seconds,
                                          profiling=pages.profiling_available(),
                                          ViewState=ViewState)
        self.templates.env.filters.update(step_href=step_href, inv_href=inv_href,
                                          urlencode=lambda value: url_part(value, safe="/"))
        self.templates.env.finalize = shown  # a name that is not UTF-8 is printed escaped

    async def _io(self, fn: Callable[..., T], *args: Any) -> T:
        try:
            return await asyncio.wait_for(_in_daemon_thread(fn, *args),
                                          self.config.read_timeout)
        except TimeoutError:
            raise DashboardError(
                f"no answer from {self.reader.prefix} within {self.config.read_timeout:g} s: "
                "check that the bucket's URL is right, that this machine reaches it, and its "
                "credentials (for emulators: STORAGE_EMULATOR_HOST / AWS_ENDPOINT_URL_S3)",
                status=504) from None

    def _page(self, request: Request, template: str, http_status: int = 200,
              **context: Any) -> Response:
        return self.templates.TemplateResponse(request, template, context,
                                               status_code=http_status)

    # -- pages ---------------------------------------------------------------------------

    async def experiments(self, request: Request) -> Response:
        data = await self._io(pages.experiments_page, self.reader)
        return self._page(request, "experiments.html", **data)

    async def experiment(self, request: Request) -> Response:
        inv = path_tail(request, "/experiments/")
        data = await self._io(pages.experiment_page, self.reader, inv,
                              query_param(request, "state"),
                              query_param(request, "all") == "1")
        return self._page(request, "experiment.html", **data)

    async def api_states(self, request: Request) -> Response:
        inv = request.path_params["inv"]
        data = await self._io(pages.live_states, self.reader, inv)
        return JSONResponse(shown_json(data))

    async def step(self, request: Request) -> Response:
        data = await self._io(pages.step_page, self.reader, path_tail(request, "/steps/"))
        return self._page(request, "step.html", **data)

    async def file(self, request: Request) -> Response:
        key = query_param(request, "step", "")
        sub = query_param(request, "path", "")
        content, media = await self._io(pages.step_file, self.reader, key, sub)
        headers = {"X-Content-Type-Options": "nosniff",
                   "Content-Security-Policy": PLOT_POLICY if media == "text/html"
                   else FILE_POLICY}
        if media in _DOWNLOADS:
            headers["Content-Disposition"] = attachment(sub.rpartition("/")[2])
        return Response(content, media_type=media, headers=headers)

    async def runs(self, request: Request) -> Response:
        data = await self._io(pages.runs_page, self.reader, query_param(request, "exp"),
                              query_params(request, "run"))
        return self._page(request, "runs.html", **data)

    async def api_metrics(self, request: Request) -> Response:
        data = await self._io(pages.metrics_json, self.reader,
                              query_params(request, "run"))
        return JSONResponse(shown_json(data))

    async def studies(self, request: Request) -> Response:
        data = await self._io(pages.studies_page, self.reader, query_param(request, "exp"))
        return self._page(request, "studies.html", **data)

    async def study(self, request: Request) -> Response:
        data = await self._io(pages.study_page, self.reader,
                              query_param(request, "step", ""))
        return self._page(request, "study.html", **data)

    async def caches(self, request: Request) -> Response:
        data = await self._io(pages.caches_page, self.reader, query_param(request, "exp"))
        return self._page(request, "caches.html", **data)

    async def traces(self, request: Request) -> Response:
        data = await self._io(pages.traces_page, self.reader, query_param(request, "exp"))
        return self._page(request, "traces.html", **data)

    async def storage(self, request: Request) -> Response:
        data = await self._io(storage_page, self.reader, query_param(request, "exp"))
        return self._page(request, "storage.html", **data)

    # -- errors --------------------------------------------------------------------------

    async def http_error(self, request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        message = "no such page" if exc.status_code == 404 else str(exc.detail)
        return self._error(request, message, exc.status_code)

    async def error_page(self, request: Request, exc: Exception) -> Response:
        if isinstance(exc, DashboardError):
            return self._error(request, str(exc), exc.status)
        if isinstance(exc, OSError):
            logger.warning("reading %s failed: %s", self.reader.prefix, exc)
            return self._error(request, f"cannot read {self.reader.prefix}: "
                               f"{one_line(exc, with_type=True)}. Check the URL, the network "
                               "and the credentials", 503)
        logger.exception("dashboard page %s failed", request.url.path)
        return self._error(request, f"this page failed: {one_line(exc, with_type=True)} "
                           "(the server's log has the details)", 500)

    def _error(self, request: Request, message: str, status: int) -> Response:
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": message}, status_code=status)
        try:
            return self._page(request, "error.html", http_status=status, message=message)
        except Exception:  # the template itself failed: plain text still explains
            return PlainTextResponse(f"error: {message}", status_code=status)


async def _in_daemon_thread(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` in a daemon thread. A read that hangs on an unreachable bucket outlives
    its request (the page has already said so) but never holds up the server's exit."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(result: Any, error: BaseException | None) -> None:
        if not future.done():
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(result)

    def work() -> None:
        try:
            result, error = fn(*args), None
        except BaseException as e:  # handed to the request, which turns it into a page
            result, error = None, e
        try:
            loop.call_soon_threadsafe(settle, result, error)
        except RuntimeError:  # the server stopped meanwhile: nobody waits for the answer
            pass

    threading.Thread(target=work, daemon=True, name="marin-dashboard-read").start()
    return await future


def step_href(key: str) -> str:
    """The address of a step's page (each part of its key percent-encoded)."""
    return "/steps/" + url_part(key, safe="/")


def inv_href(invocation_id: str) -> str:
    return "/experiments/" + url_part(invocation_id)


def attachment(name: str) -> str:
    """A Content-Disposition that downloads ``name``, whatever its characters."""
    plain = "".join(c if c.isascii() and c.isprintable() and c not in '"\\;' else "_"
                    for c in name) or "file"
    return f"attachment; filename=\"{plain}\"; filename*=UTF-8''{url_part(name)}"


def same_site(path: str) -> str:
    """``path`` as a path of this site: ``//host/x`` and ``/\\host/x`` would leave it."""
    return "/" + path.lstrip("/\\")


def _matches(given: str, token: str) -> bool:
    """A constant-time comparison of any two strings (``compare_digest`` refuses non-ASCII
    text, which a request may carry)."""
    return secrets.compare_digest(given.encode("utf-8", "surrogateescape"),
                                  token.encode("utf-8", "surrogateescape"))


class _TokenMiddleware:
    """Requires the token (``?token=``, a cookie set from it, or ``Authorization: Bearer``)
    on every request but static assets, when a token is configured."""

    def __init__(self, app: Any, token: str | None):
        self.app = app
        self.token = token

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not self.token or scope["path"].startswith("/static/"):
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        given = request.query_params.get("token")
        if given is not None and _matches(given, self.token):
            # Trade the URL's token for a cookie and drop it from the address bar.
            query = urlencode([(k, v) for k, v in request.query_params.multi_items()
                               if k != "token"])
            target = same_site(scope["path"]) + (f"?{query}" if query else "")
            response: Response = RedirectResponse(target, status_code=303)
            response.set_cookie(TOKEN_COOKIE, self.token, httponly=True, samesite="strict")
            await response(scope, receive, send)
            return
        header = request.headers.get("authorization", "")
        candidates = [request.cookies.get(TOKEN_COOKIE, ""),
                      header[7:] if header.lower().startswith("bearer ") else ""]
        if any(c and _matches(c, self.token) for c in candidates):
            await self.app(scope, receive, send)
            return
        response = PlainTextResponse(
            "this dashboard needs its token: open the URL that `marin dashboard` printed "
            "(it ends in ?token=...), or send 'Authorization: Bearer <token>'",
            status_code=401)
        await response(scope, receive, send)
