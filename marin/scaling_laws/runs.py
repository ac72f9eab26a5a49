"""From a candidate to a training run: the one builder the sweep, the prediction and
``train_step`` share.

    config = training_config(candidate, cache_path, {"compute_dtype": "float32"})
    config = training_config(candidate, (DataComponent("plays", plays, 0.7),
                                         DataComponent("docs", docs, 0.3)), options)
    step = train_step("train/tiny", tokenized, candidate, eval_every=50)   # resumable

The candidate fixes the model, batch size, steps, optimizer and hardware preset, and the
micro-batch its memory estimate planned (``microbatch_size``, left None when the whole
per-device batch fits; an option may set another); ``data`` is
a token cache (a path or a step's placeholder) or a mixture of weighted caches; ``options``
are further ``TrainLmConfig`` fields, checked by name when the config is built (at planning
time), so a misspelled one fails in one line naming it and the closest field. Building a
config imports no JAX.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from typing import Any

from marin.execution import (
    ComputeEstimate,
    ExecutorStep,
    StepResources,
    output_path_of,
    this_output_path,
)
from marin.scaling_laws.candidates import CandidateConfig
from marin.scaling_laws.train_options import FROM_CANDIDATE, TrainOptionsError
from marin.training.config import (
    DataComponent,
    TrainLmConfig,
    check_batch_layout,
)

__all__ = ["TrainOptionsError", "check_train_options", "resources_of", "train_step",
           "training_config"]


def check_train_options(options: Mapping[str, Any] | None, where: str = "train_options"
                        ) -> dict[str, Any]:
    """``options`` as a dict, every key a ``TrainLmConfig`` field the candidate leaves open;
    an error names the key and the closest field."""
    options = dict(options or {})
    fields = [f.name for f in dataclasses.fields(TrainLmConfig)]
    for key in options:
        if key in FROM_CANDIDATE:
            raise TrainOptionsError(f"{where}[{key!r}] is set by the candidate and the data; "
                                    "leave it out (change the heuristic or the corpus instead)")
        if key not in fields:
            close = difflib.get_close_matches(key, fields, n=1)
            open_fields = sorted(set(fields) - set(FROM_CANDIDATE))
            hint = f"did you mean {close[0]!r}?" if close else \
                f"TrainLmConfig's fields are {', '.join(open_fields)}"
            raise TrainOptionsError(f"{where}[{key!r}] is not a TrainLmConfig field; {hint}")
    return options


def training_config(candidate: CandidateConfig, data: Any,
                    options: Mapping[str, Any] | None = None,
                    output_path: Any = None) -> TrainLmConfig:
    """The ``TrainLmConfig`` of ``candidate`` on ``data`` (a cache, or a tuple of
    ``DataComponent``) with ``options``; ``output_path`` defaults to the step's own."""
    options = check_train_options(options)
    if isinstance(data, tuple) and data and all(isinstance(c, DataComponent) for c in data):
        source: dict[str, Any] = {"mixture": data}
    else:
        source = {"cache_path": data}
    planned = {"hardware": candidate.hardware} if candidate.hardware is not None else {}
    if candidate.microbatch_size * candidate.devices < candidate.batch_size:
        planned["microbatch_size"] = candidate.microbatch_size  # accumulation was planned
    config = TrainLmConfig(**source, model=candidate.model_config,
                           batch_size=candidate.batch_size, train_steps=candidate.train_steps,
                           optimizer=candidate.optimizer,
                           output_path=this_output_path() if output_path is None
                           else output_path, **{**planned, **options})
    if candidate.hardware is not None:  # the run asks for the devices it was planned on
        check_batch_layout(config.batch_size, candidate.devices, config.microbatch_size)
    return config


def resources_of(candidate: CandidateConfig) -> StepResources:
    """The accelerators a candidate was planned on (none without a preset, or on ``cpu``)."""
    if candidate.hardware is None:
        return StepResources()
    from marin.hardware import get_preset

    platform = get_preset(candidate.hardware).platform
    if platform == "gpu":
        return StepResources(gpus=candidate.devices)
    if platform == "tpu":
        return StepResources(tpu=f"{candidate.hardware.removeprefix('tpu-')}-{candidate.devices}")
    return StepResources()


def estimate_of(candidate: CandidateConfig) -> ComputeEstimate:
    return ComputeEstimate(candidate.flops, candidate.estimated_device_hours or 0.0)


def describe(candidate: CandidateConfig) -> str:
    return (f"{candidate.params:.3g} params, {candidate.tokens:.3g} tokens, "
            f"{candidate.flops:.3g} FLOPs")


def train_step(name: str, tokenized: ExecutorStep, candidate: CandidateConfig,
               **overrides: Any) -> ExecutorStep:
    """The training step of one candidate on a tokenize step's cache; resumable, as every
    ``train_lm`` step: a new attempt resumes from the last checkpoint. ``overrides`` are
    ``TrainLmConfig`` fields, ``train_steps`` and ``batch_size`` included."""
    from marin.training.trainer import train_lm

    # By hand, a shorter or smaller run of a candidate is a common wish (a smoke test, a
    # profile); a study's train_options may not change what its candidates are.
    shape = {k: overrides.pop(k) for k in ("train_steps", "batch_size") if k in overrides}
    config = dataclasses.replace(training_config(candidate, output_path_of(tokenized),
                                                 overrides), **shape)
    return ExecutorStep(name, train_lm, config, description=describe(candidate),
                        resources=resources_of(candidate), estimate=estimate_of(candidate))
