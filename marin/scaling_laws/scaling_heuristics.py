"""Scaling heuristics: which models, batch sizes and hyperparameters use a FLOP budget.

    heuristic = CompletedAdamhHeuristic(vocab_size=50257)
    for cfg in heuristic.candidates_for_budget(3e19):
        cfg.model_config, cfg.batch_size, cfg.train_steps, cfg.optimizer.learning_rate

A heuristic is a plugin (entry-point group ``marin.scaling_heuristics``): any class with a
``candidates_for_budget(budget)`` method that yields ``CandidateConfig`` objects.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Protocol, runtime_checkable

from marin import registry
from marin.models.config import TransformerConfig
from marin.models.memory import estimate_training_memory
from marin.scaling_laws.candidates import CandidateConfig, NoCandidateError
from marin.training.hyperparameters import OptimizerHyperparameters


@runtime_checkable
class ScalingHeuristic(Protocol):
    def candidates_for_budget(self, budget: float) -> Iterator[CandidateConfig]: ...


registry.declare_group("marin.scaling_heuristics",
                       expected="a class with a candidates_for_budget(budget) method",
                       fits=registry.has_methods("candidates_for_budget", classes_only=True))


def round_up_to_power_of_two(x: float) -> int:
    return 1 if x <= 1 else 2 ** math.ceil(math.log2(x))


@dataclass(frozen=True)
class CompletedAdamhHeuristic:
    """Marin's Complete(d)P-style AdamH heuristic for IsoFLOP sweeps.

    Model shapes. Hidden sizes run from ``min_hidden`` to ``max_hidden`` in steps of
    ``hidden_step`` (``large_hidden_step`` above ``large_step_budget``). The head dimension
    is 128 (``head_dim``), so ``num_heads = hidden / 128`` with as many KV heads; the MLP is
    a SwiGLU of width ``mlp_ratio * hidden``. Depth grows slightly slower than width
    (Marin's depth rule): ``num_layers = round(h / (64 + 4 * log2(h) - 9))``, which gives
    6 layers at h=512, 11 at h=1024 and 21 at h=2048.

    Tokens and batch. Tokens are ``budget / training FLOPs per token`` (3 x forward, with
    attention and the LM head counted as Levanter does). The batch size is the power of two
    at or above ``tokens / (target_steps * seq_len)``, then halved while the learning rates
    or beta2 leave their valid range; steps are ``round(tokens / (batch * seq_len))``.

    Hyperparameters, with r = B*seq/T and r0 = B0*seq/T0 (batch over tokens, CompleteP's
    batch-to-horizon ratio; Dey et al. 2025, "Don't be lazy: CompleteP enables
    compute-efficient deep transformers"; and Marin's AdamH sweeps, whose reference point
    B0=64 sequences, T0=2.5e9 tokens, seq_len=4096 is the optimum they found for a ~130M
    Qwen3 on Nemotron data):

    * learning rate (the AdamH matrix update): ``lr0 * sqrt(B/B0) * (T0/T)^0.3``
      (square-root batch scaling, as for Adam in Malladi et al. 2022; a 0.3-power decay with
      the training horizon);
    * Adam learning rate (embeddings, norms): ``adam_lr0 * sqrt(r/r0)``;
    * epsilon: ``eps0 * sqrt(r0/r)``, keeping the update's noise floor fixed relative to the
      gradient scale as r changes;
    * beta1 0.9; beta2 ``clip(beta2_0^(B/B0), 0.9, 0.9999)``: the second-moment half-life
      stays constant in tokens (Marek et al. 2025, "Small batch size training for language
      models").

    Kept only: runs within ``budget_tolerance`` of the budget, with batch at least
    ``min_batch_size`` and a multiple of ``devices`` (so that the trainer can split it),
    steps at least ``min_train_steps``, and between
    ``min_tokens_per_param`` (fewer tokens than parameters is far from any optimum) and
    ``max_tokens_per_param`` tokens per parameter; with a ``hardware`` preset, also only runs
    that fit its memory on ``devices`` chips (parameters, optimizer state, activations:
    ``estimated_memory_per_device``).

    Hardware. ``hardware`` names a preset (``cpu`` in core; ``gpu-h100`` and others from
    plugins such as marin-gpu). The default, None, plans for no particular accelerator: no
    memory filter, ``estimated_device_hours`` None, the memory estimate without gradient
    accumulation. Model shapes, batch, steps and hyperparameters never depend on it, so the
    default works with core alone and gives the same runs a large accelerator would.
    """

    vocab_size: int = 50257
    seq_len: int = 4096
    hardware: str | None = None
    devices: int = 8
    mfu: float = 0.4
    # model shapes
    min_hidden: int = 512
    max_hidden: int = 8192
    hidden_step: int = 128
    large_hidden_step: int = 256
    large_step_budget: float = 2e19
    head_dim: int = 128
    mlp_ratio: int = 4
    # reference point and base hyperparameters
    reference_batch_size: int = 64
    reference_tokens: float = 2.5e9
    lr_base: float = 6.3e-3
    adam_lr_base: float = 6.56e-4
    epsilon_base: float = 1.85e-8
    beta1: float = 0.9
    beta2_base: float = 0.9999
    min_beta2: float = 0.9
    max_beta2: float = 0.9999
    max_learning_rate: float = 0.01
    weight_decay: float = 0.0
    max_grad_norm: float = 0.1
    z_loss_weight: float = 1e-7
    warmup_fraction: float = 0.1
    decay_fraction: float = 0.2
    # batch and bounds
    target_steps: int = 2**16
    min_batch_size: int = 8
    max_batch_size: int = 8192
    min_train_steps: int = 100
    min_tokens_per_param: float = 1.0
    max_tokens_per_param: float = 250.0
    budget_tolerance: float = 0.01

    def __post_init__(self) -> None:
        if self.min_hidden % self.head_dim or self.hidden_step % self.head_dim:
            raise ValueError(f"CompletedAdamhHeuristic: min_hidden ({self.min_hidden}) and "
                             f"hidden_step ({self.hidden_step}) must be multiples of head_dim "
                             f"({self.head_dim})")

    # -- shapes ------------------------------------------------------------------------------
    def num_layers_for(self, hidden: int) -> int:
        return max(1, round(hidden / (64 + 4 * math.log2(hidden) - 9)))

    def model_config(self, hidden: int) -> TransformerConfig:
        heads = hidden // self.head_dim
        return TransformerConfig(hidden_dim=hidden, intermediate_dim=self.mlp_ratio * hidden,
                                 num_layers=self.num_layers_for(hidden), num_heads=heads,
                                 num_kv_heads=heads, vocab_size=self.vocab_size,
                                 seq_len=self.seq_len, glu=True)

    def hidden_sizes(self, budget: float) -> range:
        step = self.large_hidden_step if budget > self.large_step_budget else self.hidden_step
        return range(self.min_hidden, self.max_hidden + 1, step)

    # -- hyperparameters -----------------------------------------------------------------------
    def optimizer_for(self, batch_size: int, tokens: float) -> OptimizerHyperparameters:
        batch_ratio = batch_size / self.reference_batch_size
        r_ratio = batch_ratio * self.reference_tokens / tokens
        return OptimizerHyperparameters(
            learning_rate=self.lr_base * math.sqrt(batch_ratio)
            * (self.reference_tokens / tokens) ** 0.3,
            adam_learning_rate=self.adam_lr_base * math.sqrt(r_ratio),
            epsilon=self.epsilon_base * math.sqrt(1.0 / r_ratio),
            beta1=self.beta1,
            beta2=min(self.max_beta2, max(self.min_beta2, self.beta2_base**batch_ratio)),
            weight_decay=self.weight_decay, max_grad_norm=self.max_grad_norm,
            z_loss_weight=self.z_loss_weight, warmup_fraction=self.warmup_fraction,
            decay_fraction=self.decay_fraction, optimizer="adamh")

    def _hyperparameters_valid(self, opt: OptimizerHyperparameters) -> bool:
        return (opt.learning_rate < self.max_learning_rate
                and opt.adam_learning_rate < self.max_learning_rate
                and opt.beta2 > self.min_beta2)

    def batch_size_for(self, tokens: float) -> int:
        batch = max(self.min_batch_size,
                    round_up_to_power_of_two(tokens / (self.target_steps * self.seq_len)))
        while batch > self.min_batch_size and not self._hyperparameters_valid(
                self.optimizer_for(batch, tokens)):
            batch //= 2
        return batch

    # -- candidates ------------------------------------------------------------------------------
    def candidates_for_budget(self, budget: float) -> Iterator[CandidateConfig]:
        if not math.isfinite(budget) or budget <= 0:
            raise ValueError(f"budget must be a positive number of FLOPs, got {budget!r}")
        preset = self._preset()
        for hidden in self.hidden_sizes(budget):
            candidate = self._candidate(self.model_config(hidden), budget, preset)
            if candidate is not None:
                yield candidate

    def candidates_or_explain(self, budget: float) -> list[CandidateConfig]:
        """The candidates, or a NoCandidateError naming the smallest budget that works."""
        found = list(self.candidates_for_budget(budget))
        if found:
            return found
        smallest = self.smallest_workable_budget()
        hint = (f"; the smallest budget with a candidate is about {smallest:.2g} FLOPs"
                if smallest else "; no budget up to 1e26 FLOPs has one with these settings")
        raise NoCandidateError(f"no candidate fits a budget of {budget:.3g} FLOPs with "
                               f"{self.describe()}{hint}")

    def smallest_workable_budget(self, low: float = 1e10, high: float = 1e26) -> float | None:
        exponent = math.log10(low)
        while exponent <= math.log10(high):
            budget = 10**exponent
            if next(iter(self.candidates_for_budget(budget)), None) is not None:
                return budget
            exponent = round(exponent + 0.05, 2)
        return None

    def describe(self) -> str:
        where = f"{self.devices} x {self.hardware}" if self.hardware else "no hardware preset"
        return (f"CompletedAdamhHeuristic(hidden {self.min_hidden}-{self.max_hidden}, "
                f"seq_len {self.seq_len}, min batch {self.min_batch_size}, min steps "
                f"{self.min_train_steps}, {where})")

    def _preset(self):
        if self.hardware is None:
            return None
        from marin.hardware import get_preset

        return get_preset(self.hardware)

    def _candidate(self, model: TransformerConfig, budget: float, preset
                   ) -> CandidateConfig | None:
        params = model.num_params()
        per_token = model.training_flops_per_token()
        tokens = budget / per_token
        if not self.min_tokens_per_param <= tokens / params <= self.max_tokens_per_param:
            return None
        batch = self.batch_size_for(tokens)
        if batch > self.max_batch_size or batch % self.devices:
            return None  # too large, or a batch the devices cannot split evenly
        steps = round(tokens / (batch * self.seq_len))
        if steps < self.min_train_steps:
            return None
        actual_tokens = steps * batch * self.seq_len
        flops = actual_tokens * per_token
        if abs(flops - budget) > self.budget_tolerance * budget:
            return None
        limit = preset.memory_bytes if preset is not None else None
        memory = estimate_training_memory(model, batch, self.devices, limit)
        if limit is not None and memory.per_device_bytes > limit:
            return None
        device_hours = None if preset is None else \
            flops / (preset.peak_bf16_flops * self.mfu) / 3600
        return CandidateConfig(
            model_config=model, batch_size=batch, train_steps=steps, seq_len=self.seq_len,
            tokens=actual_tokens, params=params, flops=flops, budget=budget,
            optimizer=self.optimizer_for(batch, actual_tokens),
            estimated_memory_per_device=memory.per_device_bytes,
            microbatch_size=memory.microbatch_size, devices=self.devices,
            hardware=preset.name if preset is not None else None, mfu=self.mfu,
            estimated_device_hours=device_hours)

    def with_overrides(self, **changes: object) -> CompletedAdamhHeuristic:
        return replace(self, **changes)


@dataclass(frozen=True)
class ProportionalDepthHeuristic(CompletedAdamhHeuristic):
    """``CompletedAdamhHeuristic`` whose depth grows in proportion to width, for tiny models.

        ProportionalDepthHeuristic(vocab_size=384, seq_len=64, hardware="cpu", devices=1,
                                   min_hidden=8, max_hidden=64, hidden_step=4, head_dim=4,
                                   hidden_per_layer=16)

    Marin's depth rule gives a single layer below a hidden size of about 96, so a sweep of
    tiny models would scale width alone. Here ``num_layers = max(1, round(hidden /
    hidden_per_layer))``, so that parameters grow with both width and depth as in a
    full-size sweep. Batch, steps, hyperparameters and bounds follow the parent's rules.

    Attributes:
        hidden_per_layer: hidden units per layer (the models' aspect ratio).
    """

    hidden_per_layer: int = 16

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.hidden_per_layer <= 0:
            raise ValueError(f"ProportionalDepthHeuristic: hidden_per_layer must be positive, "
                             f"got {self.hidden_per_layer}")

    def num_layers_for(self, hidden: int) -> int:
        return max(1, round(hidden / self.hidden_per_layer))


#: Marin's spelling of the same class
CompletedAdamHHeuristic = CompletedAdamhHeuristic


def load_heuristic(name: str, vocab_size: int | None = None, seq_len: int | None = None,
                   hardware: str | None = None) -> ScalingHeuristic:
    """The ``marin.scaling_heuristics`` plugin ``name``, made with the options given (those
    left None take the heuristic's defaults). A heuristic that takes none of them: a
    ``ValueError`` naming them."""
    cls = registry.load("scaling_heuristics", name)
    options = {k: v for k, v in (("vocab_size", vocab_size), ("seq_len", seq_len),
                                 ("hardware", hardware)) if v is not None}
    try:
        return cls(**options)
    except TypeError as e:
        raise ValueError(f"heuristic {name!r} does not accept {sorted(options)}: {e}") from e
