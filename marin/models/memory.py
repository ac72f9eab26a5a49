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
fp32 for one block; fp32 logits for the loss. When the local batch does not fit,
gradient accumulation halves the micro-batch until it does.
"""

from __future__ import annotations

from dataclasses import dataclass

from marin.models.config import TransformerConfig

STATE_BYTES_PER_PARAM = 16  # fp32 params + grads + two Adam moments
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
    state = config.num_params() * STATE_BYTES_PER_PARAM / devices
    per_sequence = activation_bytes_per_sequence(config)
    micro = max(1, batch_size // devices)
    while True:
        estimate = MemoryEstimate(state, micro * per_sequence, micro)
        if memory_limit is None or estimate.per_device_bytes <= memory_limit or micro == 1:
            return estimate
        micro //= 2
