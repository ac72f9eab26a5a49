"""JAX's persistent compilation cache for training runs.

    use_compilation_cache(config.compilation_cache)   # a folder, or None: off
    counter = CacheEvents(); ... ; counter.hits, counter.misses

A run whose programs did not change shape (another learning rate, another schedule
length: those enter the update as traced inputs, see ``marin.training.state``) loads its
compiled programs from the cache instead of compiling them again, in this process or any
later one. Every program is cached, however small or quick to compile: the minimum compile
time and entry size are set to nothing.

Design note: the cache folder is a JAX setting of the whole process. It is set on each
call, so each run uses the folder its config names; switching folder resets JAX's handle
on the cache (``reset_cache``), which only affects later compilations. Runs in one process
share one setting at a time: two concurrent trainings in one process (none in marin) would
share the later one's folder.
"""

from __future__ import annotations

import threading
from typing import Any

import jax

__all__ = ["CacheEvents", "use_compilation_cache"]

_lock = threading.Lock()
_UNSET = object()
_current: list[object] = [_UNSET]  # the folder this module last set (None: off)


def use_compilation_cache(folder: str | None) -> None:
    """Cache compiled programs in ``folder`` from now on (None: stop caching)."""
    from jax.experimental.compilation_cache import compilation_cache

    with _lock:
        if folder == _current[0] and (folder is None or
                                      jax.config.jax_compilation_cache_dir == folder):
            return  # as this module left it (nothing else changed the folder since)
        if folder is None:
            jax.config.update("jax_enable_compilation_cache", False)
        else:
            jax.config.update("jax_enable_compilation_cache", True)
            jax.config.update("jax_compilation_cache_dir", folder)
            jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
            jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
        compilation_cache.reset_cache()  # the next compilation opens the folder now set
        _current[0] = folder


class CacheEvents:
    """Counts JAX's persistent-cache events while open: programs loaded from the cache
    (``hits``) and programs compiled because the cache lacked them (``misses``).

        with CacheEvents() as events:
            train_lm(config)
        events.misses          # 0 when every program came from the cache
    """

    HIT = "/jax/compilation_cache/cache_hits"
    REQUEST = "/jax/compilation_cache/compile_requests_use_cache"

    def __init__(self) -> None:
        self.hits = self.requests = 0

    @property
    def misses(self) -> int:
        return self.requests - self.hits

    def _listen(self, event: str, **_: Any) -> None:
        if event == self.HIT:
            self.hits += 1
        elif event == self.REQUEST:
            self.requests += 1

    def __enter__(self) -> CacheEvents:
        jax.monitoring.register_event_listener(self._listen)
        return self

    def __exit__(self, *exc: object) -> None:
        jax.monitoring.unregister_event_listener(self._listen)
