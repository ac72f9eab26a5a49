"""Training a language model on a token cache: the step every IsoFLOP candidate runs.

    step = train_step("train/tiny", tokenized, candidate, hardware="cpu")
    # or by hand:
    ExecutorStep("train/tiny", train_lm, TrainLmConfig(cache_path=output_path_of(tokenized),
                 model=TransformerConfig(...), batch_size=8, train_steps=200,
                 optimizer=OptimizerHyperparameters(...)))

Outputs under the step's path: ``metrics.jsonl`` (per step: loss, learning rate, tokens/s,
MFU against the hardware preset's peak, step time, wall-clock time, gradient norm; eval loss
and bits per byte at intervals), ``summary.json`` (params, tokens, FLOPs, final train and
eval loss: what the scaling fits read), ``checkpoints/`` (asynchronous, sharded: see
``marin.training.checkpoint``) and, when asked, a JAX profile of a step range.
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import dataclass, replace
from typing import Any

import equinox as eqx
import fsspec
import haliax as hax
import jax
import jax.numpy as jnp
import numpy as np

from marin.execution.step import (
    ComputeEstimate,
    ExecutorStep,
    StepResources,
    output_path_of,
    this_output_path,
    unversioned_field,
)
from marin.inference.handler import install_from_env, log_metrics
from marin.models.config import TransformerConfig
from marin.models.transformer import Axes, TransformerLM
from marin.processing.tokenize.cache import CacheError
from marin.processing.tokenize.loader import DataLoader, TokenCacheDataset
from marin.scaling_laws.isoflop_analysis import CandidateConfig, OptimizerHyperparameters
from marin.training.checkpoint import Checkpoints, step_folder
from marin.training.optimizer import build_optimizer

logger = logging.getLogger("marin.training")


class TrainingDivergedError(RuntimeError):
    """The loss became NaN or infinite."""


class TrainingConfigError(ValueError):
    """The config cannot train (for example the data's vocabulary exceeds the model's)."""


class TrainingOutOfMemoryError(MemoryError):
    """The accelerator ran out of memory; the message names the batch size."""


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
        "), more devices, or a smaller model; `marin scaling candidates --hardware ...` "
        "estimates the memory of each candidate")


@dataclass(frozen=True)
class TrainLmConfig:
    """One training run.

    Attributes:
        cache_path: the token cache (a tokenize step's output).
        model: the model's shape.
        batch_size: sequences per step.
        train_steps: optimizer steps.
        optimizer: hyperparameters (``optimizer.optimizer`` is ``adamw`` or ``adamh``).
        seed: parameter initialisation and data order.
        tokenizer: the tokenizer the cache must have been built with (None: only the
            vocabulary size is checked).
        compute_dtype: dtype of activations and matmuls; parameters stay float32.
        eval_batches: validation batches per evaluation.
        output_path: where metrics, summary and checkpoints go (the step's output).
        eval_every: steps between evaluations (0: only at the end).
        checkpoint_every: steps between checkpoints (0: only at the end).
        checkpoint_keep: how many of the newest checkpoints to keep.
        checkpoint_keep_every: also keep every checkpoint whose step is a multiple of this
            (0: none), for example to study a run's history.
        async_checkpoints: write checkpoints in the background while training goes on.
        log_every: steps between progress lines when output is not a terminal.
        hardware: preset whose peak FLOP/s is the MFU denominator.
        profile_steps: capture a JAX profile (XPlane) of steps [a, b) into
            ``<output>/profile``, each step marked by a ``StepTraceAnnotation``; read it
            with ``marin trace summarize <output>``.
    """

    cache_path: str
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
    async_checkpoints: bool = unversioned_field(default=True)
    log_every: int = unversioned_field(default=50)
    hardware: str = unversioned_field(default="cpu")
    profile_steps: tuple[int, int] | None = unversioned_field(default=None)


def train_step(name: str, tokenized: ExecutorStep, candidate: CandidateConfig,
               **overrides: Any) -> ExecutorStep:
    """The training step of one IsoFLOP candidate on a tokenize step's cache."""
    config = TrainLmConfig(cache_path=output_path_of(tokenized), model=candidate.model_config,
                           batch_size=candidate.batch_size, train_steps=candidate.train_steps,
                           optimizer=candidate.optimizer, hardware=candidate.hardware)
    config = replace(config, **overrides)
    return ExecutorStep(name, train_lm, config, resumable=True,  # resumes from checkpoints
                        description=f"{candidate.params:.3g} params, {candidate.tokens:.3g} "
                        f"tokens, {candidate.flops:.3g} FLOPs",
                        resources=StepResources(gpus=0 if candidate.hardware == "cpu" else
                                                candidate.devices),
                        estimate=ComputeEstimate(candidate.flops,
                                                 candidate.estimated_device_hours))


def _loss(model: TransformerLM, tokens: jnp.ndarray, z_weight: float, dtype: Any
          ) -> tuple[jnp.ndarray, jnp.ndarray]:
    ax = Axes(model.config)
    compute = jax.tree.map(lambda x: x.astype(dtype) if eqx.is_inexact_array(x) else x, model)
    Batch = hax.Axis("batch", tokens.shape[0])
    logits = compute(hax.named(tokens, (Batch, ax.Pos))).array.astype(jnp.float32)
    logits, targets = logits[:, :-1], tokens[:, 1:]
    log_z = jax.nn.logsumexp(logits, axis=-1)
    picked = jnp.take_along_axis(logits, targets[..., None], axis=-1)[..., 0]
    nll = jnp.mean(log_z - picked)
    return nll + z_weight * jnp.mean(log_z**2), nll


def make_train_step(tx: Any, z_weight: float, dtype: Any):
    @eqx.filter_jit(donate="all-except-first")
    def step(model, opt_state, tokens):
        (_, nll), grads = eqx.filter_value_and_grad(_loss, has_aux=True)(model, tokens,
                                                                          z_weight, dtype)
        params = eqx.filter(model, eqx.is_inexact_array)
        updates, opt_state = tx.update(grads, opt_state, params)
        model = eqx.apply_updates(model, updates)
        grad_norm = jnp.sqrt(sum(jnp.sum(jnp.square(g)) for g in jax.tree.leaves(grads)))
        return model, opt_state, nll, grad_norm

    return step


def make_eval_step(dtype: Any):
    @eqx.filter_jit
    def evaluate(model, tokens):
        return _loss(model, tokens, 0.0, dtype)[1]

    return evaluate


def train_lm(config: TrainLmConfig) -> dict[str, Any]:
    """Train, checkpoint, evaluate; resume from the latest complete checkpoint."""
    install_from_env()  # logs and metrics to the log service, when $MARIN_LOGGER is set
    _check_config(config)
    dtype = jnp.dtype(config.compute_dtype)
    data = TokenCacheDataset(config.cache_path, config.model.seq_len,
                             expected_tokenizer=config.tokenizer)
    if data.vocab_size > config.model.vocab_size:
        raise TrainingConfigError(
            f"the token cache at {config.cache_path} has a vocabulary of {data.vocab_size}, "
            f"larger than the model's TrainLmConfig.model.vocab_size={config.model.vocab_size};"
            " use the tokenizer's vocabulary size for the model")
    validation = _validation(config)
    key = jax.random.PRNGKey(config.seed)
    model = TransformerLM.init(config.model, key=key)
    params = eqx.filter(model, eqx.is_inexact_array)
    tx, schedule = build_optimizer(config.optimizer, config.train_steps, params)
    opt_state = tx.init(params)
    start, metrics = 0, _Metrics(config)
    sharding = _Sharding(config.batch_size)
    model, opt_state = sharding.place_state((model, opt_state))
    checkpoints = Checkpoints(f"{config.output_path.rstrip('/')}/checkpoints",
                              keep_last=config.checkpoint_keep,
                              keep_every=config.checkpoint_keep_every,
                              asynchronous=config.async_checkpoints)
    try:
        latest = checkpoints.latest_step()
        if latest is not None:
            (model, opt_state), meta = checkpoints.restore(latest, (model, opt_state))
            start = int(meta["data_step"])
            metrics.truncate(start)
            logger.info("resumed from %s at step %d", step_folder(checkpoints.root, latest),
                        start)
        run = _Run(config, tx, schedule, sharding, metrics, checkpoints, dtype)
        last_loss, final = run.train(model, opt_state, data, validation, start)
    finally:
        checkpoints.close()  # the last save is committed before the step counts as done
    summary = _summary(config, last_loss, final, metrics)
    with fsspec.open(f"{config.output_path.rstrip('/')}/summary.json", "w") as f:
        json.dump(summary, f, indent=1)
    return summary


class _Run:
    """The training loop of one run, with what it needs at hand."""

    def __init__(self, config: TrainLmConfig, tx: Any, schedule: Any, sharding: _Sharding,
                 metrics: _Metrics, checkpoints: Checkpoints, dtype: Any):
        self.config, self.schedule, self.sharding = config, schedule, sharding
        self.metrics, self.checkpoints = metrics, checkpoints
        self.step_fn = make_train_step(tx, config.optimizer.z_loss_weight, dtype)
        self.eval_fn = make_eval_step(dtype)
        self.flops_per_step = config.model.training_flops_per_token() * config.batch_size \
            * config.model.seq_len
        self.peak = _peak_flops(config.hardware) * jax.device_count()

    def train(self, model, opt_state, data, validation, start: int
              ) -> tuple[float, dict[str, float]]:
        config, sharding, metrics = self.config, self.sharding, self.metrics
        loader = DataLoader(data, config.batch_size, seed=config.seed, start_step=start)
        last_loss = math.nan
        train_iter = iter(loader)
        progress = _progress_bar(config, start)
        for step in range(start, config.train_steps):
            profiling = _maybe_profile(config, step)
            # A step marker for profile readers (`marin trace summarize`): data wait included.
            with jax.profiler.StepTraceAnnotation("train", step_num=step):
                _, batch = next(train_iter)
                t0 = time.perf_counter()
                try:
                    model, opt_state, loss, grad_norm = self.step_fn(
                        model, opt_state, sharding.place_batch(batch))
                except jax.errors.JaxRuntimeError as e:
                    oom = explain_out_of_memory(e, config.batch_size, sharding.count)
                    if oom is None:
                        raise
                    raise oom from e
                loss = float(loss)
                elapsed = time.perf_counter() - t0
            if profiling:
                _stop_profile(config, step)
            if not math.isfinite(loss):
                self._diverged(loss, step)
            last_loss = loss
            done = step + 1
            record = {"step": done, "loss": loss, "learning_rate": float(self.schedule(step)),
                      "grad_norm": float(grad_norm), "step_time": elapsed,
                      "tokens_per_s": config.batch_size * config.model.seq_len / elapsed,
                      "mfu": self.flops_per_step / elapsed / self.peak, "wall_time": time.time()}
            if validation is not None and config.eval_every and done % config.eval_every == 0 \
                    and done < config.train_steps:
                record.update(_evaluate(self.eval_fn, model, validation, config))
            metrics.add(record)
            progress(done, loss)
            if config.checkpoint_every and done % config.checkpoint_every == 0 \
                    and done < config.train_steps:
                self._checkpoint(done, model, opt_state)
        progress(None, None)
        final: dict[str, Any] = {}
        if validation is not None:
            final = _evaluate(self.eval_fn, model, validation, config)
            metrics.add({"step": config.train_steps, **final})
        self._checkpoint(config.train_steps, model, opt_state)
        return last_loss, final

    def _checkpoint(self, done: int, model, opt_state) -> None:
        self.metrics.flush()  # first: a complete checkpoint implies its metrics are stored
        self.checkpoints.save(done, (model, opt_state), {"data_step": done})

    def _diverged(self, loss: float, step: int) -> None:
        self.checkpoints.wait()
        latest = self.checkpoints.latest_step()
        config = self.config
        raise TrainingDivergedError(
            f"the loss became {loss} at step {step}; the last good checkpoint is "
            f"{'none' if latest is None else step_folder(self.checkpoints.root, latest)} "
            f"(kept). Lower optimizer.learning_rate (now {config.optimizer.learning_rate:g}) "
            "or max_grad_norm, or raise warmup_fraction")


class _Sharding:
    """Data parallelism plus FSDP over the local devices.

    One mesh axis, ``data``, spans every device: batches are split along their batch axis,
    and every parameter (and its optimizer state) with an ``embed`` axis is split along it
    (the haliax axis mapping ``{"embed": "data"}``), so each device holds 1/n of the model.
    XLA inserts the all-gathers and reduce-scatters. On one device nothing is placed.
    """

    PARAMETER_MAPPING = {"embed": "data"}

    def __init__(self, batch_size: int):
        devices = jax.devices()
        self.count = len(devices)
        if self.count > 1 and batch_size % self.count:
            raise TrainingConfigError(
                f"TrainLmConfig.batch_size={batch_size} must be a multiple of the "
                f"{self.count} devices for data parallelism")
        self.mesh = jax.sharding.Mesh(np.array(devices), ("data",))
        self.batch = jax.sharding.NamedSharding(self.mesh,
                                                jax.sharding.PartitionSpec("data", None))

    def place_state(self, state: Any) -> Any:
        if self.count == 1:
            return state
        with hax.partitioning.set_mesh(self.mesh):
            return hax.shard(state, self.PARAMETER_MAPPING)

    def place_batch(self, batch: np.ndarray) -> jax.Array:
        if self.count == 1:
            return jnp.asarray(batch)
        return jax.device_put(batch, self.batch)


def _progress_bar(config: TrainLmConfig, start: int):
    """A rich progress bar on a terminal; log lines (every ``log_every`` steps) otherwise."""
    import sys

    if not sys.stderr.isatty():
        return lambda step, loss: None
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    bar = Progress(TextColumn("train"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                   TextColumn("loss {task.fields[loss]}"), TimeRemainingColumn(), transient=True)
    task = bar.add_task("train", total=config.train_steps, completed=start, loss="-")
    bar.start()

    def update(step: int | None, loss: float | None) -> None:
        if step is None:
            bar.stop()
        else:
            bar.update(task, completed=step, loss=f"{loss:.4f}")

    return update


def _check_config(config: TrainLmConfig) -> None:
    if not isinstance(config.output_path, str) or not isinstance(config.cache_path, str):
        raise TrainingConfigError("TrainLmConfig paths are still placeholders: run train_lm "
                                  "through the executor, or pass them explicitly")
    for name in ("batch_size", "train_steps", "checkpoint_keep"):
        if getattr(config, name) <= 0:
            raise TrainingConfigError(f"TrainLmConfig.{name} must be positive, got "
                                      f"{getattr(config, name)}")


def _validation(config: TrainLmConfig) -> tuple[TokenCacheDataset, float] | None:
    try:
        data = TokenCacheDataset(config.cache_path, config.model.seq_len, split="validation",
                                 record_read=False)
    except CacheError:
        logger.info("no validation split in %s: no evaluation", config.cache_path)
        return None
    from marin.processing.tokenize.cache_stats import read_cache_stats

    stats = read_cache_stats(config.cache_path, split="validation")
    return data, stats.tokens_per_byte


def _evaluate(eval_fn, model, validation, config: TrainLmConfig) -> dict[str, float]:
    data, tokens_per_byte = validation
    count = min(config.eval_batches * config.batch_size, data.num_sequences)
    losses = []
    for start in range(0, count, config.batch_size):
        batch = np.stack([data.sequence(i) for i in range(start, min(count,
                                                                     start + config.batch_size))])
        losses.append(float(eval_fn(model, jnp.asarray(batch))) * len(batch))
    loss = sum(losses) / count
    return {"eval_loss": loss, "eval_bpb": loss * tokens_per_byte / math.log(2)}


def _peak_flops(hardware: str) -> float:
    from marin.hardware import get_preset

    return get_preset(hardware).peak_bf16_flops


def _maybe_profile(config: TrainLmConfig, step: int) -> bool:
    if config.profile_steps is None:
        return False
    first, _ = config.profile_steps
    if step == first:
        jax.profiler.start_trace(f"{config.output_path.rstrip('/')}/profile")
    return first <= step < config.profile_steps[1]


def _stop_profile(config: TrainLmConfig, step: int) -> None:
    if config.profile_steps is not None and step == config.profile_steps[1] - 1:
        jax.block_until_ready(jnp.zeros(()))
        jax.profiler.stop_trace()


class _Metrics:
    """metrics.jsonl: kept in memory and rewritten whole at checkpoints and at the end."""

    def __init__(self, config: TrainLmConfig):
        self.path = f"{config.output_path.rstrip('/')}/metrics.jsonl"
        self.records: list[dict[str, Any]] = []
        self.log_every = max(1, config.log_every)
        try:
            with fsspec.open(self.path, "r") as f:
                self.records = [json.loads(line) for line in f if line.strip()]
        except FileNotFoundError:
            pass

    def truncate(self, step: int) -> None:
        self.records = [r for r in self.records if r["step"] <= step]

    def add(self, record: dict[str, Any]) -> None:
        self.records.append(record)
        log_metrics(record)  # a structured entry in the log service, when $MARIN_LOGGER is set
        if "loss" in record and record["step"] % self.log_every == 0:
            logger.info("step %d loss %.4f %.0f tok/s mfu %.1f%%", record["step"],
                        record["loss"], record["tokens_per_s"], 100 * record["mfu"])

    def flush(self) -> None:
        with fsspec.open(self.path, "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in self.records)

    def train_losses(self) -> list[float]:
        return [r["loss"] for r in self.records if "loss" in r]


def _summary(config: TrainLmConfig, last_loss: float, final: dict[str, float],
             metrics: _Metrics) -> dict[str, Any]:
    tokens = config.train_steps * config.batch_size * config.model.seq_len
    recent = metrics.train_losses()[-10:]
    return {"params": config.model.num_params(), "tokens": tokens,
            "flops": tokens * config.model.training_flops_per_token(),
            "train_loss": float(np.mean(recent)) if recent else last_loss,
            "final_step_loss": last_loss, "eval_loss": final.get("eval_loss"),
            "eval_bpb": final.get("eval_bpb"), "steps": config.train_steps,
            "batch_size": config.batch_size, "seq_len": config.model.seq_len}
