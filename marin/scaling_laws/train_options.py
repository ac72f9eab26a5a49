"""The ``TrainLmConfig`` fields a study sets on every one of its runs, as one typed value.

    options = TrainOptions(compute_dtype="float32", eval_batches=2)
    options = TrainOptions.of({"compute_dtype": "float32", "eval_batches": 2})  # the same
    options.as_dict()                  # {"compute_dtype": "float32", "eval_batches": 2}
    isoflop_study(..., train_options=options)   # a mapping is converted by ``of``

A field left unset keeps ``TrainLmConfig``'s default; ``as_dict`` gives the fields that were
set, and only those, so a study's run configs (and every step key) are the ones a mapping
of the same fields gave. The candidate sets the model, batch, steps, optimizer and the
output; the study sets the data and the validation sets: none of them is an option here.
A bad field is refused when the value is built, in one line naming it and the fix.
"""

from __future__ import annotations

import dataclasses
import difflib
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from marin.evaluation.tasks import TaskConfig
from marin.training.config import TrackerConfig, TrainingConfigError, TrainLmConfig

__all__ = ["UNSET", "TrainOptions", "TrainOptionsError"]


class TrainOptionsError(TrainingConfigError):
    """A train option names no ``TrainLmConfig`` field, or one the candidate sets."""


class _Unset:
    """The default of every ``TrainOptions`` field: the run keeps ``TrainLmConfig``'s."""

    def __repr__(self) -> str:
        return "UNSET"


#: a ``TrainOptions`` field not set (the ``TrainLmConfig`` default applies)
UNSET: Any = _Unset()

#: fields the candidate and the data set, never an option
FROM_CANDIDATE = ("cache_path", "mixture", "model", "batch_size", "train_steps", "optimizer",
                  "output_path")
#: fields the study sets from its own arguments
FROM_STUDY = {"validation": "use isoflop_study(validation=...) to name the validation sets",
              "init_from": "a run branches from another's checkpoint where the study plans "
                           "it (a cooldown of a stable run), not for every run",
              "checkpoint_at": "a ladder's stable run keeps its branch points; give "
                               "checkpoint_every for checkpoints of every run"}


@dataclass(frozen=True)
class TrainOptions:
    """``TrainLmConfig`` fields for every run of a study (see ``TrainLmConfig`` for each);
    a field left ``UNSET`` keeps its default there.

    Attributes:
        seed: the run's seed (a replicate adds its index to it).
        tokenizer: the tokenizer recorded with the run.
        compute_dtype: ``float32`` or ``bfloat16``.
        eval_batches: batches per evaluation.
        eval_every: steps between evaluations (default: the study's ``eval_points``).
        checkpoint_every, checkpoint_keep, checkpoint_keep_every, async_checkpoints:
            checkpointing.
        log_every: steps between logged metrics.
        hardware: the hardware preset (the candidate's, when it names one).
        profile_steps: ``(first, last)`` steps to profile.
        trackers: where metrics go besides ``metrics.jsonl``.
        compilation_cache: JAX's persistent compilation cache folder.
        microbatch_size: sequences per device per micro-step.
        tasks: downstream tasks scored at every evaluation (``marin.evaluation``).
    """

    seed: int = UNSET
    tokenizer: str | None = UNSET
    compute_dtype: str = UNSET
    eval_batches: int = UNSET
    eval_every: int = UNSET
    checkpoint_every: int = UNSET
    checkpoint_keep: int = UNSET
    checkpoint_keep_every: int = UNSET
    async_checkpoints: bool = UNSET
    log_every: int = UNSET
    hardware: str = UNSET
    profile_steps: tuple[int, int] | None = UNSET
    trackers: list[TrackerConfig] = UNSET
    compilation_cache: str | None = UNSET
    microbatch_size: int | None = UNSET
    tasks: list[TaskConfig] = UNSET

    def __post_init__(self) -> None:
        for name, value in self.as_dict().items():
            _check_type(name, value)

    @classmethod
    def of(cls, options: TrainOptions | Mapping[str, Any] | None,
           where: str = "train_options") -> TrainOptions:
        """``options`` as a ``TrainOptions``; a key that is no field is refused naming it
        and the closest field (or who sets it)."""
        if isinstance(options, TrainOptions):
            return options
        if options is not None and not isinstance(options, Mapping):
            raise TrainOptionsError(f"{where} is a {type(options).__name__}; give a "
                                    "TrainOptions (or a mapping of its fields)")
        options = dict(options or {})
        for key in options:
            _check_key(key, where)
        return cls(**options)

    def as_dict(self) -> dict[str, Any]:
        """The fields that were set, in field order."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if getattr(self, f.name) is not UNSET}


def _check_key(key: str, where: str) -> None:
    if key in FROM_CANDIDATE:
        raise TrainOptionsError(f"{where}[{key!r}] is set by the candidate and the data; "
                                "leave it out (change the heuristic or the corpus instead)")
    if key in FROM_STUDY:
        raise TrainOptionsError(f"{where}[{key!r}] is set by the study; {FROM_STUDY[key]}")
    fields = [f.name for f in dataclasses.fields(TrainOptions)]
    if key not in fields:
        close = difflib.get_close_matches(key, fields, n=1)
        hint = f"did you mean {close[0]!r}?" if close else \
            f"TrainLmConfig's fields are {', '.join(sorted(fields))}"
        raise TrainOptionsError(f"{where}[{key!r}] is not a TrainLmConfig field; {hint}")


_SIMPLE = {int: "an integer", str: "a string", bool: "true or false"}


def _check_type(name: str, value: Any) -> None:
    """A set field of a simple type (int, str, bool, or None where the field allows it)
    holds one; others are checked by ``TrainLmConfig`` when a run's config is built."""
    declared = typing.get_type_hints(TrainOptions)[name]
    allowed = list(typing.get_args(declared) or (declared,))
    if value is None and type(None) in allowed:
        return
    simple = [a for a in allowed if a in _SIMPLE]
    if not simple or len(simple) + (type(None) in allowed) < len(allowed):
        return
    ok = any(isinstance(value, a) and (a is bool or not isinstance(value, bool))
             for a in simple)
    if not ok:
        want = " or ".join(_SIMPLE[a] for a in simple)
        raise TrainOptionsError(f"train_options.{name}={value!r} must be {want}; give e.g. "
                                f"{name}={_example(name, simple[0])!r}")



def _example(name: str, kind: type) -> Any:
    """The field's ``TrainLmConfig`` default when it is of ``kind``, else a value of it."""
    default = {f.name: f.default for f in dataclasses.fields(TrainLmConfig)}.get(name)
    if isinstance(default, kind) and not (kind is int and isinstance(default, bool)):
        return default
    return {int: 1, str: "...", bool: True}[kind]
