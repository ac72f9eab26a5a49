"""Applying a preset to this process, before JAX starts its backend.

    from marin.hardware import apply_preset, get_preset
    applied = apply_preset(get_preset("gpu-h200"))
    applied.dropped_flags   # flags the installed jaxlib does not know, reported not crashed
    import jax              # now JAX starts with the preset's flags
"""

from __future__ import annotations

import logging
import os
import shlex
import sys
from dataclasses import dataclass, field
from typing import Any

from marin.hardware.flags import FlagProbeError, validate_xla_flags
from marin.hardware.preset import HardwarePreset

logger = logging.getLogger("marin.hardware")


class HardwareError(RuntimeError):
    """A preset cannot be applied (for example JAX already started its backend)."""


@dataclass
class AppliedPreset:
    preset: HardwarePreset
    xla_flags: list[str] = field(default_factory=list)
    dropped_flags: list[str] = field(default_factory=list)
    libtpu_init_args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"preset": self.preset.name, "xla_flags": self.xla_flags,
                "dropped_flags": self.dropped_flags, "libtpu_init_args": self.libtpu_init_args,
                "env": self.env, "notes": self.notes}


def jax_backend_started() -> bool:
    if "jax" not in sys.modules:
        return False
    from jax._src import xla_bridge

    started = getattr(xla_bridge, "backends_are_initialized", None)
    if started is not None:
        return bool(started())
    return bool(getattr(xla_bridge, "_backends", {}))


def plan_preset(preset: HardwarePreset, environ: dict[str, str] | None = None) -> AppliedPreset:
    """What applying ``preset`` would set, with unknown XLA flags dropped; changes nothing."""
    environ = dict(os.environ if environ is None else environ)
    applied = AppliedPreset(preset)
    existing = shlex.split(environ.get("XLA_FLAGS", ""))
    wanted = [f for f in preset.xla_flags if f.split("=")[0] not in
              {e.split("=")[0] for e in existing}]
    try:
        known, unknown = validate_xla_flags(wanted)
    except FlagProbeError as e:
        known, unknown = (), ()
        applied.notes.append(f"XLA flags not validated: {e}")
    applied.xla_flags = [*existing, *known]
    applied.dropped_flags = list(unknown)
    if preset.libtpu_init_args:
        current = shlex.split(environ.get("LIBTPU_INIT_ARGS", ""))
        applied.libtpu_init_args = [*current, *[a for a in preset.libtpu_init_args
                                                if a not in current]]
        applied.notes.append("LIBTPU_INIT_ARGS are checked by libtpu when the TPU starts")
    applied.env = {k: v for k, v in preset.env.items() if k not in environ}
    return applied


def apply_preset(preset: HardwarePreset) -> AppliedPreset:
    """Set the preset's environment in this process; must run before JAX starts."""
    if jax_backend_started():
        raise HardwareError(
            f"cannot apply hardware preset {preset.name!r}: JAX has already initialised its "
            "backend, so XLA flags would be ignored. Apply the preset before the first JAX "
            "computation (for example at the top of the script, or with --hardware)."
        )
    applied = plan_preset(preset)
    for flag in applied.dropped_flags:
        logger.warning("hardware preset %s: dropped XLA flag %s: the installed jaxlib does "
                       "not know it", preset.name, flag)
    if applied.xla_flags:
        os.environ["XLA_FLAGS"] = " ".join(applied.xla_flags)
    if applied.libtpu_init_args:
        os.environ["LIBTPU_INIT_ARGS"] = " ".join(applied.libtpu_init_args)
    os.environ.update(applied.env)
    return applied
