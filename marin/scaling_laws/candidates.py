"""Candidate runs of an IsoFLOP sweep: what a scaling heuristic yields per FLOP budget.

    from marin.scaling_laws.candidates import CandidateConfig, nearest_candidate
    candidate = nearest_candidate(heuristic.candidates_for_budget(3e19), params=4e8)
    candidate.model_config, candidate.batch_size, candidate.train_steps, candidate.optimizer

FLOPs here are training FLOPs as the trainer counts them:
``tokens * TransformerConfig.training_flops_per_token()`` (three forward passes, attention
and the LM head included; see ``marin.models.flops``). A candidate's ``flops`` is within the
heuristic's tolerance of its ``budget``, and the fits (``marin.scaling_laws``) read budgets
in the same accounting.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from marin.models.config import TransformerConfig
from marin.training.hyperparameters import OptimizerHyperparameters


class NoCandidateError(ValueError):
    """No candidate run fits a budget; the message names the smallest budget that would."""


@dataclass(frozen=True)
class CandidateConfig:
    """One training run of an IsoFLOP sweep.

    Attributes:
        model_config: the model's shape.
        batch_size: sequences per step.
        train_steps: optimizer steps.
        seq_len: tokens per sequence.
        tokens: ``batch_size * train_steps * seq_len``.
        params: trainable parameters (``model_config.num_params()``).
        flops: training FLOPs, ``tokens * model_config.training_flops_per_token()``.
        budget: the FLOP budget the candidate was chosen for.
        optimizer: its hyperparameters.
        estimated_memory_per_device: bytes per device (``marin.models.memory``).
        microbatch_size: sequences per device per micro-step of gradient accumulation, as
            the memory estimate planned it (the whole per-device batch when that fits); its
            run uses it (``marin.scaling_laws.runs.training_config``).
        devices: accelerators the run is planned on.
        hardware: the hardware preset it was planned for, or None (no particular one).
        mfu: the model FLOP utilisation assumed for ``estimated_device_hours``.
        estimated_device_hours: device-hours at ``mfu`` of the preset's peak; None without a
            preset.
    """

    model_config: TransformerConfig
    batch_size: int
    train_steps: int
    seq_len: int
    tokens: int
    params: int
    flops: float
    budget: float
    optimizer: OptimizerHyperparameters
    estimated_memory_per_device: float
    microbatch_size: int
    devices: int
    hardware: str | None
    mfu: float
    estimated_device_hours: float | None

    @property
    def tokens_per_param(self) -> float:
        return self.tokens / self.params

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["tokens_per_param"] = self.tokens_per_param
        return out


def nearest_candidate(candidates: Iterable[CandidateConfig], params: float
                      ) -> CandidateConfig | None:
    """The candidate whose parameter count is closest to ``params`` in log space."""
    candidates = list(candidates)
    if not candidates:
        return None
    return min(candidates, key=lambda c: abs(math.log(c.params / params)))
