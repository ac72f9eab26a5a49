"""The trainer on real text: learning, resuming after a kill, refusals, profiling."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import equinox as eqx
import jax
import numpy as np
import pytest

from marin.models import TransformerConfig
from marin.models.transformer import TransformerLM
from marin.training import TrainingConfigError, TrainingDivergedError, train_lm
from marin.training.checkpoint import complete_checkpoints
from tests.conftest import ROOT
from tests.helpers.training import VOCAB, initial_state, tiny_config

pytestmark = pytest.mark.slow


def test_the_model_has_exactly_the_parameters_the_accounting_counts():
    config = TransformerConfig(hidden_dim=64, intermediate_dim=192, num_layers=3, num_heads=4,
                               num_kv_heads=2, vocab_size=VOCAB, seq_len=32)
    model = TransformerLM.init(config, key=jax.random.PRNGKey(0))
    arrays = jax.tree.leaves(eqx.filter(model, eqx.is_array))
    assert sum(a.size for a in arrays) == config.num_params()
    tied = dataclasses.replace(config, tie_embeddings=True, glu=False)
    model = TransformerLM.init(tied, key=jax.random.PRNGKey(0))
    assert sum(a.size for a in jax.tree.leaves(eqx.filter(model, eqx.is_array))) == \
        tied.num_params()


@pytest.mark.parametrize("optimizer", ["adamh", "adamw"])
def test_validation_loss_clearly_falls_on_real_text(cache: Path, tmp_path: Path, optimizer):
    config = tiny_config(cache, tmp_path / "run")
    config = dataclasses.replace(config, optimizer=dataclasses.replace(
        config.optimizer, optimizer=optimizer, learning_rate=0.01 if optimizer == "adamh"
        else 3e-3, weight_decay=0.1))
    summary = train_lm(config)
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").open()]
    evals = [r["eval/loss"] for r in records if "eval/loss" in r]
    assert len(evals) == 3  # steps 40, 80 and the end
    uniform = float(jax.numpy.log(VOCAB))
    assert evals[-1] < uniform - 1.0 and evals[-1] < evals[0]
    assert summary.eval_loss == evals[-1]
    assert summary.tokens == 120 * 8 * 64
    assert summary.flops == pytest.approx(summary.tokens
                                          * config.model.training_flops_per_token())
    assert 0 < summary.eval_bpb < 8
    assert records[0] == {"step": 0, "parameter_count": config.model.num_params()}
    steps = [r for r in records if "train/loss" in r]
    assert [r["step"] for r in steps] == list(range(1, 121))
    assert all(r["throughput/tokens_per_second"] > 0 and 0 < r["throughput/mfu"] < 1
               for r in steps)
    assert [r["throughput/total_tokens"] for r in steps] == [8 * 64 * s for s in range(1, 121)]
    assert steps[0]["optim/learning_rate"] == 0.0 and steps[-1]["optim/learning_rate"] < \
        config.optimizer.learning_rate


RESUME_SCRIPT = """
import os, signal, sys
from pathlib import Path
sys.path.insert(0, {root!r})
from tests.helpers.training import tiny_config
from marin.training import train_lm
from marin.training.checkpoint import Checkpoints
original = Checkpoints.save
def save_then_die(self, step, state, meta):
    original(self, step, state, meta)
    if step == 30:  # the save is under way in the background: the run dies mid-write
        os.kill(os.getpid(), signal.SIGKILL)
Checkpoints.save = save_then_die
train_lm(tiny_config(Path({cache!r}), Path({out!r}), train_steps=120, eval_every=0,
                     checkpoint_every=10))
