"""Optimizers and learning-rate schedules for the trainer.

    tx, schedule = build_optimizer(hyper, total_steps, params)
    # tx: clipping, then AdamW or AdamH; schedule: the learning rate at each step

* ``adamw``: optax AdamW; weight decay on matrices only.
* ``adamh`` (Marin/Levanter's AdamH, the optimizer CompletedAdamhHeuristic assumes): Adam
  moments for every parameter; matrices take a step of relative size ``learning_rate``,
  ``p' = p - lr * u * |p| / |u|``, and are projected back to their norm at initialisation,
  ``p_new = p' / |p'| * |p|`` (Frobenius norms, per layer for stacked layers), so no weight
  decay is needed; vectors and embeddings take plain Adam steps of ``adam_learning_rate``.

Schedules are warmup-stable-decay: linear warmup over ``warmup_fraction`` of the steps, a
constant plateau, and a linear decay to zero over the last ``decay_fraction``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from marin.training.hyperparameters import OptimizerHyperparameters

MATRIX, STACKED_MATRIX, OTHER = "matrix", "stacked_matrix", "other"


def wsd_schedule(peak: float, total_steps: int, warmup_fraction: float,
                 decay_fraction: float) -> optax.Schedule:
    warmup = max(1, int(total_steps * warmup_fraction)) if warmup_fraction > 0 else 0
    decay = int(total_steps * decay_fraction)
    stable = max(0, total_steps - warmup - decay)
    pieces, bounds = [], []
    if warmup:
        pieces.append(optax.linear_schedule(0.0, peak, warmup))
        bounds.append(warmup)
    pieces.append(optax.constant_schedule(peak))
    if decay:
        bounds.append(warmup + stable)
        pieces.append(optax.linear_schedule(peak, 0.0, decay))
    return optax.join_schedules(pieces, bounds) if bounds else pieces[0]


def parameter_labels(params: Any) -> Any:
    """``matrix`` / ``stacked_matrix`` / ``other`` for each leaf of a model's parameters."""

    def label(path: tuple, leaf: Any) -> str | None:
        if leaf is None:
            return None
        names = "/".join(str(getattr(p, "name", getattr(p, "key", p))) for p in path)
        stacked = 1 if "layers" in names else 0
        if "embedding" in names or leaf.ndim - stacked < 2:
            return OTHER
        return STACKED_MATRIX if stacked else MATRIX

    return jax.tree_util.tree_map_with_path(label, params)


class _ScheduleState(NamedTuple):
    count: jnp.ndarray


def _hyperball_step(lr_schedule, adam_lr_schedule, labels) -> optax.GradientTransformation:
    def init(params):
        return _ScheduleState(jnp.zeros([], jnp.int32))

    def update(updates, state, params):
        lr = lr_schedule(state.count)
        adam_lr = adam_lr_schedule(state.count)

        def one(u, p, kind):
            if kind == OTHER:
                return -adam_lr * u
            axes = tuple(range(1, p.ndim)) if kind == STACKED_MATRIX else None
            p_norm = jnp.sqrt(jnp.sum(jnp.square(p), axis=axes, keepdims=True))
            u_norm = jnp.sqrt(jnp.sum(jnp.square(u), axis=axes, keepdims=True))
            moved = p - lr * u * p_norm / jnp.maximum(u_norm, 1e-30)
            moved_norm = jnp.sqrt(jnp.sum(jnp.square(moved), axis=axes, keepdims=True))
            return moved / jnp.maximum(moved_norm, 1e-30) * p_norm - p

        new = jax.tree.map(one, updates, params, labels)
        return new, _ScheduleState(state.count + 1)

    return optax.GradientTransformation(init, update)


def build_optimizer(hyper: OptimizerHyperparameters, total_steps: int, params: Any
                    ) -> tuple[optax.GradientTransformation, optax.Schedule]:
    schedule = wsd_schedule(hyper.learning_rate, total_steps, hyper.warmup_fraction,
                            hyper.decay_fraction)
    labels = parameter_labels(params)
    clip = optax.clip_by_global_norm(hyper.max_grad_norm) if hyper.max_grad_norm else \
        optax.identity()
    if hyper.optimizer == "adamw":
        decay_mask = jax.tree.map(lambda kind: kind != OTHER, labels)
        tx = optax.adamw(schedule, b1=hyper.beta1, b2=hyper.beta2, eps=hyper.epsilon,
                         weight_decay=hyper.weight_decay, mask=decay_mask)
    elif hyper.optimizer == "adamh":
        adam_schedule = wsd_schedule(hyper.adam_learning_rate, total_steps,
                                     hyper.warmup_fraction, hyper.decay_fraction)
        tx = optax.chain(optax.scale_by_adam(b1=hyper.beta1, b2=hyper.beta2, eps=hyper.epsilon),
                         _hyperball_step(schedule, adam_schedule, labels))
    else:
        raise ValueError(f"optimizer.optimizer must be 'adamw' or 'adamh', got "
                         f"{hyper.optimizer!r}")
    return optax.chain(clip, tx), schedule
