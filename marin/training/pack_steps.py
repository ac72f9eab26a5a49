"""How ``train_lm``'s steps pack under the executor (``--pack N``, ``marin.execution.packs``).

    pack_shape(config)              # what members of a pack share (PackShape)
    TRAIN_PACK.key(config)          # its PackShape: steps of equal shapes pack (None: never)
    TRAIN_PACK.capacity(config)     # members like it that fit on one device of its hardware
    TRAIN_PACK.train(configs)       # train them; one TrainingError or None each
    check_pack_fits(configs)        # TrainingConfigError when K members do not fit

Memory: a member holds what a run alone holds (``marin.models.memory``): 16 bytes per
parameter (fp32 parameters, gradients and two Adam moments; 20 with gradient accumulation)
and one micro-batch's activations. A pack of K holds K times that; it fits when that is at
most the accelerator memory of one chip of the config's ``hardware`` preset.

Resuming: a pack trains its members from one step. Members whose newest published
checkpoints stand at different steps (a pack killed while some had saved and some not)
train as separate packs, one per starting step, one after the other; each resumes from its
own checkpoint, so each member's run equals an uninterrupted one.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

from marin.execution.packs import PackSpec
from marin.models.config import TransformerConfig
from marin.models.memory import (
    ACCUMULATOR_BYTES_PER_PARAM,
    STATE_BYTES_PER_PARAM,
    activation_bytes_per_sequence,
)
from marin.storage.files import join_url
from marin.training.checkpoint import Checkpoints
from marin.training.config import TrainingConfigError, TrainLmConfig, check_batch_layout
from marin.training.optimizer import Optimizer

__all__ = ["TRAIN_PACK", "PackShape", "check_pack_fits", "member_bytes", "pack_shape",
           "start_step"]


@dataclass(frozen=True)
class PackShape:
    """What the runs of one pack share: whatever shapes the compiled update.

    Attributes:
        model: the model's shape (its ``TransformerConfig``, sequence length included).
        batch_size: sequences per optimizer step.
        train_steps: optimizer steps of every member.
        compute_dtype: dtype of activations and matmuls.
        micro_steps: gradient-accumulation slices per step (``check_batch_layout``).
        optimizer: the optimizer's program-shaping choices (``Optimizer`` without labels).
    """

    model: TransformerConfig
    batch_size: int
    train_steps: int
    compute_dtype: str
    micro_steps: int
    optimizer: Optimizer


def pack_shape(config: TrainLmConfig) -> PackShape:
    """The shape ``config``'s run shares with the runs it can pack with."""
    micro_steps = check_batch_layout(config.batch_size, 1, config.microbatch_size)
    hyper = config.optimizer
    optimizer = Optimizer.of(hyper, config.train_steps, None)
    return PackShape(config.model, config.batch_size, config.train_steps,
                     config.compute_dtype, micro_steps,
                     dataclasses.replace(optimizer, labels=None))


def start_step(config: TrainLmConfig) -> int:
    """The step ``config``'s run starts from: its newest complete checkpoint, else its
    branch point, else 0."""
    checkpoints = Checkpoints(join_url(config.output_path, "checkpoints"), asynchronous=False)
    try:
        latest = checkpoints.latest_step()
    finally:
        checkpoints.close()
    if latest is not None:
        return latest
    return config.init_from.step if config.init_from is not None else 0


def member_bytes(config: TrainLmConfig) -> float:
    """Estimated accelerator bytes of one member of a pack like ``config``."""
    micro = config.microbatch_size or config.batch_size
    per_param = STATE_BYTES_PER_PARAM + (ACCUMULATOR_BYTES_PER_PARAM
                                         if micro < config.batch_size else 0)
    return config.model.num_params() * per_param + micro * activation_bytes_per_sequence(
        config.model)


def _device_bytes(config: TrainLmConfig) -> float:
    from marin.hardware import get_preset

    return get_preset(config.hardware).memory_bytes


def _capacity(config: TrainLmConfig) -> int:
    return max(1, math.floor(_device_bytes(config) / member_bytes(config)))


def check_pack_fits(configs: Sequence[TrainLmConfig]) -> None:
    """Refuse, in one line naming K and the estimate, a pack of more members than fit."""
    k, first = len(configs), configs[0]
    fits = math.floor(_device_bytes(first) / member_bytes(first))
    if k > max(1, fits):
        raise TrainingConfigError(
            f"a pack of K={k} members needs about {k * member_bytes(first) / 1e9:.3g} GB "
            f"({member_bytes(first) / 1e9:.3g} GB each) and one {first.hardware} device has "
            f"{_device_bytes(first) / 1e9:.3g} GB: pack at most {max(1, fits)} (--pack "
            f"{max(1, fits)}), or train them apart")


def _key(config: TrainLmConfig) -> PackShape | None:
    if config.profile_steps is not None:
        return None  # a pack profiles no member
    try:
        return pack_shape(config)
    except TrainingConfigError:
        return None  # trains alone, and fails there with its own error


def _train(configs: Sequence[TrainLmConfig]) -> list[BaseException | None]:
    from marin.training import pack_train  # the package's lazy name: packing imports this

    starts = [start_step(config) for config in configs]
    errors: list[BaseException | None] = [None] * len(configs)
    for start in sorted(set(starts)):
        group = [i for i, s in enumerate(starts) if s == start]
        try:
            outcomes = pack_train([configs[i] for i in group])
        except Exception as e:  # the pack as a whole: each member's error
            outcomes = None
            for i in group:
                errors[i] = e
        for i, outcome in zip(group, outcomes or [], strict=False):
            errors[i] = outcome.error
    return errors


TRAIN_PACK = PackSpec(key=_key, train=_train, capacity=_capacity)
