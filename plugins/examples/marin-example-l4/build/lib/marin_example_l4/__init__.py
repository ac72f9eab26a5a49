"""An example third-party plugin: a hardware preset for the NVIDIA L4.

    pip install ./plugins/examples/marin-example-l4
    marin hardware show --hardware gpu-l4

Everything a plugin needs is the entry point in ``pyproject.toml`` and an object that fits
its group: here a ``HardwarePreset``.
"""

from marin.hardware import HardwarePreset

L4 = HardwarePreset(
    name="gpu-l4", platform="gpu", chip="L4 24GB", peak_bf16_flops=121e12, memory_bytes=24e9,
    xla_flags=("--xla_gpu_enable_latency_hiding_scheduler=true",),
    env={"XLA_PYTHON_CLIENT_MEM_FRACTION": "0.9"}, device_kinds=("L4",),
    batch_size_advice="24 GB: models up to ~300M parameters with micro-batches of 8 "
    "sequences of 2048 tokens",
    source="NVIDIA L4 datasheet (121 TFLOP/s dense bf16)",
)
