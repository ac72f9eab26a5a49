"""Run observers: packages that watch every run, found through entry points.

    progress = observed(progress)      # in Executor.run, around the run's Progress

A package declares an observer in its ``pyproject.toml``:

    [project.entry-points."marin.run_observers"]
    step_states = "marin.services.step_states:publishing"

``publishing(progress)`` returns ``progress`` itself or a ``Progress`` that wraps it; marin's
services publish live step states and step logs this way. The executor names no observer:
core reaches other packages only through entry points.

An observer that fails to load is logged once and left out; it never fails the run.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

logger = logging.getLogger("marin.executor")

GROUP = "marin.run_observers"


@functools.lru_cache(maxsize=1)
def _observers() -> tuple[Callable[[Any], Any], ...]:
    from importlib.metadata import entry_points

    found = []
    for ep in sorted(entry_points(group=GROUP), key=lambda e: e.name):
        try:
            found.append(ep.load())
        except Exception as e:  # a broken observer costs its own feature, not the run
            logger.warning("run observer %s (%s) cannot be loaded: %s", ep.name, ep.value, e)
    return tuple(found)


def observed(progress: Any) -> Any:
    """``progress``, wrapped by every installed run observer."""
    for wrap in _observers():
        progress = wrap(progress)
    return progress
