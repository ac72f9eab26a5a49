"""The optimizer's hyperparameters: what a scaling heuristic chooses and the trainer uses.

    hyper = OptimizerHyperparameters(learning_rate=3e-3, adam_learning_rate=3e-4,
                                     epsilon=1e-8, beta1=0.9, beta2=0.95)
    TrainLmConfig(..., optimizer=hyper)

This module imports nothing beyond the standard library, so that heuristics and study plans
can build hyperparameters without importing JAX (``marin.training.optimizer`` turns them
into an optax transformation).
"""

from __future__ import annotations

from dataclasses import dataclass


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
        decay_fraction: fraction of the steps, at the end, decayed linearly to zero.
        optimizer: ``adamh`` or ``adamw``.
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
