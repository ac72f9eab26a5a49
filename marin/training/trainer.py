"""Training a language model on a token cache: the step every IsoFLOP candidate runs.

    ExecutorStep("train/tiny", train_lm, TrainLmConfig(cache_path=output_path_of(tokenized),
                 model=TransformerConfig(...), batch_size=8, train_steps=200,
                 optimizer=OptimizerHyperparameters(...)))
    # one IsoFLOP candidate: marin.scaling_laws.runs.train_step(name, tokenized, candidate)

Outputs under the step's path: ``metrics.jsonl`` (per step, in Levanter's names, see
``marin.training.metric_names``: ``train/loss``, ``optim/learning_rate``,
``throughput/tokens_per_second``, ``throughput/mfu`` against the hardware preset's peak,
step time, total tokens and GFLOPs, wall-clock time, gradient norm; ``eval/loss`` and
``eval/bpb`` at intervals, and with named validation sets ``eval/<set>/loss``,
``eval/<set>/bpb`` and their macro averages, see ``marin.training.evaluation``; with
``tasks``, ``lm_eval/<task>/acc``, ``acc_norm``, ``bpb`` and ``lm_eval/averages/*``, see
``marin.evaluation``),
``summary.json`` (a ``RunSummary``: params, tokens, FLOPs, final train and eval figures,
tokens per mixture component: what the scaling fits read), ``phases.json`` (where the
run's time went, per phase: ``marin.execution.phases``), ``checkpoints/`` (asynchronous,
sharded: see ``marin.training.checkpoint``), whatever the run's ``trackers`` write
(``marin.trackers``) and, when asked, a JAX profile of a step range.

A step with ``StepResources(hosts=N)`` trains in N processes (``marin.training.distributed``):
one mesh over every host's devices; each process reads only its slice of every global batch
and writes only its shards of each checkpoint; the first process alone writes
``metrics.jsonl``, the trackers and ``summary.json``, and a profile is one folder per host
(``profile/host-<i>``).

A step's ``step_time`` (and so its tokens/s and MFU) leaves out the time JAX spent tracing
and compiling during it, recorded as ``compile_time`` on the steps that compiled (the first
step of a run or of a resumed run).

The data is one token cache or a weighted mixture (``marin.training.data``,
``marin.processing.tokenize.loader``). The loop is short: each step runs the jitted update
on the ``TrainerState`` (``marin.training.state``: step, model and optimizer state, donated
whole), then the hooks
in order (``marin.training.hooks``): evaluation every ``eval_every`` steps (the validation
sets, then the downstream tasks of ``marin.evaluation``), the metrics log,
a checkpoint every ``checkpoint_every`` steps; the profiler wraps the steps it captures.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from marin.execution import resumable
from marin.execution.packs import packable
from marin.execution.phases import PHASES, Laps, phase, recording
from marin.models.transformer import TransformerLM
from marin.processing.tokenize.loader import DataLoader, MixtureDataset, TokenCacheDataset
from marin.services.log_service.handler import install_from_env
from marin.storage.files import atomic_write, join_url
from marin.training import metric_names as names
from marin.training.branching import wait_for_branch_point
from marin.training.checkpoint import Checkpoints, read_checkpoint, step_folder
from marin.training.compilation import use_compilation_cache
from marin.training.config import (
    DataComponent,
    TrainingConfigError,
    TrainingDivergedError,
    TrainingOutOfMemoryError,
    TrainLmConfig,
    ValidationSet,
    check_batch_layout,
    compilation_cache_folder,
)
from marin.training.data import task_suite, training_data, validation_sets
from marin.training.distributed import ONE_HOST, Hosts, start_distributed
from marin.training.evaluation import Validation
from marin.training.hooks import Every, Hook, MetricsLog, Profiler, open_trackers, progress_bar
from marin.training.optimizer import Optimizer
from marin.training.pack_steps import TRAIN_PACK
from marin.training.sharding import Sharding as _Sharding
from marin.training.state import (
    CompileClock,
    TrainerState,
    make_eval_fn,
    make_traced_update_fn,
)
from marin.training.summary import EvalFigures, RunSummary, task_figures, write_summary

__all__ = ["DataComponent", "RunSummary", "TrainLmConfig", "TrainingConfigError",
           "TrainingDivergedError", "TrainingOutOfMemoryError", "ValidationSet",
           "explain_out_of_memory", "train_lm"]

logger = logging.getLogger("marin.training")


def explain_out_of_memory(error: Exception, batch_size: int, devices: int
                          ) -> TrainingOutOfMemoryError | None:
    """A clear error for XLA's RESOURCE_EXHAUSTED, or None for any other error."""
    text = str(error)
    if "RESOURCE_EXHAUSTED" not in text and "Out of memory" not in text:
        return None
    first = text.strip().splitlines()[0][:200]
    return TrainingOutOfMemoryError(
        f"out of accelerator memory with TrainLmConfig.batch_size={batch_size} on {devices} "
        f"device(s) ({first}). Use a smaller batch size (for example {max(1, batch_size // 2)}"
        "), gradient accumulation (a smaller TrainLmConfig.microbatch_size), more devices, or "
        "a smaller model; `marin scaling candidates --hardware ...` "
        "estimates the memory of each candidate")


