"""What one training run is: ``TrainLmConfig``, its data and validation sets, its errors.

    config = TrainLmConfig(
        mixture=(DataComponent("plays", plays_cache, 0.7), DataComponent("docs", docs_cache, 0.3)),
        validation=(ValidationSet("plays", plays_cache), ValidationSet("docs", docs_cache)),
        model=TransformerConfig(...), batch_size=8, train_steps=200,
        optimizer=OptimizerHyperparameters(...))

This module imports no JAX (nor anything that does), so a study can build, check and hash
its training configs without loading JAX; ``marin.training.trainer`` runs them. Bad values
fail when the config is built (at planning time in a dry run), in one line naming the
field and the fix.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from marin._cache_dir import cache_dir
from marin.evaluation.tasks import AVERAGES, TaskConfig
from marin.execution import added_field, this_output_path, unversioned_field
from marin.models.config import TransformerConfig
from marin.trackers.config import TrackerConfig, TrackerConfigError
from marin.training.branching import BranchError, BranchPoint, check_branch
from marin.training.hyperparameters import DECAY_SHAPES, OptimizerHyperparameters

__all__ = ["DEFAULT_COMPILATION_CACHE", "BranchPoint", "DataComponent", "TaskConfig",
           "TrainLmConfig",
           "TrainingConfigError", "TrainingDivergedError", "TrainingOutOfMemoryError",
           "ValidationSet", "check_batch_layout", "compilation_cache_folder"]


class TrainingDivergedError(RuntimeError):
    """The loss became NaN or infinite."""


class TrainingConfigError(ValueError):
    """The config cannot train (for example the data's vocabulary exceeds the model's)."""


class TrainingOutOfMemoryError(MemoryError):
    """The accelerator ran out of memory; the message names the batch size."""


@dataclass(frozen=True)
class DataComponent:
    """One weighted token cache of a mixture.

    Attributes:
        name: the component's label (``"plays"``), the key of
            ``RunSummary.tokens_by_component``.
        cache_path: the token cache (a tokenize step's output).
        weight: the share of training tokens drawn from it, relative to the other
            components' weights (every sequence has ``seq_len`` tokens, so per token and
            per sequence are the same).
    """

    name: str
    cache_path: Any  # a path, or a placeholder until the executor resolves it
    weight: float


@dataclass(frozen=True)
class ValidationSet:
    """A named held-out set: the ``validation`` split of a token cache.

    Recorded as ``eval/<name>/loss`` and ``eval/<name>/bpb``.
    """

    name: str
    cache_path: Any  # a path, or a placeholder until the executor resolves it


#: ``TrainLmConfig.compilation_cache``'s default: a folder of the machine that runs the step
DEFAULT_COMPILATION_CACHE = "default"


def compilation_cache_folder(setting: str | None) -> str | None:
    """The folder a ``compilation_cache`` setting names: ``"default"`` is
    ``$MARIN_CACHE_DIR/jax-compilation`` (else ``~/.cache/marin/jax-compilation``), read on
    the machine that trains; None: no cache."""
    if setting == DEFAULT_COMPILATION_CACHE:
        return str(cache_dir() / "jax-compilation")
    return setting


@dataclass(frozen=True, kw_only=True)
class TrainLmConfig:
    """One training run.

    Attributes:
        cache_path: the token cache (a tokenize step's output); None when ``mixture``
            names the caches instead.
        mixture: weighted caches to sample training sequences from (empty: ``cache_path``).
        validation: named held-out sets, each the validation split of a cache; every
            evaluation scores all of them (empty: the training cache's own validation
            split, recorded as ``eval/loss`` and ``eval/bpb``).
        model: the model's shape.
        batch_size: sequences per step.
        train_steps: optimizer steps.
        optimizer: hyperparameters (``optimizer.optimizer`` is ``adamw`` or ``adamh``).
        seed: parameter initialisation and data order.
        tokenizer: the tokenizer the caches must have been built with (None: only the
            vocabulary size is checked).
        compute_dtype: dtype of activations and matmuls; parameters stay float32.
        eval_batches: validation batches per evaluation (per set).
        output_path: where metrics, summary and checkpoints go (the step's output).
        eval_every: steps between evaluations (0: only at the end).
        checkpoint_every: steps between checkpoints (0: only at the end).
        checkpoint_keep: how many of the newest checkpoints to keep.
        checkpoint_keep_every: also keep every checkpoint whose step is a multiple of this
            (0: none), for example to study a run's history.
        checkpoint_at: steps at which the run also saves a checkpoint and keeps it, for
            example a stable run's branch points (``marin.training.branching``).
        async_checkpoints: write checkpoints in the background while training goes on.
        log_every: steps between progress lines when output is not a terminal.
        hardware: preset whose peak FLOP/s is the MFU denominator.
        profile_steps: capture a JAX profile (XPlane) of steps [a, b) into
            ``<output>/profile``, each step marked by a ``StepTraceAnnotation``; read it
            with ``marin trace summarize <output>``.
        trackers: where the metrics go besides ``metrics.jsonl``: ``TrackerConfig``s (or
            plugin names) of the ``marin.trackers`` group, e.g. ``json``, ``tensorboard``,
            ``wandb``. Unversioned: trackers change no result.
        compilation_cache: the folder of JAX's persistent compilation cache, shared by
            runs; ``"default"``: ``$MARIN_CACHE_DIR/jax-compilation`` of the machine that
            trains (``compilation_cache_folder``); None turns it off. Unversioned.
        microbatch_size: sequences per device per micro-step of gradient accumulation: each
            optimizer step runs its batch as ``batch_size / (devices * microbatch_size)``
            micro-steps, summing their gradients, and applies one update; the activations
            of one micro-step are live at a time. None: the whole per-device batch in one
            pass. It must divide the per-device batch (``check_batch_layout``). Unversioned:
            the losses are those of the whole batch (within float32 rounding).
        init_from: a ``BranchPoint(run=output_path_of(parent, blocking=False), step=k)``:
            start from the parent run's checkpoint of step ``k`` (parameters, optimizer
            state, data position) and train steps ``k..train_steps``, the decay from ``k``
            to zero (``marin.training.branching``). None: from scratch. Left out of the
            step's key while None.
        tasks: downstream tasks (``marin.evaluation``: ``TaskConfig(name, path)``), each
            scored at every evaluation point, recorded as ``lm_eval/<name>/acc``,
            ``acc_norm``, ``bpb`` and their means ``lm_eval/averages/*``; they need
            ``tokenizer``. Unversioned: tasks change no training result.
    """

    cache_path: Any = None  # a path, or a placeholder until the executor resolves it
    mixture: tuple[DataComponent, ...] = ()
    validation: tuple[ValidationSet, ...] = ()
    model: TransformerConfig
    batch_size: int
    train_steps: int
    optimizer: OptimizerHyperparameters
    seed: int = 0
    tokenizer: str | None = None
    compute_dtype: str = "bfloat16"
    eval_batches: int = 4
    output_path: str = this_output_path()
    eval_every: int = unversioned_field(default=0)
    checkpoint_every: int = unversioned_field(default=0)
    checkpoint_keep: int = unversioned_field(default=2)
    checkpoint_keep_every: int = unversioned_field(default=0)
    checkpoint_at: tuple[int, ...] = unversioned_field(default=())
    async_checkpoints: bool = unversioned_field(default=True)
    log_every: int = unversioned_field(default=50)
    hardware: str = unversioned_field(default="cpu")
    profile_steps: tuple[int, int] | None = unversioned_field(default=None)
    trackers: list[TrackerConfig] = unversioned_field(default_factory=list)  # noqa: RUF009
    compilation_cache: str | None = unversioned_field(default=DEFAULT_COMPILATION_CACHE)
    microbatch_size: int | None = unversioned_field(default=None)
    init_from: BranchPoint | None = added_field(default=None)  # noqa: RUF009
    tasks: list[TaskConfig] = unversioned_field(default_factory=list)  # noqa: RUF009

    def __post_init__(self) -> None:
        from marin.trackers.fanout import check_trackers

        # lists from a parsed config become tuples: the config stays hashable and frozen
        object.__setattr__(self, "mixture", tuple(self.mixture))
        object.__setattr__(self, "validation", tuple(self.validation))
        object.__setattr__(self, "checkpoint_at", tuple(sorted(set(self.checkpoint_at))))
        _check_data(self.cache_path, self.mixture)
        _check_validation(self.validation)
        _check_tasks(self.tasks, self.tokenizer)
        for name in ("batch_size", "train_steps", "checkpoint_keep"):
            if getattr(self, name) <= 0:
                raise TrainingConfigError(f"TrainLmConfig.{name} must be positive, got "
                                          f"{getattr(self, name)}")
        for step in self.checkpoint_at:
            if isinstance(step, bool) or not isinstance(step, int) or \
                    not 0 < step <= self.train_steps:
                raise TrainingConfigError(
                    f"TrainLmConfig.checkpoint_at holds {step!r}: give steps of the run, "
                    f"from 1 to train_steps={self.train_steps}")
        if self.microbatch_size is not None:
            if isinstance(self.microbatch_size, bool) or not isinstance(
                    self.microbatch_size, int) or self.microbatch_size <= 0:
                raise TrainingConfigError(
                    f"TrainLmConfig.microbatch_size must be a positive number of sequences "
                    f"per device, or None (the whole per-device batch), got "
                    f"{self.microbatch_size!r}")
            # the device count is known where the run starts; here, at least one device
            check_batch_layout(self.batch_size, 1, self.microbatch_size)
        kind = getattr(self.optimizer, "optimizer", None)
        if kind not in ("adamw", "adamh"):
            raise TrainingConfigError(f"TrainLmConfig.optimizer.optimizer must be 'adamw' or "
                                      f"'adamh', got {kind!r}")
        shape = getattr(self.optimizer, "decay_shape", None)
        if shape not in DECAY_SHAPES:
            raise TrainingConfigError(f"TrainLmConfig.optimizer.decay_shape must be one of "
                                      f"{', '.join(map(repr, DECAY_SHAPES))}, got {shape!r}")
        try:  # a branch's parent, when known (at planning time), is checked here
            check_branch(self)
        except BranchError as e:
            raise TrainingConfigError(str(e)) from None
        if self.compilation_cache is not None and (
                not isinstance(self.compilation_cache, str) or not self.compilation_cache):
            raise TrainingConfigError(
                f"TrainLmConfig.compilation_cache must be a folder or None (no cache), got "
                f"{self.compilation_cache!r}")
        try:  # unknown trackers and refused settings fail here, before any step runs
            check_trackers(self.trackers)
        except TrackerConfigError as e:
            raise TrainingConfigError(str(e)) from None


def check_batch_layout(batch_size: int, devices: int, microbatch_size: int | None,
                       hosts: int = 1) -> int:
    """The micro-steps of one optimizer step, ``batch_size`` sequences split over ``hosts``
    hosts of ``devices`` devices each, every device taking ``microbatch_size`` of its
    sequences per micro-step (None: all of them, one micro-step). A layout that does not
    divide fails in one line naming the field and the fix.

        check_batch_layout(256, devices=8, microbatch_size=8)            # 4
        check_batch_layout(256, devices=8, microbatch_size=8, hosts=2)   # 2
    """
    if hosts < 1 or devices < 1:
        raise ValueError(f"check_batch_layout needs at least one host and one device, got "
                         f"hosts={hosts}, devices={devices}")
    shards = hosts * devices
    over = f"{hosts} hosts x {devices} devices" if hosts > 1 else f"{devices} device(s)"
    if batch_size % shards:
        raise TrainingConfigError(
            f"TrainLmConfig.batch_size={batch_size} does not split over {over}: give a "
            f"multiple of {shards}")
    per_device = batch_size // shards
    if microbatch_size is None:
        return 1
    if microbatch_size > per_device:
        raise TrainingConfigError(
            f"TrainLmConfig.microbatch_size={microbatch_size} is larger than the per-device "
            f"batch of {per_device} (batch_size={batch_size} over {over}): give at most "
            f"{per_device}, or None for the whole per-device batch")
    if per_device % microbatch_size:
        fits = max(d for d in range(1, microbatch_size + 1) if per_device % d == 0)
        raise TrainingConfigError(
            f"TrainLmConfig.batch_size={batch_size} is not divisible by {over} x "
            f"microbatch_size={microbatch_size}: give a microbatch_size that divides the "
            f"per-device batch of {per_device} (for example {fits})")
    return per_device // microbatch_size


def _check_data(cache_path: Any, mixture: tuple[Any, ...]) -> None:
    if cache_path is not None and mixture:
        raise TrainingConfigError(
            "TrainLmConfig has both cache_path and mixture: give cache_path for one cache, or "
            "mixture for weighted caches (set cache_path=None)")
    if cache_path is None and not mixture:
        raise TrainingConfigError(
            "TrainLmConfig has no training data: give cache_path (a tokenize step's output) "
            "or mixture (DataComponent(name, cache_path, weight), ...)")
    for where, component in _named_entries(mixture, "mixture", DataComponent,
                                           "DataComponent(name, cache_path, weight)"):
        weight = component.weight
        if (isinstance(weight, bool) or not isinstance(weight, int | float)
                or not math.isfinite(weight) or weight < 0):
            raise TrainingConfigError(
                f"{where}.weight of {component.name!r} must be a finite number >= 0, got "
                f"{weight!r}; weights are relative shares of the training tokens")
    if mixture and sum(c.weight for c in mixture) <= 0:
        raise TrainingConfigError(
            "TrainLmConfig.mixture weights sum to 0: give at least one component a positive "
            "weight")


def _check_validation(sets: tuple[Any, ...]) -> None:
    for where, entry in _named_entries(sets, "validation", ValidationSet,
                                       "ValidationSet(name, cache_path)"):
        if entry.name.startswith("macro"):
            raise TrainingConfigError(
                f"{where}.name {entry.name!r} reads as a macro average (eval/macro_loss, "
                "eval/macro_bpb): choose another label")
        if entry.cache_path is None:
            raise TrainingConfigError(f"{where} ({entry.name!r}) has no cache_path: give the "
                                      "token cache whose validation split it is")


def _check_tasks(tasks: list[Any], tokenizer: str | None) -> None:
    for where, task in _named_entries(tuple(tasks), "tasks", TaskConfig,
                                      "TaskConfig(name, path)"):
        if task.name == AVERAGES or "/" in task.name:
            raise TrainingConfigError(
                f"{where}.name {task.name!r} cannot name a task (lm_eval/averages/* are the "
                "means over tasks; a '/' splits metric names): choose another label")
        if not isinstance(task.path, str) or not task.path:
            raise TrainingConfigError(f"{where} ({task.name!r}) has no path: give the task's "
                                      "JSON-lines file")
    if tasks and tokenizer is None:
        raise TrainingConfigError("TrainLmConfig.tasks need TrainLmConfig.tokenizer: give the "
                                  "tokenizer the caches were built with, to encode the items")


def _named_entries(entries: tuple[Any, ...], field: str, cls: type, spelling: str
                   ) -> list[tuple[str, Any]]:
    """``(where, entry)`` for each entry, once each is of ``cls`` with its own label."""
    seen: set[str] = set()
    out = []
    for i, entry in enumerate(entries):
        where = f"TrainLmConfig.{field}[{i}]"
        if not isinstance(entry, cls):
            raise TrainingConfigError(f"{where} must be a {spelling}, got "
                                      f"{type(entry).__name__}")
        name = entry.name
        if not isinstance(name, str) or not name.strip() or name != name.strip():
            raise TrainingConfigError(f"{where}.name must be a non-empty label without "
                                      f"surrounding spaces, got {name!r}")
        if name in seen:
            raise TrainingConfigError(f"TrainLmConfig.{field} names {name!r} twice: give "
                                      "each entry its own name")
        seen.add(name)
        out.append((where, entry))
    return out
