"""Accelerator presets (peak FLOP/s, memory, XLA flags), found through the
``marin.hardware`` plugin group, and detection of the devices present.

    from marin.hardware import get_preset, apply_preset
    preset = get_preset("gpu-h200")
    apply_preset(preset)          # before JAX starts
    preset.peak_bf16_flops        # 989.5e12, the MFU denominator
"""

from __future__ import annotations

from marin import registry
from marin.hardware.apply import (
    AppliedPreset,
    HardwareError,
    apply_preset,
    jax_backend_started,
    plan_preset,
)
from marin.hardware.preset import CPU, HardwarePreset

__all__ = [
    "CPU",
    "AppliedPreset",
    "HardwareError",
    "HardwarePreset",
    "apply_preset",
    "get_preset",
    "jax_backend_started",
    "plan_preset",
    "preset_for_device_kind",
    "preset_names",
]


registry.declare_group("marin.hardware", expected="a marin.hardware.HardwarePreset instance",
                       fits=lambda obj: isinstance(obj, HardwarePreset))


def get_preset(name: str) -> HardwarePreset:
    """The preset registered under ``name`` (``cpu``, ``gpu-h200``, ``tpu-v5e``, ...)."""
    return registry.load("hardware", name)


def preset_names() -> list[str]:
    return registry.names("hardware")


def preset_for_device_kind(platform: str, device_kind: str) -> HardwarePreset | None:
    """The installed preset whose chip matches a JAX device, if any."""
    for name in preset_names():
        try:
            preset = get_preset(name)
        except registry.PluginError:
            continue
        if preset.platform == platform and preset.matches(device_kind):
            return preset
    return None
