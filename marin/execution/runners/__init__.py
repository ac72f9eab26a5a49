"""Runners place step jobs: ``local`` (threads) here; others arrive as plugins."""

from __future__ import annotations

from marin.execution.runners.base import Runner
from marin.execution.runners.local import LocalRunner

__all__ = ["LocalRunner", "Runner", "make_runner"]


def make_runner(backend: str, max_concurrent: int, **options: object) -> Runner:
    """The runner named ``backend``."""
    if backend == "local":
        return LocalRunner(max_concurrent=max_concurrent)
    raise ValueError(f"unknown executor backend {backend!r}; available backends: local")