"""


def test_a_run_killed_during_an_async_save_resumes_from_the_last_complete_one(cache: Path,
                                                                            tmp_path: Path):
    from marin.processing.tokenize.loader import DataLoader, TokenCacheDataset
    from marin.training.checkpoint import Checkpoints

    killed = tmp_path / "killed"
    script = RESUME_SCRIPT.format(root=str(ROOT), cache=str(cache), out=str(killed))
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          timeout=600)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-3000:]
    assert not (killed / "summary.json").exists()
    folders = sorted(p.name for p in (killed / "checkpoints").iterdir())
    assert any(name.startswith("step_00000030") and "tmp" in name for name in folders), folders
    assert [s for s, _ in complete_checkpoints(str(killed / "checkpoints"))] == [10, 20]
    config = tiny_config(cache, killed, train_steps=120, eval_every=0, checkpoint_every=10)
    # The data position is restored exactly: the checkpoint's position, and the batches a
    # loader gives from it, are those of an uninterrupted run at that step.
    like = Checkpoints(str(killed / "checkpoints"))
    _, meta = like.restore(20, like=initial_state(config))
    data = TokenCacheDataset(config.cache_path, config.model.seq_len)
    resumed = DataLoader(data, config.batch_size, seed=config.seed, start_step=meta["data_step"])
    straight = DataLoader(data, config.batch_size, seed=config.seed)
    assert meta["data_step"] == 20
    batches = iter(resumed)
    for step in (20, 21):
        at, batch = next(batches)
        assert at == step
        np.testing.assert_array_equal(batch, straight.batch(step))
    batches.close()
    train_lm(config)  # resumes from step 20, the last complete checkpoint
    train_lm(dataclasses.replace(config, output_path=str(tmp_path / "straight")))
    resumed_losses, straight_losses = _losses(killed), _losses(tmp_path / "straight")
    assert [s for s, _ in resumed_losses] == list(range(1, 121))
    assert [loss for _, loss in resumed_losses] == pytest.approx(
        [loss for _, loss in straight_losses], rel=1e-6)
    assert [s for s, _ in complete_checkpoints(str(killed / "checkpoints"))] == [110, 120]


def _losses(run: Path) -> list[tuple[int, float]]:
    path = run / "metrics.jsonl"
    return [(r["step"], r["train/loss"]) for r in map(json.loads, path.open())
            if "train/loss" in r]


def test_a_diverging_loss_stops_with_a_clear_error_and_keeps_the_checkpoint(cache: Path,
                                                                           tmp_path: Path):
    config = tiny_config(cache, tmp_path / "nan", train_steps=40, checkpoint_every=5,
                         eval_every=0)
    config = dataclasses.replace(config, optimizer=dataclasses.replace(
        config.optimizer, optimizer="adamw", learning_rate=1e38, warmup_fraction=0.0,
        max_grad_norm=0.0))
    with pytest.raises(TrainingDivergedError, match=r"the loss became (nan|inf) at step \d+; "
                       r"the last good checkpoint is .*Lower optimizer.learning_rate"):
        train_lm(config)
    assert not (tmp_path / "nan" / "summary.json").exists()


def test_a_cache_whose_vocabulary_exceeds_the_models_is_refused(cache: Path, tmp_path: Path):
    config = tiny_config(cache, tmp_path / "small-vocab", tokenizer=None)
    config = dataclasses.replace(config, model=dataclasses.replace(config.model,
                                                                   vocab_size=100))
    with pytest.raises(TrainingConfigError, match=r"vocabulary of 512, larger than the model's "
                       r"TrainLmConfig\.model\.vocab_size=100"):
        train_lm(config)


def test_keeping_no_checkpoint_is_refused_naming_the_field(cache: Path, tmp_path: Path):
    with pytest.raises(TrainingConfigError, match=r"TrainLmConfig\.checkpoint_keep must be "
                       r"positive, got 0"):
        train_lm(tiny_config(cache, tmp_path / "keep", checkpoint_keep=0))


def test_a_cache_built_with_another_tokenizer_is_refused(cache: Path, tmp_path: Path):
    from marin.processing.tokenize.cache import CacheError

    with pytest.raises(CacheError, match="but this step asks for 'gpt2'"):
        train_lm(tiny_config(cache, tmp_path / "wrong", tokenizer="gpt2"))


def test_the_profiling_hook_writes_an_xplane_profile(cache: Path, tmp_path: Path):
    train_lm(tiny_config(cache, tmp_path / "prof", train_steps=6, eval_every=0,
                         profile_steps=(2, 4)))
    profiles = list((tmp_path / "prof" / "profile").rglob("*.xplane.pb"))
    assert len(profiles) == 1 and profiles[0].stat().st_size > 1000


COMPAT = """
import types
import jax
real = jax.core  # jax 0.11 and newer have no is_constant_dim: give haliax such a jax.core
jax.core = types.ModuleType("jax.core")
jax.core.__dict__.update({k: getattr(real, k) for k in dir(real)
                        if k not in ("is_constant_dim", "__getattr__")})
assert not hasattr(jax.core, "is_constant_dim")
import marin.models  # installs the shim: at once, since jax is already imported
assert hasattr(jax.core, "is_constant_dim")
from marin.models.jax_compat import ensure_jax_compat
assert ensure_jax_compat() is False  # nothing left to add
import haliax as hax, jax.numpy as jnp
A, B = hax.Axis("a", 3), hax.Axis("b", 4)
x = hax.ones((A, B))
print(float(hax.dot(x, x, axis=B).array.sum()))
"""


def test_the_jax_compat_shim_restores_what_haliax_needs():
    out = subprocess.run([sys.executable, "-c", COMPAT], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "12.0"  # 3 rows, each a dot product of 4 ones


COMPAT_BEFORE_JAX = """
import sys
import marin.models
from marin.models import jax_compat
assert "jax" not in sys.modules and not jax_compat.checked  # the config needs no JAX
import jax
assert jax_compat.checked and hasattr(jax.core, "is_constant_dim")
print("ok")
"""


def test_importing_marin_models_before_jax_applies_the_shim_once_jax_is_imported():
    out = subprocess.run([sys.executable, "-c", COMPAT_BEFORE_JAX], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


SHARDED = """
import json, sys
from pathlib import Path
sys.path.insert(0, {root!r})
import jax
from tests.helpers.training import tiny_config
from marin.training import train_lm
import marin.training.trainer as module
placed = []
original = module._Sharding.place_state
def spy(self, state):
    out = original(self, state)
    placed.append(out.model.embedding.weight.array.sharding)
    return out