@resumable  # its steps resume by default: a new attempt keeps the published checkpoints
@packable(TRAIN_PACK)  # with --pack N, ready steps of one PackShape train as one pack
def train_lm(config: TrainLmConfig) -> RunSummary:
    """Train, checkpoint, evaluate; resume from the latest complete checkpoint."""
    with recording() as clock:  # the run's phases, into phases.json
        laps = Laps()
        try:
            summary, primary = _train(config, laps)
        finally:
            laps.end("summary")
    if primary:
        with atomic_write(join_url(config.output_path, PHASES), "wb") as f:
            f.write(clock.times().encode())
    return summary


def _train(config: TrainLmConfig, laps: Laps) -> tuple[RunSummary, bool]:
    install_from_env()  # logs and metrics to the log service, when $MARIN_LOGGER is set
    _check_config(config)
    hosts = start_distributed()  # one process of several in a multi-host step
    use_compilation_cache(compilation_cache_folder(config.compilation_cache))
    laps.lap("setup")
    data = training_data(config)
    laps.lap("data_open")
    run = _Run(config, hosts)
    summary: RunSummary | None = None
    try:
        state, start = run.restore_or_init()
        laps.lap("restore_or_init")
        state, last_loss = run.train(state, data, start)
        laps.lap("loop")  # what the steps' and hooks' own phases leave out
        final = run.finish(state)
        summary = _summary(config, last_loss, final, run.metrics, data, run.validation,
                           run.tasks)
    finally:
        laps.lap("summary")
        run.checkpoints.close()  # the last save is committed before the step counts as done
        laps.lap("checkpoint")
        run.metrics.trackers.close(summary.to_json() if summary is not None else {})
        laps.lap("trackers")
    if hosts.primary:
        write_summary(config.output_path, summary)
    return summary, hosts.primary


