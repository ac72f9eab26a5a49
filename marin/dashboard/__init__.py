"""A read-only web page over an executor prefix: experiments, step graphs, training curves,
studies, token caches and traces.

    marin dashboard --prefix gs://bucket/experiments [--port 8050] [--host 127.0.0.1]

    from marin.dashboard import DashboardConfig, create_app, serve
    serve(DashboardConfig(prefix="/data/runs"))          # blocks; Ctrl-C stops it
    app = create_app(DashboardConfig(prefix="/data/runs"))   # an ASGI app, for tests

See docs/dashboard.md.
"""

from marin.dashboard.config import DashboardConfig

__all__ = ["DashboardConfig", "create_app", "serve"]


def create_app(config: DashboardConfig):
    from marin.dashboard.app import create_app as _create_app

    return _create_app(config)


def serve(config: DashboardConfig) -> None:
    from marin.dashboard.server import serve as _serve

    _serve(config)
