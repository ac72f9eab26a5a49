"""Compile once: a run that changes only hyperparameters (learning rates, weight decay, run
length, warmup) loads every program from JAX's persistent cache, in a fresh process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow

RUN = """
import dataclasses, json, sys
from pathlib import Path
sys.path.insert(0, {root!r})
from marin.training import train_lm
from marin.training.compilation import CacheEvents
from tests.helpers.training import tiny_config
changes = json.loads({changes!r})
hyper = changes.pop("optimizer", {{}})
config = tiny_config(Path({cache!r}), Path({out!r}), eval_every=3, **changes)
config = dataclasses.replace(config, optimizer=dataclasses.replace(config.optimizer, **hyper))
with CacheEvents() as events:
    summary = train_lm(config)
print(json.dumps({{"hits": events.hits, "misses": events.misses, "requests": events.requests,
                   "loss": summary.final_step_loss}}))
"""


def _run(cache: Path, out: Path, marin_cache: Path, **changes) -> dict:
    script = RUN.format(root=str(ROOT), cache=str(cache), out=str(out),
                        changes=json.dumps(changes))
    env = {**os.environ, "MARIN_CACHE_DIR": str(marin_cache), "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=600, cwd=ROOT, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _entries(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir() if not p.name.endswith("-atime")} \
        if folder.exists() else set()


def test_another_learning_rate_and_length_compile_nothing_new(cache: Path, tmp_path: Path):
    marin_cache = tmp_path / "marin-cache"
    folder = marin_cache / "jax-compilation"  # the default, under $MARIN_CACHE_DIR
    first = _run(cache, tmp_path / "first", marin_cache, train_steps=6)
    cached = _entries(folder)
    assert first["misses"] > 0 and len(cached) == first["misses"]  # one entry per program

    second = _run(cache, tmp_path / "second", marin_cache, train_steps=9,
                  optimizer={"learning_rate": 0.003, "adam_learning_rate": 0.002,
                             "weight_decay": 0.1, "warmup_fraction": 0.3,
                             "decay_fraction": 0.4, "max_grad_norm": 0.5})
    assert second["misses"] == 0 and second["hits"] == first["requests"]
    assert _entries(folder) == cached
    assert second["loss"] != first["loss"]  # the new values were used, not the old ones

    off = _run(cache, tmp_path / "off", marin_cache, train_steps=6, compilation_cache=None,
               optimizer={"learning_rate": 0.02})
    assert off["requests"] == 0 and _entries(folder) == cached


def _constant_optimizer(hyper, total_steps: int, params):
    """The optimizer with every hyperparameter a Python constant, from optax's own
    schedules: what the trainer compiled before its hyperparameters became inputs."""
    import jax
    import optax

    from marin.training.optimizer import OTHER, _hyperball_step, parameter_labels

    def wsd(peak):
        warmup = max(1, int(total_steps * hyper.warmup_fraction))
        decay = int(total_steps * hyper.decay_fraction)
        stable = max(0, total_steps - warmup - decay)
        return optax.join_schedules(
            [optax.linear_schedule(0.0, peak, warmup), optax.constant_schedule(peak),
             optax.linear_schedule(peak, 0.0, decay)], [warmup, warmup + stable])

    labels = parameter_labels(params)
    clip = optax.clip_by_global_norm(hyper.max_grad_norm)
    if hyper.optimizer == "adamw":
        tx = optax.adamw(wsd(hyper.learning_rate), b1=hyper.beta1, b2=hyper.beta2,
                         eps=hyper.epsilon, weight_decay=hyper.weight_decay,
                         mask=jax.tree.map(lambda kind: kind != OTHER, labels))
    else:
        tx = optax.chain(optax.scale_by_adam(b1=hyper.beta1, b2=hyper.beta2,
                                             eps=hyper.epsilon),
                         _hyperball_step(wsd(hyper.learning_rate),
                                         wsd(hyper.adam_learning_rate), labels))
    return optax.chain(clip, tx), wsd(hyper.learning_rate)


def test_traced_hyperparameters_give_the_same_losses_as_constants(cache: Path, tmp_path: Path):
    """The trainer's update (hyperparameters as inputs) against the same optimizer with
    them as Python constants: the same bits."""
    import dataclasses

    import equinox as eqx
    import jax
    import jax.numpy as jnp

    from marin.models.transformer import TransformerLM
    from marin.processing.tokenize.loader import DataLoader, TokenCacheDataset
    from marin.training import train_lm
    from marin.training.state import TrainerState, make_update_fn
    from tests.helpers.training import tiny_config

    for optimizer, z in (("adamw", 0.0), ("adamh", 0.0)):
        config = tiny_config(cache, tmp_path / f"{optimizer}-{z}", train_steps=7,
                             eval_every=0)
        config = dataclasses.replace(config, optimizer=dataclasses.replace(
            config.optimizer, optimizer=optimizer, weight_decay=0.1, z_loss_weight=z,
            decay_fraction=0.3))
        train_lm(config)
        with open(Path(config.output_path, "metrics.jsonl")) as f:
            records = [json.loads(line) for line in f]
        trained = [(r["train/loss"], r["optim/learning_rate"]) for r in records
                   if "train/loss" in r]
        model = TransformerLM.init(config.model, key=jax.random.PRNGKey(config.seed))
        tx, schedule = _constant_optimizer(config.optimizer, config.train_steps,
                                           eqx.filter(model, eqx.is_inexact_array))
        update = make_update_fn(tx, z, jnp.dtype(config.compute_dtype))
        state = TrainerState.init(model, tx)
        loader = DataLoader(TokenCacheDataset(config.cache_path, config.model.seq_len),
                            config.batch_size, seed=config.seed)
        constants = []
        for step in range(config.train_steps):
            state, out = update(state, jnp.asarray(loader.batch(step)))
            constants.append((float(out["loss"]), float(schedule(step))))
        assert trained == constants


AGAIN = """
import dataclasses, json, sys
from pathlib import Path
sys.path.insert(0, {root!r})
from marin.training import train_lm
from marin.training.compilation import CacheEvents
from tests.helpers.training import tiny_config
out = Path({out!r})
config = tiny_config(Path({cache!r}), out / "alone", train_steps=6, eval_every=3)
other = dataclasses.replace(config, output_path=str(out / "other"), seed=7,
                            optimizer=dataclasses.replace(config.optimizer, learning_rate=0.003))