module._Sharding.place_state = spy
summary = train_lm(tiny_config(Path({cache!r}), Path({out!r}), train_steps=8, eval_every=0))
sharding = placed[0]
print(json.dumps({{"devices": jax.device_count(), "loss": summary.final_step_loss,
                   "shards": len(sharding.device_set),
                   "shard_shape": list(sharding.shard_shape((512, 64)))}}))
"""


@pytest.mark.parametrize("devices", [1, 4])
def test_data_parallel_and_fsdp_over_four_cpu_devices(cache: Path, tmp_path: Path, devices):
    def run(count: int) -> dict:
        env = {**os.environ, "JAX_PLATFORMS": "cpu",
               "XLA_FLAGS": f"--xla_force_host_platform_device_count={count}"}
        script = SHARDED.format(root=str(ROOT), cache=str(cache), out=str(tmp_path / str(count)))
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                             env=env, timeout=300, cwd=ROOT)
        assert out.returncode == 0, out.stderr[-3000:]
        return json.loads(out.stdout.strip().splitlines()[-1])

    result = run(devices)
    assert result["devices"] == devices
    if devices == 4:
        assert result["shards"] == 4 and result["shard_shape"] == [512, 16]  # embed split 4
        single = run(1)
        assert result["loss"] == pytest.approx(single["loss"], rel=2e-3)


def test_out_of_memory_names_the_batch_size_and_suggests_a_fix():
    # A real accelerator OOM cannot be provoked safely on a shared CPU machine; this checks
    # the translation of the exact error type and text XLA raises.
    from marin.training.trainer import explain_out_of_memory

    xla_error = jax.errors.JaxRuntimeError(
        "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 85899345920 bytes.")
    error = explain_out_of_memory(xla_error, batch_size=64, devices=8)
    assert error is not None
    assert "TrainLmConfig.batch_size=64 on 8 device(s)" in str(error)
    assert "smaller batch size (for example 32)" in str(error)
    assert explain_out_of_memory(jax.errors.JaxRuntimeError("INTERNAL: other"), 64, 8) is None


def test_train_step_turns_heuristic_candidates_into_executor_steps(cache: Path, tmp_path: Path):
    """A miniature sweep: candidates of a small budget, each trained through the executor."""
    from marin.execution import Executor
    from marin.execution.phases import PHASES, PhaseTimes
    from marin.processing.tokenize import tokenize_step
    from marin.scaling_laws.runs import train_step
    from marin.scaling_laws.scaling_heuristics import CompletedAdamhHeuristic

    heuristic = CompletedAdamhHeuristic(vocab_size=VOCAB, seq_len=64, hardware="cpu",
                                        devices=1, min_hidden=32, max_hidden=96,
                                        hidden_step=32, head_dim=32, target_steps=20,
                                        min_batch_size=4, min_train_steps=10,
                                        reference_batch_size=4, reference_tokens=5e5)
    candidates = list(heuristic.candidates_for_budget(1e11))
    assert len(candidates) >= 2
    tokenized = tokenize_step("tokenized/plays", [str(cache / "train")],
                              [str(cache / "validation")], tokenizer=str(cache / "tokenizer"),
                              num_processes=1)
    steps = [train_step(f"train/d{c.model_config.hidden_dim}", tokenized, c,
                        tokenizer=str(cache / "tokenizer")) for c in candidates]
    result = Executor(str(tmp_path / "prefix"), max_concurrent=1).run(steps)
    assert result.ok, result.summary()
    for step, candidate in zip(steps, candidates, strict=True):
        out = result.plan.entry_of(result.plan.graph.node_of(step)).output_path
        summary = json.loads(Path(out, "summary.json").read_text())
        assert summary["params"] == candidate.params
        assert summary["flops"] == pytest.approx(candidate.flops)
        assert summary["eval_loss"] < float(jax.numpy.log(VOCAB))
        # where the run's time went: the trainer's phases in its output, and with the
        # worker's in its outcome (marin.execution.phases)
        own = PhaseTimes.decode(Path(out, PHASES).read_bytes()).phases
        assert own["first_step"].count == 1
        assert own["steps"].count == candidate.train_steps - 1
        assert {"model_init", "checkpoint", "evaluation", "summary"} <= set(own)
        [outcome] = [o for o in result.steps if o.output_path == out]
        assert set(outcome.phases.phases) == set(own) | {"lease", "start", "run", "commit",
                                                         "release"}
        assert outcome.phases.phases["steps"].count == own["steps"].count
    totals = Executor(str(tmp_path / "prefix")).plan(steps).totals()
    assert totals["skip"] == len(steps) + 1


IMPORTS = """
import json, sys
import marin.training
from marin.training import OptimizerHyperparameters
light = {"jax": "jax" in sys.modules}
import marin.training.trainer
print(json.dumps({**light, "fits": "marin.scaling_laws.isoflop_analysis" in sys.modules,
                  "scipy": "scipy" in sys.modules}))
"""


def test_the_trainer_imports_no_scaling_law_fitting():
    out = subprocess.run([sys.executable, "-c", IMPORTS], capture_output=True, text=True,
                         timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {
        "jax": False, "fits": False, "scipy": False}
