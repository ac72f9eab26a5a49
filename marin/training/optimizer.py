"""Optimizers and learning-rate schedules for the trainer.

    tx, schedule = build_optimizer(hyper, total_steps, params)
    # tx: clipping, then AdamW or AdamH; schedule: the learning rate at each step
    optimizer = Optimizer.of(hyper, total_steps, params)  # what shapes the program
    values = optimizer.values(hyper, total_steps)    # what does not: traced arrays
    tx = optimizer.transformation(values)            # inside the jitted update

* ``adamw``: optax AdamW; weight decay on matrices only.
* ``adamh`` (Marin/Levanter's AdamH, the optimizer CompletedAdamhHeuristic assumes): Adam
  moments for every parameter; matrices take a step of relative size ``learning_rate``,
  ``p' = p - lr * u * |p| / |u|``, and are projected back to their norm at initialisation,
  ``p_new = p' / |p'| * |p|`` (Frobenius norms, per layer for stacked layers), so no weight
  decay is needed; vectors and embeddings take plain Adam steps of ``adam_learning_rate``.

Schedules are warmup-stable-decay: linear warmup over ``warmup_fraction`` of the steps, a
constant plateau, and a decay to zero over the last ``decay_fraction``, of the shape
``decay_shape`` (``linear``, ``1-sqrt`` or ``cosine``). A branch (``TrainLmConfig.init_from``,
``marin.training.branching``) starts at its branch point ``k`` in its parent's plateau and
is the decay alone: ``values(..., decay_from=k)`` decays from ``k`` to the last step.

Design note: the learning rates, weight decay, gradient-clipping norm, z-loss weight and
the schedule's step counts are ``HyperValues``, arrays the jitted update takes as inputs,
not constants of its program: a run with another learning rate or length runs the program
already compiled (and cached, see ``marin.training.compilation``). What stays in the
program is what changes its operations or its constants' rounding: the optimizer, Adam's
betas and epsilon, and whether there is warmup, decay, clipping or a z-loss at all. The
schedule repeats optax's linear-schedule arithmetic operation for operation, so a run's
learning rates, and so its losses, are the same bits as with the constants.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from marin.training.hyperparameters import (
    DECAY_SHAPES,
    OptimizerHyperparameters,
    schedule_steps,
)

__all__ = ["HyperValues", "Optimizer", "branch_steps", "build_optimizer", "parameter_labels",
           "schedule_steps", "wsd_schedule"]

MATRIX, STACKED_MATRIX, OTHER = "matrix", "stacked_matrix", "other"


def branch_steps(total_steps: int, decay_from: int) -> tuple[int, int, int]:
    """``schedule_steps`` of a branch: no warmup of its own (its steps begin at its branch
    point ``decay_from``, in its parent's plateau), the decay from there to the end."""
    return 0, decay_from, total_steps - decay_from


def wsd_schedule(peak: Any, total_steps: int, warmup_fraction: float,
                 decay_fraction: float, decay_shape: str = "linear") -> optax.Schedule:
    warmup, decay_start, decay = schedule_steps(total_steps, warmup_fraction, decay_fraction)
    return _wsd(peak, (warmup, decay_start, decay), warmup > 0, decay > 0, decay_shape)


def _wsd(peak: Any, steps: tuple[Any, Any, Any], warmup: bool, decay: bool,
         shape: str = "linear") -> optax.Schedule:
    """Warmup-stable-decay; ``peak`` and ``steps`` (``schedule_steps``'s) may be traced,
    ``warmup`` and ``decay`` say which pieces there are, ``shape`` the decay's."""
    pieces, bounds = [], []
    if warmup:
        pieces.append(_linear(0.0, peak, steps[0]))
        bounds.append(steps[0])
    pieces.append(lambda count: peak)
    if decay:
        bounds.append(steps[1])
        pieces.append(_decay(peak, steps[2], shape))
    return optax.join_schedules(pieces, bounds) if bounds else pieces[0]


def _decay(peak: Any, steps: Any, shape: str) -> optax.Schedule:
    """From ``peak`` to zero over ``steps`` > 0 (may be traced), of the ``decay_shape``."""
    if shape == "linear":
        return _linear(peak, 0.0, steps)
    if shape not in DECAY_SHAPES:
        raise ValueError(f"optimizer.decay_shape must be one of {', '.join(DECAY_SHAPES)}, "
                         f"got {shape!r}")

    def schedule(count):
        done = jnp.clip(count, 0, steps) / steps
        if shape == "1-sqrt":
            return peak * (1 - jnp.sqrt(done))
        return peak * (0.5 * (1 + jnp.cos(jnp.pi * done)))

    return schedule


def _linear(init: Any, end: Any, steps: Any) -> optax.Schedule:
    """optax.linear_schedule with ``steps`` > 0 that may be traced (optax's arithmetic)."""

    def schedule(count):
        count = jnp.clip(count, 0, steps)
        frac = 1 - count / steps
        return (init - end) * (frac**1) + end

    return schedule


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


class HyperValues(NamedTuple):
    """The hyperparameters the jitted update takes as inputs (scalar arrays)."""

    learning_rate: Any
    adam_learning_rate: Any
    weight_decay: Any
    max_grad_norm: Any
    z_loss_weight: Any
    warmup_steps: Any
    decay_start: Any
    decay_steps: Any


@dataclass(frozen=True)
class Optimizer:
    """What of the optimizer shapes its compiled program (see the design note)."""

    optimizer: str
    beta1: float
    beta2: float
    epsilon: float
    warmup: bool
    decay: bool
    clip: bool
    z_loss: bool
    labels: Any
    decay_shape: str = "linear"

    @staticmethod
    def of(hyper: OptimizerHyperparameters, total_steps: int, params: Any,
           decay_from: int | None = None) -> Optimizer:
        """``decay_from``: a branch's branch point (``branch_steps``)."""
        if hyper.optimizer not in ("adamw", "adamh"):
            raise ValueError(f"optimizer.optimizer must be 'adamw' or 'adamh', got "
                             f"{hyper.optimizer!r}")
        if hyper.decay_shape not in DECAY_SHAPES:
            raise ValueError(f"optimizer.decay_shape must be one of "
                             f"{', '.join(DECAY_SHAPES)}, got {hyper.decay_shape!r}")
        warmup, _, decay = _steps(hyper, total_steps, decay_from)
        return Optimizer(hyper.optimizer, hyper.beta1, hyper.beta2, hyper.epsilon,
                         warmup > 0, decay > 0, bool(hyper.max_grad_norm),
                         bool(hyper.z_loss_weight), parameter_labels(params),
                         hyper.decay_shape)

    @staticmethod
    def values(hyper: OptimizerHyperparameters, total_steps: int,
               decay_from: int | None = None) -> HyperValues:
        """The traced inputs of a run of ``total_steps`` steps (a branch's, from
        ``decay_from``)."""
        steps = _steps(hyper, total_steps, decay_from)
        f32 = [jnp.asarray(x, jnp.float32) for x in (
            hyper.learning_rate, hyper.adam_learning_rate, hyper.weight_decay,
            hyper.max_grad_norm, hyper.z_loss_weight)]
        return HyperValues(*f32, *(jnp.asarray(x, jnp.int32) for x in steps))

    def schedule(self, values: HyperValues, peak: Any = None) -> optax.Schedule:
        return _wsd(values.learning_rate if peak is None else peak,
                    (values.warmup_steps, values.decay_start, values.decay_steps),
                    self.warmup, self.decay, self.decay_shape)

    def transformation(self, values: HyperValues) -> optax.GradientTransformation:
        schedule = self.schedule(values)
        clip = optax.clip_by_global_norm(values.max_grad_norm) if self.clip else \
            optax.identity()
        if self.optimizer == "adamw":
            decay_mask = jax.tree.map(lambda kind: kind != OTHER, self.labels)
            tx = optax.adamw(schedule, b1=self.beta1, b2=self.beta2, eps=self.epsilon,
                             weight_decay=values.weight_decay, mask=decay_mask)
        else:
            adam_schedule = self.schedule(values, values.adam_learning_rate)
            tx = optax.chain(optax.scale_by_adam(b1=self.beta1, b2=self.beta2,
                                                 eps=self.epsilon),
                             _hyperball_step(schedule, adam_schedule, self.labels))
        return optax.chain(clip, tx)


def _steps(hyper: OptimizerHyperparameters, total_steps: int, decay_from: int | None
           ) -> tuple[int, int, int]:
    if decay_from is not None:
        return branch_steps(total_steps, decay_from)
    return schedule_steps(total_steps, hyper.warmup_fraction, hyper.decay_fraction)


def build_optimizer(hyper: OptimizerHyperparameters, total_steps: int, params: Any,
                    decay_from: int | None = None
                    ) -> tuple[optax.GradientTransformation, optax.Schedule]:
    """The optimizer with its hyperparameters as constants, and its schedule."""
    optimizer = Optimizer.of(hyper, total_steps, params, decay_from)
    values = optimizer.values(hyper, total_steps, decay_from)
    return optimizer.transformation(values), optimizer.schedule(values)
