"""Runners place step jobs: ``local`` (threads) ships with marin; others (``ray``) are
plugins in the ``marin.runners`` entry-point group."""

from __future__ import annotations

from marin.execution.runners.base import Runner
from marin.execution.runners.local import LocalRunner

__all__ = ["LocalRunner", "Runner", "make_runner"]


def make_runner(backend: str, max_concurrent: int, **options: object) -> Runner:
    """The runner named ``backend``, built with ``options`` (for example a Ray address)."""
    from marin import registry

    try:
        cls = registry.load("runners", backend)
    except registry.PluginNotFoundError:
        if backend != "local":
            raise ValueError(f"unknown executor backend {backend!r}; installed backends: "
                             f"{', '.join(registry.names('runners')) or 'local'}") from None
        cls = LocalRunner
    except registry.PluginError as e:
        raise ValueError(f"executor backend {backend!r} is unusable: {e}") from e
    given = {k: v for k, v in options.items() if v is not None}
    return cls(max_concurrent=max_concurrent, **given)
