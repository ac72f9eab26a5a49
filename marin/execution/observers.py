"""Invocation observers: packages that watch every invocation of the executor, found
through entry points (the group keeps its name, ``marin.run_observers``).

    progress = observed(progress)      # in Executor.run, around the invocation's Progress

A package declares an observer in its ``pyproject.toml``:

    [project.entry-points."marin.run_observers"]
    step_states = "marin.services.kv_service.step_states:publishing"

``publishing(progress)`` returns ``progress`` itself or a ``Progress`` that wraps it; marin's
services publish live step states and step logs this way. The executor names no observer:
core reaches other packages only through entry points.

An observer that fails to load is logged once and left out; it never fails the invocation.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

from marin import registry

logger = logging.getLogger("marin.executor")

GROUP = "marin.run_observers"

registry.declare_group(GROUP, expected="a callable that takes the invocation's Progress and "
                       "returns a Progress", fits=callable)


@functools.lru_cache(maxsize=1)
def _observers() -> tuple[Callable[[Any], Any], ...]:
    found = []
    for name in registry.names(GROUP):
        try:
            found.append(registry.load(GROUP, name))
        except registry.PluginError as e:  # a broken observer costs its feature, not the invocation
            logger.warning("run observer left out: %s", e)
    return tuple(found)


def observed(progress: Any) -> Any:
    """``progress``, wrapped by every installed run observer."""
    for wrap in _observers():
        progress = wrap(progress)
    return progress
