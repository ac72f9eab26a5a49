"""What accelerators this process sees, and which preset applies to them.

    report = detect()     # starts JAX's backend: apply a preset first if you want one
    report["devices"], report["preset"]
"""

from __future__ import annotations

from typing import Any

from marin.hardware import CPU, preset_for_device_kind


def detect() -> dict[str, Any]:
    try:
        import jax
    except ImportError:
        return {"jax": None, "devices": [], "preset": CPU.name,
                "note": "jax is not installed; only the cpu preset applies"}
    devices = jax.devices()
    first = devices[0]
    preset = preset_for_device_kind(first.platform, first.device_kind)
    if preset is None and first.platform == "cpu":
        preset = CPU
    return {
        "jax": jax.__version__,
        "backend": first.platform,
        "devices": [{"id": d.id, "platform": d.platform, "kind": d.device_kind}
                    for d in devices],
        "preset": preset.name if preset else None,
        "note": None if preset else f"no installed preset matches {first.device_kind!r}",
    }
