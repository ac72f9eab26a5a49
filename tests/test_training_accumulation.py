"""Gradient accumulation: the full batch's losses, a smaller compiled step with the same
data layout, the memory planner's micro-batch carried into the run, and the refusals."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from marin.hardware import CPU
from marin.models.memory import (
    ACCUMULATOR_BYTES_PER_PARAM,
    STATE_BYTES_PER_PARAM,
    activation_bytes_per_sequence,
    estimate_training_memory,
)
from marin.scaling_laws.runs import training_config
from marin.scaling_laws.scaling_heuristics import CompletedAdamhHeuristic
from marin.training import TrainingConfigError
from tests.conftest import ROOT
from tests.helpers.training import VOCAB, tiny_config

ACCUMULATION = """
import dataclasses, json, re, sys
from pathlib import Path
sys.path.insert(0, {root!r})
import jax
import numpy as np
from marin.training import TrainingConfigError, train_lm
from marin.training.checkpoint import Checkpoints
from marin.training.compilation import use_compilation_cache
from marin.training.config import compilation_cache_folder
from marin.training.trainer import _Run
from tests.helpers.training import initial_state, tiny_config
COLLECTIVES = ("all-to-all", "collective-permute", "all-gather", "reduce-scatter", "all-reduce")
# train_lm's own persistent cache: the compile below is read back when train_lm runs
use_compilation_cache(compilation_cache_folder("default"))
folder, out, models = Path({folder!r}), {{"devices": jax.device_count()}}, {{}}
for micro in (None, 1):  # batch 8 over 2 devices: 4 sequences each, in one pass or 4
    config = tiny_config(Path({cache!r}), folder / str(micro), train_steps=20, eval_every=0,
                         compute_dtype="float32", microbatch_size=micro, eval_batches=1)
    run = _Run(dataclasses.replace(config, output_path=str(folder / f"aot-{{micro}}")))
    state, _ = run.restore_or_init()  # the update exactly as train_lm builds it
    compiled = run.update.lower(state, run.sharding.place_batch(
        np.zeros((8, 64), np.int32))).lowered.compile()
    run.checkpoints.close()
    text = compiled.as_text()
    train_lm(config)
    records = [json.loads(line) for line in (folder / str(micro) / "metrics.jsonl").open()]
    (model, _), _ = Checkpoints(str(folder / str(micro) / "checkpoints")).restore(
        20, like=initial_state(config))
    models[micro] = jax.tree.leaves(model)
    out[str(micro)] = {{
        "temp": compiled.memory_analysis().temp_size_in_bytes,
        "loops": text.count("condition="),
        "collectives": {{name: len(re.findall(rf"\\b{{name}}(-start)?\\(", text))
                        for name in COLLECTIVES}},
        "losses": [r["train/loss"] for r in records if "train/loss" in r]}}
out["parameters"] = max(float(abs(a - b).max() / max(1.0, float(abs(a).max())))
                        for a, b in zip(models[None], models[1], strict=True)
                        if hasattr(a, "dtype") and a.dtype.kind == "f")
try:
    train_lm(tiny_config(Path({cache!r}), folder / "refused", microbatch_size=8))
except TrainingConfigError as e:
    out["refused"] = str(e)
print(json.dumps(out))
"""


@pytest.mark.slow
def test_accumulated_micro_batches_train_as_the_full_batch_in_a_smaller_step(
        cache: Path, tmp_path: Path):
    """On 2 CPU devices (data parallel + FSDP): 20 steps of the full batch against 4
    micro-batches, and the compiled update of each."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu",
           "XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
    script = ACCUMULATION.format(root=str(ROOT), cache=str(cache), folder=str(tmp_path))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    full, micro = result["None"], result["1"]
    assert result["devices"] == 2
    assert len(full["losses"]) == 20 and full["losses"][-1] < full["losses"][0] - 0.5
    assert micro["losses"] == pytest.approx(full["losses"], rel=1e-5)
    # the largest difference of a parameter, relative to its array's scale (at least 1):
    # Adam scales the rounding-level gradients of rarely seen tokens' embeddings up to whole
    # steps, so these differ by about 5e-5 after 20 steps; every other array by under 1e-5
    assert result["parameters"] < 5e-4
    # the program: one more loop (the scan over micro-batches), a quarter of the
    # activations live at a time, and each micro-batch spread over both devices as the
    # batch was (the same collectives: no data moves between devices)
    assert micro["loops"] == full["loops"] + 1
    assert micro["temp"] < 0.6 * full["temp"]
    assert micro["collectives"] == full["collectives"]
    # at the trainer's start, with the real device count: 8 sequences over 2 devices
    assert result["refused"] == (
        "TrainLmConfig.microbatch_size=8 is larger than the per-device batch of 4 "
        "(batch_size=8 over 2 device(s)): give at most 4, or None for the whole per-device "
        "batch")


