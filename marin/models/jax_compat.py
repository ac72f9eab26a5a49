"""Compatibility between haliax 1.4.dev453 and newer jax releases.

    from marin.models.jax_compat import ensure_jax_compat
    ensure_jax_compat()   # before haliax traces anything

haliax 1.4.dev453's einsum calls ``jax.core.is_constant_dim``, which jax removed after
0.10 (jax 0.11 on the GPU machines). The shim restores it from ``jax._src.core`` when that
still has it, else with the same meaning: a dimension is constant when it is an integer.
"""

from __future__ import annotations

import operator

import jax


def _is_constant_dim(d: object) -> bool:
    try:
        operator.index(d)
    except TypeError:
        return False
    return True


def ensure_jax_compat() -> bool:
    """Install what haliax needs; returns True when something had to be added."""
    core = jax.core
    if hasattr(core, "is_constant_dim"):
        return False
    from jax._src import core as src_core

    core.is_constant_dim = getattr(src_core, "is_constant_dim", _is_constant_dim)
    return True
