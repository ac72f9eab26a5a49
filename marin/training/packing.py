"""Packed runs: several training runs of one shape stepping together as one program.

    outcomes = pack_train([seed_0, seed_1, lr_high])   # TrainLmConfigs of one PackShape
    [o.summary for o in outcomes]                      # a RunSummary each, or None
    [o.error for o in outcomes]                        # None, or why that member stopped
    pack_shape(config)                                 # what members must share
                                                       # (marin.training.pack_steps)

Runs whose ``PackShape`` is equal (model, batch size, sequence length, step count, compute
dtype, gradient accumulation and the optimizer's program-shaping choices) train in one
process with one compiled update: the trainer's own update
(``marin.training.state.make_traced_step``) vmapped over the members, each with its own
parameters, optimizer state, hyperparameters (learning rates, weight decay, ... are traced
inputs, see ``marin.training.optimizer``) and seed. Each member keeps what a run alone has
(``marin.training.trainer``): its data stream (cache or mixture, in its seed's order), its
evaluations, checkpoints, ``metrics.jsonl`` and ``summary.json`` in its own output folder,
in the same formats, so a member's folder reads (and resumes alone) like a run trained alone.

A member whose loss stops being finite fails alone: its outcome holds the
``TrainingDivergedError`` a run alone raises, its metrics stop at its last good step and it
writes no summary; it keeps its slot in the program (its lanes compute on, unread) and the
others go on. A pack resumes from its members' latest checkpoint when they all stand at the
same step. Memory: K members hold K times a member's parameters, optimizer state and
activations; a pack that does not fit on one device of the members' ``hardware`` is refused
before anything trains (``marin.training.pack_steps``). Packs run on one device of one
host.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from marin.processing.tokenize.loader import DataLoader
from marin.services.log_service.handler import install_from_env
from marin.training.compilation import use_compilation_cache
from marin.training.config import (
    TrainingConfigError,
    TrainingDivergedError,
    TrainingOutOfMemoryError,
    TrainLmConfig,
    compilation_cache_folder,
)
from marin.training.data import training_data
from marin.training.optimizer import Optimizer
from marin.training.pack_steps import PackShape, check_pack_fits, pack_shape
from marin.training.state import CompileClock, TrainerState, make_packed_update_fn
from marin.training.summary import RunSummary, write_summary
from marin.training.trainer import _check_config, _Run, _summary, explain_out_of_memory

__all__ = ["MemberOutcome", "PackShape", "pack_shape", "pack_train"]


@dataclass(frozen=True)
class MemberOutcome:
    """How one member of a pack ended: its ``summary`` (also in its ``summary.json``), or
    the ``error`` that stopped it alone."""

    output_path: str
    summary: RunSummary | None = None
    error: TrainingDivergedError | None = None


def pack_train(configs: Sequence[TrainLmConfig]) -> list[MemberOutcome]:
    """Train ``configs`` (runs of one ``PackShape``) as one pack; one outcome each, in order.

    Raises ``TrainingConfigError`` (nothing trained) when they differ in shape, share an
    output folder, stand at different checkpointed steps, do not fit on one device
    together, or there is more than one device.
    """
    configs = list(configs)
    _check_pack(configs)
    install_from_env()
    use_compilation_cache(compilation_cache_folder(configs[0].compilation_cache))
    datas = [training_data(config) for config in configs]  # each cache checked first
    runs = [_Run(config) for config in configs]
    outcomes: list[MemberOutcome] = []
    try:
        outcomes = _Pack(configs, runs).train(datas)
    finally:  # each last save is committed before its member counts as done
        summaries = {o.output_path: o.summary for o in outcomes}
        for config, run in zip(configs, runs, strict=True):
            run.checkpoints.close()
            summary = summaries.get(config.output_path)
            run.metrics.trackers.close(summary.to_json() if summary is not None else {})
    for outcome in outcomes:
        if outcome.summary is not None:
            write_summary(outcome.output_path, outcome.summary)
    return outcomes


def _check_pack(configs: list[TrainLmConfig]) -> None:
    if not configs:
        raise TrainingConfigError("pack_train needs at least one TrainLmConfig")
    for i, config in enumerate(configs):
        _check_config(config)
        if config.profile_steps is not None:
            raise TrainingConfigError(
                f"pack member {i} ({config.output_path}) sets TrainLmConfig.profile_steps: a "
                "pack profiles no member; unset it, or train that run alone to profile it")
    first = pack_shape(configs[0])
    for i, config in enumerate(configs[1:], start=1):
        shape = pack_shape(config)
        if shape != first:
            field = next(f.name for f in dataclasses.fields(PackShape)
                         if getattr(shape, f.name) != getattr(first, f.name))
            raise TrainingConfigError(
                f"pack member {i} ({config.output_path}) differs from member 0 in {field}: "
                "only runs of one PackShape pack; train it in another pack or alone")
    paths = [c.output_path for c in configs]
    if len(set(paths)) != len(paths):
        raise TrainingConfigError(f"pack members share an output_path ({paths}): give each "
                                  "its own")
    check_pack_fits(configs)
    if jax.device_count() > 1:
        raise TrainingConfigError(
            f"a pack runs on one device and this process sees {jax.device_count()}: limit "
            "it to one (for example CUDA_VISIBLE_DEVICES=0), or train the runs apart")


class _Pack:
    """The members' runs, their stacked state and the loop over steps."""

    def __init__(self, configs: list[TrainLmConfig], runs: list[_Run]):
        self.configs, self.runs = configs, runs
        config = configs[0]
        params = eqx.filter(runs[0].model, eqx.is_inexact_array)
        optimizer = Optimizer.of(config.optimizer, config.train_steps, params)
        self.update = make_packed_update_fn(optimizer, jnp.dtype(config.compute_dtype),
                                            pack_shape(config).micro_steps)
        self.errors: dict[int, TrainingDivergedError] = {}
        self.last_loss = [math.nan] * len(runs)

    def train(self, datas: list[Any]) -> list[MemberOutcome]:
        states, starts = zip(*(run.restore_or_init() for run in self.runs), strict=True)
        if len(set(starts)) > 1:
            at = ", ".join(f"{c.output_path}: step {s}" for c, s in zip(self.configs, starts,
                                                                        strict=True))
            raise TrainingConfigError(
                f"pack members resume from different checkpointed steps ({at}); train them "
                "apart, or delete the newer checkpoints so that they stand at one step")
        state = jax.tree.map(lambda *xs: jnp.stack(xs), *states)
        state = self._steps(state, datas, starts[0])
        outcomes = []
        for i, (config, run) in enumerate(zip(self.configs, self.runs, strict=True)):
            outcomes.append(self._finish(i, config, run, _Member(state, i), datas[i]))
        return outcomes

    def _steps(self, state: TrainerState, datas: list[Any], start: int) -> TrainerState:
        batches = [iter(DataLoader(data, config.batch_size, seed=config.seed,
                                   start_step=start))
                   for data, config in zip(datas, self.configs, strict=True)]
        for step in range(start, self.configs[0].train_steps):
            tokens = jnp.asarray(np.stack([next(b)[1] for b in batches]))
            with CompileClock() as clock:
                try:
                    state, out = self.update(state, tokens)
                    out = jax.device_get(out)
                except jax.errors.JaxRuntimeError as e:
                    oom = explain_out_of_memory(e, self.configs[0].batch_size, 1)
                    if oom is None:
                        raise
                    raise TrainingOutOfMemoryError(
                        f"a pack of {len(self.runs)} members ran {oom}; or pack fewer "
                        "members (memory is members x one run's)") from e
            for i, run in enumerate(self.runs):
                if i in self.errors:
                    continue
                loss = float(out["loss"][i])
                if not math.isfinite(loss):
                    self._fail(i, run, loss, step)
                    continue
                self.last_loss[i] = loss
                record = run.step_record(step, loss, float(out["learning_rate"][i]),
                                         float(out["grad_norm"][i]), clock)
                member = _Member(state, i)
                for hook in run.hooks:
                    hook(step + 1, member, record)
            if len(self.errors) == len(self.runs):
                break  # every member has failed
        return state

    def _fail(self, i: int, run: _Run, loss: float, step: int) -> None:
        try:
            run._diverged(loss, step)
        except TrainingDivergedError as e:
            self.errors[i] = e
        run.metrics.flush()  # its steps up to the last good one

    def _finish(self, i: int, config: TrainLmConfig, run: _Run, member: _Member,
                data: Any) -> MemberOutcome:
        if i in self.errors:
            return MemberOutcome(config.output_path, error=self.errors[i])
        final = run.finish(member)
        return MemberOutcome(config.output_path, _summary(
            config, self.last_loss[i], final, run.metrics, data, run.validation, run.tasks))


class _Member:
    """Member ``index`` of a stacked state, read as a ``TrainerState`` by the hooks; a
    field is sliced out only when a hook reads it."""

    def __init__(self, state: TrainerState, index: int):
        self._state, self._index = state, index

    def _take(self, tree: Any) -> Any:
        return jax.tree.map(lambda x: x[self._index], tree)

    @property
    def step(self) -> jax.Array:
        return self._state.step[self._index]

    @property
    def model(self) -> Any:
        return self._take(self._state.model)

    @property
    def opt_state(self) -> Any:
        return self._take(self._state.opt_state)

    @property
    def hyper(self) -> Any:
        return self._take(self._state.hyper)