def test_the_planner_chooses_the_largest_micro_batch_that_divides_and_fits():
    config = tiny_config(Path("/c"), Path("/o")).model
    state = config.num_params() * STATE_BYTES_PER_PARAM / 2
    accumulator = config.num_params() * ACCUMULATOR_BYTES_PER_PARAM / 2
    sequence = activation_bytes_per_sequence(config)
    # 24 sequences over 2 devices: 12 each; room for 5. Halving would give 6, then 3.
    limit = state + accumulator + 5.5 * sequence
    estimate = estimate_training_memory(config, batch_size=24, devices=2, memory_limit=limit)
    assert estimate.microbatch_size == 4
    assert estimate.per_device_bytes == pytest.approx(state + accumulator + 4 * sequence)
    whole = estimate_training_memory(config, batch_size=24, devices=2)
    assert whole.microbatch_size == 12  # no limit: one pass, no accumulator
    assert whole.per_device_bytes == pytest.approx(state + 12 * sequence)


@dataclasses.dataclass(frozen=True)
class _SmallAccelerator(CompletedAdamhHeuristic):
    """The heuristic planning for a CPU preset with ``memory_bytes`` of memory."""

    memory_bytes: float = CPU.memory_bytes

    def _preset(self):
        return dataclasses.replace(CPU, memory_bytes=self.memory_bytes)


SWEEP = dict(vocab_size=VOCAB, seq_len=64, hardware="cpu", devices=1, min_hidden=32,
             max_hidden=32, hidden_step=32, head_dim=32, target_steps=20, min_batch_size=4,
             min_train_steps=10, reference_batch_size=4, reference_tokens=5e5)


@pytest.mark.slow
def test_a_candidate_planned_with_a_micro_batch_runs_with_it(cache: Path, tmp_path: Path):
    from marin.training import train_lm

    roomy = next(iter(CompletedAdamhHeuristic(**SWEEP).candidates_for_budget(1e11)))
    model = roomy.model_config
    assert roomy.batch_size == 8
    # room for the state, the accumulator and 2.5 sequences' activations
    limit = model.num_params() * 20 + 2.5 * activation_bytes_per_sequence(model)
    candidate = next(iter(_SmallAccelerator(**SWEEP, memory_bytes=limit)
                          .candidates_for_budget(1e11)))
    assert (candidate.model_config, candidate.batch_size) == (model, 8)
    assert candidate.microbatch_size == 2 and candidate.estimated_memory_per_device <= limit
    options = {"tokenizer": str(cache / "tokenizer"), "eval_every": 0}
    config = training_config(candidate, str(cache / "cache"), options,
                             output_path=str(tmp_path / "run"))
    assert config.microbatch_size == 2  # what the planner assumed is what runs
    assert training_config(roomy, str(cache / "cache"), options).microbatch_size is None
    summary = train_lm(dataclasses.replace(config, train_steps=10))
    losses = [r["train/loss"] for r in map(json.loads, (tmp_path / "run" / "metrics.jsonl")
                                            .open()) if "train/loss" in r]
    assert summary.steps == 10 and len(losses) == 10 and losses[-1] < losses[0] - 0.1


def test_a_micro_batch_the_planned_devices_cannot_hold_is_refused_when_the_run_is_built():
    candidate = next(iter(CompletedAdamhHeuristic(**{**SWEEP, "devices": 2})
                          .candidates_for_budget(1e11)))
    assert (candidate.batch_size, candidate.devices) == (8, 2)
    with pytest.raises(TrainingConfigError, match=r"^TrainLmConfig.microbatch_size=8 is larger "
                       r"than the per-device batch of 4 \(batch_size=8 over 2 device\(s\)\)"):
        training_config(candidate, "/cache", {"microbatch_size": 8})
    assert training_config(candidate, "/cache", {"microbatch_size": 2}).microbatch_size == 2
