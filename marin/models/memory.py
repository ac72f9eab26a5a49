"""Estimated accelerator memory of a training run, per device.

    estimate = estimate_training_memory(config, batch_size=256, devices=8,
                                        memory_limit=80e9)
    estimate.per_device_bytes, estimate.microbatch_size

The model assumed is the trainer's: fp32 parameters, fp32 gradients and two fp32 Adam
moments (16 bytes per parameter), sharded over the devices (FSDP). The trainer donates its
whole state to each update (``marin.training.state``), so new parameters and moments reuse
the old ones' buffers and no second copy is counted; bf16 activations with
each transformer block rematerialised, so the forward keeps one residual-stream tensor per
layer and the backward holds one block's full activations at a time; attention scores in
fp32 for one block; fp32 logits for the loss. When the local batch does not fit, the
estimate plans gradient accumulation: the largest micro-batch that divides the per-device
batch and fits (the trainer runs the per-device batch as equal micro-steps, see
``TrainLmConfig.microbatch_size``), plus the fp32 gradient sum accumulation keeps (4 bytes
per parameter, sharded). ``microbatch_size`` is what a candidate's run then uses.
"""

from __future__ import annotations

from dataclasses import dataclass

from marin.models.config import TransformerConfig

STATE_BYTES_PER_PARAM = 16  # fp32 params + grads + two Adam moments
ACCUMULATOR_BYTES_PER_PARAM = 4  # fp32 gradient sum over micro-steps
ACTIVATION_BYTES = 2  # bf16


@dataclass(frozen=True)
class MemoryEstimate:
    state_bytes: float
    activation_bytes: float
    microbatch_size: int

    @property
    def per_device_bytes(self) -> float:
        return self.state_bytes + self.activation_bytes


def activation_bytes_per_sequence(config: TransformerConfig) -> float:
    s, h, layers = config.seq_len, config.hidden_dim, config.num_layers
    saved_inputs = layers * s * h * ACTIVATION_BYTES
    mlp_width = config.intermediate_dim * (3 if config.glu else 2)
    one_block = s * (8 * h + mlp_width) * ACTIVATION_BYTES
    scores = config.num_heads * s * s * 4
    logits = s * config.vocab_size * (ACTIVATION_BYTES + 4)
    return saved_inputs + one_block + scores + logits


def estimate_training_memory(config: TransformerConfig, batch_size: int, devices: int,
                             memory_limit: float | None = None) -> MemoryEstimate:
    """Bytes per device of the whole per-device batch in one pass or, when that exceeds
    ``memory_limit``, of the largest micro-batch dividing it that fits (1 if none does)."""
    params = config.num_params()
    per_sequence = activation_bytes_per_sequence(config)
    per_device = max(1, batch_size // devices)
    estimate = None
    for micro in (d for d in range(per_device, 0, -1) if per_device % d == 0):
        per_param = STATE_BYTES_PER_PARAM + (ACCUMULATOR_BYTES_PER_PARAM
                                             if micro < per_device else 0)
        estimate = MemoryEstimate(params * per_param / devices, micro * per_sequence, micro)
        if memory_limit is None or estimate.per_device_bytes <= memory_limit:
            return estimate
    return estimate
