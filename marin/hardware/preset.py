"""Hardware presets: what an accelerator can do and how to configure XLA for it.

    preset = HardwarePreset(name="gpu-h200", platform="gpu", chip="H200",
                            peak_bf16_flops=989.5e12, memory_bytes=141e9,
                            xla_flags=("--xla_gpu_enable_latency_hiding_scheduler=true",),
                            env={"XLA_PYTHON_CLIENT_MEM_FRACTION": "0.9"},
                            device_kinds=("H200",))
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class HardwarePreset:
    """An accelerator type and the settings marin applies for it.

    Attributes:
        name: the name used on the command line (``--hardware gpu-h200``).
        platform: ``cpu``, ``gpu`` or ``tpu`` (JAX's platform name).
        chip: a human name for one chip ("H200", "TPU v5e").
        peak_bf16_flops: peak dense bf16 FLOP/s of one chip, the MFU denominator.
        memory_bytes: accelerator memory of one chip.
        xla_flags: flags appended to ``XLA_FLAGS`` (validated against the installed jaxlib).
        libtpu_init_args: flags appended to ``LIBTPU_INIT_ARGS`` (TPU only).
        env: other environment variables, set unless the user already set them.
        batch_size_advice: how to choose batch sizes on this chip.
        device_kinds: substrings of ``jax.devices()[0].device_kind`` that identify the chip.
        source: where the figures come from.
    """

    name: str
    platform: str
    chip: str
    peak_bf16_flops: float
    memory_bytes: float
    xla_flags: tuple[str, ...] = ()
    libtpu_init_args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    batch_size_advice: str = ""
    device_kinds: tuple[str, ...] = ()
    source: str = ""

    def __post_init__(self) -> None:
        if self.platform not in ("cpu", "gpu", "tpu"):
            raise ValueError(f"preset {self.name!r}: platform must be cpu, gpu or tpu, "
                             f"got {self.platform!r}")
        for flag in (*self.xla_flags, *self.libtpu_init_args):
            if not flag.startswith("--"):
                raise ValueError(f"preset {self.name!r}: flag {flag!r} must start with '--'")

    def matches(self, device_kind: str) -> bool:
        kind = device_kind.lower()
        return any(k.lower() in kind for k in self.device_kinds)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name, "platform": self.platform, "chip": self.chip,
            "peak_bf16_flops": self.peak_bf16_flops, "memory_bytes": self.memory_bytes,
            "xla_flags": list(self.xla_flags), "libtpu_init_args": list(self.libtpu_init_args),
            "env": dict(self.env), "batch_size_advice": self.batch_size_advice,
            "source": self.source,
        }


CPU = HardwarePreset(
    name="cpu", platform="cpu", chip="host CPU", peak_bf16_flops=1e12, memory_bytes=16e9,
    batch_size_advice="small batches (8-32 sequences); the CPU is for tests and tiny models",
    device_kinds=("cpu",),
    source="nominal figures; MFU on a CPU is not meaningful",
)
