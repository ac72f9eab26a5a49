"""NVIDIA GPU presets.

    marin hardware show --hardware gpu-h200

Flags follow JAX's GPU performance tips and the H100 recipes of NVIDIA's JAX-Toolbox and
MaxText: the latency-hiding scheduler, Triton GEMMs, pipelined and combined collectives,
double-buffered while loops. Each is validated against the installed jaxlib before use.
Peak dense bf16 FLOP/s are those Levanter uses for MFU.
"""

from __future__ import annotations

from marin.hardware import HardwarePreset

_COMBINE = 134217728  # 128 MiB: fewer, larger collectives

GPU_XLA_FLAGS = (
    "--xla_gpu_enable_latency_hiding_scheduler=true",
    "--xla_gpu_triton_gemm_any=True",
    "--xla_gpu_enable_while_loop_double_buffering=true",
    "--xla_gpu_enable_pipelined_all_gather=true",
    "--xla_gpu_enable_pipelined_reduce_scatter=true",
    "--xla_gpu_enable_pipelined_all_reduce=true",
    f"--xla_gpu_all_gather_combine_threshold_bytes={_COMBINE}",
    f"--xla_gpu_reduce_scatter_combine_threshold_bytes={_COMBINE}",
    f"--xla_gpu_all_reduce_combine_threshold_bytes={_COMBINE}",
)

GPU_ENV = {"XLA_PYTHON_CLIENT_MEM_FRACTION": "0.9", "CUDA_DEVICE_MAX_CONNECTIONS": "1"}

_SOURCE = ("peak: NVIDIA datasheets as used by Levanter's MFU; flags: JAX GPU performance "
           "tips, NVIDIA JAX-Toolbox, MaxText GPU scripts")

A100 = HardwarePreset(
    name="gpu-a100", platform="gpu", chip="A100 80GB", peak_bf16_flops=312e12,
    memory_bytes=80e9, xla_flags=GPU_XLA_FLAGS, env=GPU_ENV, device_kinds=("A100",),
    batch_size_advice="per-GPU micro-batches of 8-16 sequences of 2048 tokens for 1B "
    "models; raise until memory is ~85% used, then accumulate gradients",
    source=_SOURCE,
)

H100 = HardwarePreset(
    name="gpu-h100", platform="gpu", chip="H100 80GB SXM", peak_bf16_flops=989.5e12,
    memory_bytes=80e9, xla_flags=GPU_XLA_FLAGS, env=GPU_ENV, device_kinds=("H100",),
    batch_size_advice="per-GPU micro-batches of 16-32 sequences of 2048 tokens for 1B "
    "models; matmul dimensions multiple of 128 keep tensor cores full",
    source=_SOURCE,
)

H200 = HardwarePreset(
    name="gpu-h200", platform="gpu", chip="H200 141GB", peak_bf16_flops=989.5e12,
    memory_bytes=141e9, xla_flags=GPU_XLA_FLAGS, env=GPU_ENV, device_kinds=("H200",),
    batch_size_advice="the same compute as an H100 with 1.76x the memory: per-GPU "
    "micro-batches of 32-64 sequences of 2048 tokens for 1B models",
    source=_SOURCE,
)
