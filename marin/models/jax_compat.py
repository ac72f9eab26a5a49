"""Compatibility between haliax 1.4.dev453 and newer jax releases.

    import marin.models            # installs the shim (see marin/models/__init__.py)
    from marin.models.jax_compat import ensure_jax_compat
    ensure_jax_compat()            # or by hand, before haliax traces anything

haliax 1.4.dev453's einsum calls ``jax.core.is_constant_dim``, which jax removed after
0.10 (jax 0.11 on the GPU machines). The shim restores it from ``jax._src.core`` when that
still has it, else with the same meaning: a dimension is constant when it is an integer.

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
