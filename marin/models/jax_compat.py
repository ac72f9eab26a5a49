"""Compatibility between haliax 1.4.dev453 and the JAX releases marin is tested with.

    import marin.models            # installs the shims (see marin/models/__init__.py)
    from marin.models.jax_compat import SHIMS, ensure_jax_compat
    ensure_jax_compat()            # or by hand, before haliax traces anything
    SHIMS["0.12"]                  # what jax 0.12 needs: ("jax.core.is_constant_dim",)

The shims each tested release needs (``SHIMS``; tests/test_jax_compat.py checks the running
release against it):

| jax | Python | shims | notes |
| --- | --- | --- | --- |
| 0.10.2 | 3.11 | none | ``jax.core.is_constant_dim`` still there (its lookup warns) |
| 0.11.2 | 3.12 | ``jax.core.is_constant_dim`` | the GPU image's release |
| 0.12.0.1 | 3.12 | ``jax.core.is_constant_dim`` | the newest release |

haliax 1.4.dev453's einsum calls ``jax.core.is_constant_dim``, which jax 0.11 removed from
its public ``jax.core``. The shim restores it from ``jax._src.core`` when that still has it
(0.11 and 0.12 do), else with the same meaning: a dimension is constant when it is an
integer. Nothing else marin or haliax uses changed up to 0.12.0.1. Two warnings that are
not marin's are ignored in pytest's settings (pyproject.toml): haliax's import of
``jax.experimental.shard_map`` (deprecated since jax 0.8), and, on Python 3.12, the
profiler's ``event_stats`` type that has no ``__module__``.

Design note: ``import marin.models`` must not import JAX (sweeps and study plans use the
model config without it), so ``install()`` patches at once when JAX is already imported and
otherwise right after JAX's own import finishes, through a one-shot import hook.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import operator
import sys
from typing import Any

__all__ = ["SHIMS", "ensure_jax_compat", "install"]

# What each tested jax release (major.minor) lacks that haliax uses: the names the shims add.
SHIMS: dict[str, tuple[str, ...]] = {
    "0.10": (),
    "0.11": ("jax.core.is_constant_dim",),
    "0.12": ("jax.core.is_constant_dim",),
}

checked = False  # whether ensure_jax_compat has run in this process


def _is_constant_dim(d: object) -> bool:
    try:
        operator.index(d)
    except TypeError:
        return False
    return True


def ensure_jax_compat() -> bool:
    """Install what haliax needs; returns True when something had to be added."""
    global checked
    import jax

    checked = True
    core = jax.core
    if hasattr(core, "is_constant_dim"):
        return False
    from jax._src import core as src_core

    core.is_constant_dim = getattr(src_core, "is_constant_dim", _is_constant_dim)
    return True


class _AfterJaxImport(importlib.abc.MetaPathFinder):
    """Finds ``jax`` with the other finders and runs ``ensure_jax_compat`` once its module
    has executed; removes itself on first use."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "jax":
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        execute = loader.exec_module

        def exec_module(module: Any) -> None:
            execute(module)
            ensure_jax_compat()

        loader.exec_module = exec_module
        return spec


def install() -> None:
    """Apply the shim now if JAX is imported, else as soon as it is."""
    if "jax" in sys.modules:
        ensure_jax_compat()
    elif not any(isinstance(f, _AfterJaxImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterJaxImport())
