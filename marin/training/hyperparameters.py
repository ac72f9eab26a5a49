"""The optimizer's hyperparameters: what a scaling heuristic chooses and the trainer uses.

    hyper = OptimizerHyperparameters(learning_rate=3e-3, adam_learning_rate=3e-4,
                                     epsilon=1e-8, beta1=0.9, beta2=0.95)
    TrainLmConfig(..., optimizer=hyper)

This module imports no JAX (only the standard library and ``marin.execution.step``), so
that heuristics and study plans can build hyperparameters without importing JAX
(``marin.training.optimizer`` turns them into an optax transformation).
"""

from __future__ import annotations

from dataclasses import dataclass

from marin.execution.step import added_field

#: ``decay_shape``'s values: the learning rate over the decay, from its peak to zero
DECAY_SHAPES = ("linear", "1-sqrt", "cosine")


@dataclass(frozen=True)
class OptimizerHyperparameters:
    """Attributes:
        learning_rate: peak learning rate of the matrices (AdamH's relative step size, or
            AdamW's learning rate for every parameter).
        adam_learning_rate: peak learning rate of embeddings, norms and other vectors under
            AdamH (AdamW ignores it).
        epsilon: Adam's epsilon.
        beta1: Adam's first-moment decay.
        beta2: Adam's second-moment decay.
        weight_decay: AdamW's decoupled weight decay, on matrices only (AdamH needs none).
        max_grad_norm: clip gradients to this global norm (0: no clipping).
        z_loss_weight: weight of the z-loss, ``mean(log Z ** 2)``, added to the loss.
        warmup_fraction: fraction of the steps spent warming up linearly from zero.
        decay_fraction: fraction of the steps, at the end, decayed to zero (0: a stable
            run, constant after warmup, that cooldown branches can start from; see
            ``marin.training.branching``).
        optimizer: ``adamh`` or ``adamw``.
        decay_shape: the decay's shape, with ``x`` the fraction of the decay done:
            ``linear`` (``1 - x``), ``1-sqrt`` (``1 - sqrt(x)``, the best cooldown of Hägele
            et al. 2024) or ``cosine`` (``(1 + cos(pi x)) / 2``). Left out of the step's
            key while ``linear``.
    """

    learning_rate: float
    adam_learning_rate: float
    epsilon: float
    beta1: float
    beta2: float
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    z_loss_weight: float = 0.0
    warmup_fraction: float = 0.1
    decay_fraction: float = 0.2
    optimizer: str = "adamh"
    decay_shape: str = added_field(default="linear")


def schedule_steps(total_steps: int, warmup_fraction: float, decay_fraction: float
                   ) -> tuple[int, int, int]:
    """(warmup steps, step the decay starts at, decay steps) of a warmup-stable-decay run."""
    warmup = max(1, int(total_steps * warmup_fraction)) if warmup_fraction > 0 else 0
    decay = int(total_steps * decay_fraction)
    stable = max(0, total_steps - warmup - decay)
    return warmup, warmup + stable, decay
