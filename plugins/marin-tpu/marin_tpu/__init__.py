"""Google TPU presets.

    marin hardware show --hardware tpu-v6e

Peak dense bf16 FLOP/s per chip are those Levanter uses for MFU. On v6e, Levanter's docs raise
the scoped VMEM limit through ``LIBTPU_INIT_ARGS``; libtpu checks those flags itself when
the TPU starts (they cannot be probed without a TPU).
"""

from __future__ import annotations

from marin.hardware import HardwarePreset

_SOURCE = "peak: Google Cloud TPU documentation as used by Levanter's MFU"
_ADVICE = ("global batch a multiple of the chip count; per-chip batches of 8-16 sequences of "
           "2048 tokens for 1B models, FSDP across the slice")

V4 = HardwarePreset(name="tpu-v4", platform="tpu", chip="TPU v4", peak_bf16_flops=275e12,
                    memory_bytes=32 * 2**30, device_kinds=("TPU v4",),
                    batch_size_advice=_ADVICE, source=_SOURCE)
V5E = HardwarePreset(name="tpu-v5e", platform="tpu", chip="TPU v5e", peak_bf16_flops=197e12,
                     memory_bytes=16 * 2**30, device_kinds=("TPU v5 lite", "TPU v5e"),
                     batch_size_advice="16 GiB per chip: per-chip batches of 4-8 sequences "
                     "of 2048 tokens for 1B models, FSDP across the slice", source=_SOURCE)
V5P = HardwarePreset(name="tpu-v5p", platform="tpu", chip="TPU v5p", peak_bf16_flops=459e12,
                     memory_bytes=95 * 2**30, device_kinds=("TPU v5p", "TPU v5"),
                     batch_size_advice=_ADVICE, source=_SOURCE)
V6E = HardwarePreset(name="tpu-v6e", platform="tpu", chip="TPU v6e", peak_bf16_flops=918e12,
                     memory_bytes=32 * 2**30, device_kinds=("TPU v6 lite", "TPU v6e"),
                     libtpu_init_args=("--xla_tpu_scoped_vmem_limit_kib=98304",),
                     batch_size_advice=_ADVICE, source=_SOURCE)