events = []
for run in (config, other, dataclasses.replace(config, output_path=str(out / "again"))):
    with CacheEvents() as counted:
        train_lm(run)
    events.append(counted.requests)
print(json.dumps(events))
"""


def _losses(folder: Path) -> list[tuple[int, float, float | None]]:
    records = [json.loads(line) for line in (folder / "metrics.jsonl").open()]
    return [(r["step"], r["train/loss"] if "train/loss" in r else r["eval/loss"],
             r.get("compile_time")) for r in records if "train/loss" in r or "eval/loss" in r]


def test_runs_of_one_shape_in_one_process_compile_once_with_the_same_losses(cache: Path,
                                                                             tmp_path: Path):
    """The second and third runs of a shape in a process reuse the first's compiled update
    and evaluation (no compile request, no compile time); the third, the first's config
    again, has its losses to the bit."""
    env = {**os.environ, "MARIN_CACHE_DIR": str(tmp_path / "marin-cache"),
           "JAX_PLATFORMS": "cpu"}
    script = AGAIN.format(root=str(ROOT), cache=str(cache), out=str(tmp_path))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=600, cwd=ROOT, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    first, other, again = json.loads(proc.stdout.strip().splitlines()[-1])
    assert first > 0 and other == 0 and again == 0
    alone, repeated = _losses(tmp_path / "alone"), _losses(tmp_path / "again")
    assert alone[0][2] is not None and all(r[2] is None for r in repeated)
    assert [r[:2] for r in repeated] == [r[:2] for r in alone]
    assert _losses(tmp_path / "other")[0][1] != alone[0][1]  # its own seed and data order