class _Run:
    """One run: its optimizer, sharding, checkpoints and hooks, and the loop over steps."""

    def __init__(self, config: TrainLmConfig, hosts: Hosts = ONE_HOST):
        self.config = config
        self.hosts = hosts
        laps = Laps()
        dtype = jnp.dtype(config.compute_dtype)
        # first, before any work: the micro-steps of gradient accumulation, for the devices
        # of every host (a batch they cannot split is refused in one line)
        micro_steps = check_batch_layout(config.batch_size, jax.local_device_count(),
                                         config.microbatch_size, hosts=hosts.count)
        self.model = TransformerLM.init(config.model, key=jax.random.PRNGKey(config.seed))
        laps.lap("model_init")
        # hyperparameters that change no shape are inputs of the update, carried by the
        # state: another learning rate or run length reuses the compiled program
        # a branch's first step: its schedule is the decay from there (0: from scratch)
        self.first_step = config.init_from.step if config.init_from is not None else 0
        decay_from = self.first_step if config.init_from is not None else None
        optimizer = Optimizer.of(config.optimizer, config.train_steps,
                                 eqx.filter(self.model, eqx.is_inexact_array), decay_from)
        self.hyper = optimizer.values(config.optimizer, config.train_steps, decay_from)
        self.tx = optimizer.transformation(self.hyper)
        self.update = make_traced_update_fn(optimizer, dtype, micro_steps)
        self.sharding = _Sharding(config.batch_size, hosts)
        laps.lap("optimizer")
        # a bad task file fails here, before the trackers start (None: no tasks)
        self.tasks = task_suite(config, dtype, self.sharding.place_eval)
        laps.lap("evaluation_open")
        trackers = open_trackers(config) if hosts.primary else None
        laps.lap("trackers")
        self.metrics = MetricsLog(join_url(config.output_path, "metrics.jsonl"),
                                  config.log_every, trackers, primary=hosts.primary)
        laps.lap("metrics")
        sets = validation_sets(config)
        self.validation = Validation(sets, make_eval_fn(dtype), config.batch_size,
                                     config.eval_batches, self.sharding.place_eval
                                     ) if sets else None
        laps.lap("evaluation_open")
        profile = join_url(config.output_path, "profile")
        if hosts.count > 1:  # each host's profile apart: one machine may hold several
            profile = join_url(profile, f"host-{hosts.index}")
        self.profiler = Profiler(profile, config.profile_steps)
        self.flops_per_step = config.model.training_flops_per_token() * config.batch_size \
            * config.model.seq_len
        self.peak = _peak_flops(config.hardware) * jax.device_count()
        self.checkpoints = Checkpoints(join_url(config.output_path, "checkpoints"),
                                       keep_last=config.checkpoint_keep,
                                       keep_every=config.checkpoint_keep_every,
                                       keep_at=config.checkpoint_at,
                                       asynchronous=config.async_checkpoints)
        laps.lap("checkpoint")
        end = config.train_steps
        self.hooks: list[Hook] = [_timed("metrics", self.metrics.hook),
                                  Every(config.checkpoint_every, self._checkpoint, until=end,
                                        at=frozenset(config.checkpoint_at))]
        for scorer in (self.tasks, self.validation):  # evaluation adds to the record stored
            if scorer is not None:
                self.hooks.insert(0, Every(config.eval_every, _timed("evaluation", scorer.hook),
                                           until=end))
        laps.end("build")

    def restore_or_init(self) -> tuple[TrainerState, int]:
        """The state at the latest complete checkpoint (a branch without one of its own:
        its parent's at the branch point), or a fresh one; and its step."""
        state = TrainerState.init(self.model, self.tx, hyper=self.hyper)
        state = self.sharding.place_state(state)
        latest = self.checkpoints.latest_step()
        branch = self.config.init_from
        if latest is None and branch is None:
            self.metrics.truncate(-1)  # rows an attempt that saved no checkpoint left
            self.metrics.add({"step": 0, names.PARAMETER_COUNT: self.config.model.num_params()})
            return state, 0
        # On disk: (model, opt_state) and, in the metadata, the data position.
        like = (state.model, state.opt_state)
        if latest is not None:
            (model, opt_state), meta = self.checkpoints.restore(latest, like)
            source = step_folder(self.checkpoints.root, latest)
        else:  # read only, once the parent has published it (marin.training.branching)
            root = wait_for_branch_point(branch)
            (model, opt_state), meta = read_checkpoint(root, branch.step, like)
            source = step_folder(root, branch.step)
            self.metrics.add({"step": branch.step,
                              names.PARAMETER_COUNT: self.config.model.num_params()})
        start = int(meta["data_step"])
        self.metrics.truncate(start)
        logger.info("%s from step %d (checkpoint %s)", "resumed" if latest is not None else
                    "branched", start, source)
        step = jax.device_put(jnp.asarray(start, jnp.int32), state.step.sharding)
        # Every array committed to its devices, as the update's outputs are: a state mixing
        # committed arrays (restored) with uncommitted ones would compile the update twice.
        return jax.tree.map(_committed, TrainerState(step, model, opt_state, state.hyper)), start

    def train(self, state: TrainerState, data: TokenCacheDataset | MixtureDataset, start: int
              ) -> tuple[TrainerState, float]:
        config = self.config
        hosts = self.hosts  # each host reads its own slice of every global batch
        batches = iter(DataLoader(data, config.batch_size, seed=config.seed, start_step=start,
                                  host_index=hosts.index, host_count=hosts.count))
        progress = progress_bar(config.train_steps, start) if hosts.primary else \
            (lambda step, loss: None)
        last_loss = math.nan
        for step in range(start, config.train_steps):  # the first step compiles (or loads)
            with phase("first_step" if step == start else "steps"), self.profiler.around(step):
                _, batch = next(batches)
                state, record = self._step(state, batch, step)
            last_loss = record[names.TRAIN_LOSS]
            for hook in self.hooks:
                hook(step + 1, state, record)
            progress(step + 1, last_loss)
        progress(None, None)
        return state, last_loss

    def finish(self, state: TrainerState) -> dict[str, float]:
        """The final evaluation and checkpoint; returns the evaluation's figures."""
        final: dict[str, Any] = {}
        for scorer in (self.validation, self.tasks):
            if scorer is not None:
                with phase("evaluation"):
                    final.update(scorer.evaluate(state.model))
        if final:
            self.metrics.add({"step": self.config.train_steps, **final})
        self._checkpoint(self.config.train_steps, state, {})
        return final

    def _step(self, state: TrainerState, batch: np.ndarray, step: int
              ) -> tuple[TrainerState, dict[str, Any]]:
        """One update, timed without the time JAX spent compiling it."""
        config = self.config
        with CompileClock() as clock:
            try:
                state, out = self.update(state, self.sharding.place_batch(batch))
            except jax.errors.JaxRuntimeError as e:
                oom = explain_out_of_memory(e, config.batch_size, self.sharding.count)
                if oom is None:
                    raise
                raise oom from e
            loss = float(out["loss"])
        if not math.isfinite(loss):
            self._diverged(loss, step)
        return state, self.step_record(step, loss, float(out["learning_rate"]),
                                       float(out["grad_norm"]), clock)

    def step_record(self, step: int, loss: float, learning_rate: float, grad_norm: float,
                    clock: CompileClock) -> dict[str, Any]:
        """The metrics of step ``step`` (0-based) whose update ``clock`` timed."""
        config = self.config
        elapsed = max(clock.elapsed - clock.seconds, 1e-9)
        tokens = config.batch_size * config.model.seq_len
        record = {"step": step + 1, names.TRAIN_LOSS: loss,
                  names.LEARNING_RATE: learning_rate,
                  names.GRAD_NORM: grad_norm, names.STEP_TIME: elapsed,
                  names.TOKENS_PER_SECOND: tokens / elapsed,
                  names.MFU: self.flops_per_step / elapsed / self.peak,
                  names.TOTAL_TOKENS: tokens * (step + 1),
                  names.TOTAL_GFLOPS: self.flops_per_step * (step + 1 - self.first_step) / 1e9,
                  "wall_time": time.time()}
        if clock.seconds:
            record["compile_time"] = clock.seconds
        return record

    def _checkpoint(self, done: int, state: TrainerState, record: dict[str, Any]) -> None:
        with phase("metrics"):
            self.metrics.flush()  # first: a complete checkpoint implies its metrics are stored
        with phase("checkpoint"):
            self.checkpoints.save(done, (state.model, state.opt_state), {"data_step": done})

    def _diverged(self, loss: float, step: int) -> None:
        self.checkpoints.wait()
        latest = self.checkpoints.latest_step()
        config = self.config
        raise TrainingDivergedError(
            f"the loss became {loss} at step {step}; the last good checkpoint is "
            f"{'none' if latest is None else step_folder(self.checkpoints.root, latest)} "
            f"(kept). Lower optimizer.learning_rate (now {config.optimizer.learning_rate:g}) "
            "or max_grad_norm, or raise warmup_fraction")


def _timed(name: str, hook: Hook) -> Hook:
    """``hook``, its time recorded as phase ``name``."""

    def timed(done: int, state: Any, record: dict[str, Any]) -> None:
        with phase(name):
            hook(done, state, record)

    return timed


def _committed(leaf: Any) -> Any:
    return jax.device_put(leaf, leaf.sharding) if isinstance(leaf, jax.Array) else leaf


def _check_config(config: TrainLmConfig) -> None:
    paths = [config.output_path, config.cache_path] if config.cache_path is not None else \
        [config.output_path]
    paths += [c.cache_path for c in config.mixture] + [v.cache_path for v in config.validation]
    if not all(isinstance(p, str) for p in paths):
        raise TrainingConfigError("TrainLmConfig paths are still placeholders: run train_lm "
                                  "through the executor, or pass them explicitly")


def _peak_flops(hardware: str) -> float:
    from marin.hardware import get_preset

    return get_preset(hardware).peak_bf16_flops


def _summary(config: TrainLmConfig, last_loss: float, final: dict[str, float],
             metrics: MetricsLog, data: TokenCacheDataset | MixtureDataset,
             validation: Validation | None, tasks: Any = None) -> RunSummary:
    tokens = config.train_steps * config.batch_size * config.model.seq_len
    branch = config.init_from  # a branch's FLOPs are its own steps' (k..train_steps)
    own = (config.train_steps - branch.step) * config.batch_size * config.model.seq_len \
        if branch is not None else tokens
    recent = metrics.train_losses()[-10:]
    eval_loss, eval_bpb = final.get(names.EVAL_LOSS), final.get(names.EVAL_BPB)
    named = [s.name for s in validation.sets if s.name is not None] if validation else []
    evals = {n: EvalFigures(final[names.eval_name(n, "loss")], final[names.eval_name(n, "bpb")])
             for n in named}
    fingerprints = {t.name: t.fingerprint for t in tasks.tasks} if tasks is not None else {}
    by_component = data.tokens_by_component(config.train_steps * config.batch_size,
                                            config.seed) if config.mixture else {}
    return RunSummary(
        params=config.model.num_params(), tokens=tokens,
        flops=own * config.model.training_flops_per_token(), steps=config.train_steps,
        batch_size=config.batch_size, seq_len=config.model.seq_len,
        train_loss=float(np.mean(recent)) if recent else last_loss, final_step_loss=last_loss,
        eval_loss=eval_loss, eval_bpb=eval_bpb,
        macro_loss=final.get(names.EVAL_MACRO_LOSS, eval_loss),
        macro_bpb=final.get(names.EVAL_MACRO_BPB, eval_bpb), evals=evals,
        tokens_by_component=by_component, tasks=task_figures(final, fingerprints),
        parent_run=branch.run if branch is not None else None,
        branch_step=branch.step if branch is not None else None)
