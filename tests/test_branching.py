"""Branches on real text with real processes: a cooldown from a stable run's checkpoint is
the same optimization as a from-scratch warmup-stable-decay run, resumes after a kill, and
waits for a killed parent to come back and publish its step."""

from __future__ import annotations

import dataclasses
import json
import math
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np
import pytest

import marin.training.trainer as trainer
from marin.training import BranchPoint, read_summary, train_lm
from marin.training.checkpoint import complete_checkpoints
from marin.training.hyperparameters import DECAY_SHAPES
from marin.training.optimizer import Optimizer
from tests.conftest import ROOT
from tests.helpers.training import tiny_config

pytestmark = pytest.mark.slow


def _config(cache: Path, out: Path, train_steps: int, decay_fraction: float = 0.0,
            decay_shape: str = "1-sqrt", **changes):
    config = tiny_config(cache, out, train_steps=train_steps, eval_every=0, eval_batches=1,
                         compute_dtype="float32", async_checkpoints=False, **changes)
    return dataclasses.replace(config, model=dataclasses.replace(
        config.model, num_layers=1, hidden_dim=32, intermediate_dim=64, num_heads=2,
        num_kv_heads=1, seq_len=32), optimizer=dataclasses.replace(
        config.optimizer, warmup_fraction=0.1, decay_fraction=decay_fraction,
        decay_shape=decay_shape))


def _reference_lr(step: int, peak: float, start: int, steps: int, shape: str) -> float:
    """The decay's learning rate after ``step`` updates, from its definition."""
    x = min(max(step - start, 0), steps) / steps
    return peak * {"linear": 1 - x, "1-sqrt": 1 - math.sqrt(x),
                   "cosine": (1 + math.cos(math.pi * x)) / 2}[shape]


@pytest.mark.parametrize("shape", DECAY_SHAPES)
def test_a_branchs_learning_rate_is_the_from_scratch_runs_at_every_step(cache: Path, shape):
    total, k = 40, 30
    parent = _config(cache, Path("/unused"), 36, decay_shape=shape)
    scratch = dataclasses.replace(parent.optimizer, decay_fraction=0.25)  # decays from 30
    params = {"w": jax.numpy.ones((4, 4)), "b": jax.numpy.ones(4)}

    def rates(hyper, decay_from=None):
        optimizer = Optimizer.of(hyper, total, params, decay_from)
        schedule = optimizer.schedule(optimizer.values(hyper, total, decay_from))
        return [float(schedule(step)) for step in range(k, total + 1)]

    branch = rates(parent.optimizer, decay_from=k)
    assert branch == rates(scratch)  # the same bits
    peak = parent.optimizer.learning_rate
    assert branch == pytest.approx([_reference_lr(s, peak, k, total - k, shape)
                                    for s in range(k, total + 1)], rel=1e-6, abs=1e-9)


def _losses(run: Path, metric: str = "train/loss") -> dict[int, float]:
    return {r["step"]: r[metric] for r in map(json.loads, (run / "metrics.jsonl").open())
            if metric in r}


def test_a_cooldown_branch_optimizes_exactly_as_the_from_scratch_wsd_run(cache: Path,
                                                                          tmp_path: Path):
    stable = _config(cache, tmp_path / "stable", 12, checkpoint_every=4)
    train_lm(stable)
    branch = dataclasses.replace(_config(cache, tmp_path / "branch", 16),
                                 init_from=BranchPoint(str(tmp_path / "stable"), 8))
    summary = train_lm(branch)
    # the same run from scratch: 16 steps, warmup 1, decay over steps 8..16, same shape
    scratch = _config(cache, tmp_path / "scratch", 16, decay_fraction=0.5)
    train_lm(scratch)
    branched, straight = _losses(tmp_path / "branch"), _losses(tmp_path / "scratch")
    assert sorted(branched) == list(range(9, 17))  # its own steps only
    # step 9 trains on batch 8: the first batch after the branch point is the parent's next
    assert [branched[s] for s in range(9, 17)] == pytest.approx(
        [straight[s] for s in range(9, 17)], rel=2e-5)
    rates = [_losses(run, "optim/learning_rate") for run in (tmp_path / "branch",
                                                              tmp_path / "scratch")]
    assert [rates[0][s] for s in range(9, 17)] == [rates[1][s] for s in range(9, 17)]
    assert [_losses(tmp_path / "stable")[s] for s in range(1, 9)] == pytest.approx(
        [straight[s] for s in range(1, 9)], rel=2e-5)
    tokens_per_step = branch.batch_size * branch.model.seq_len
    assert summary.tokens == 16 * tokens_per_step
    assert summary.flops == pytest.approx(8 * tokens_per_step
                                          * branch.model.training_flops_per_token())
    on_disk = read_summary(str(tmp_path / "branch"))
    assert (on_disk.parent_run, on_disk.branch_step) == (str(tmp_path / "stable"), 8)
    assert read_summary(str(tmp_path / "scratch")).parent_run is None


SCRIPT = """
import dataclasses, os, signal, sys
from pathlib import Path
sys.path.insert(0, {root!r})
import marin.training.trainer as trainer
from marin.training import BranchPoint, train_lm
from marin.training.checkpoint import Checkpoints
from tests.test_branching import _config
original_save, original_wait = Checkpoints.save, trainer.wait_for_branch_point
def save_then_die(self, step, state, meta):
    original_save(self, step, state, meta)  # synchronous: the step is complete
    if step == {die_after}:
        os.kill(os.getpid(), signal.SIGKILL)
def wait(point):
    Path({out!r}, "..", "waiting").resolve().write_text("")
    return original_wait(point)
Checkpoints.save, trainer.wait_for_branch_point = save_then_die, wait
config = _config(Path({cache!r}), Path({out!r}), {steps}, checkpoint_every={every},
                 checkpoint_keep_every=4)
if {branch_from!r}:
    config = dataclasses.replace(config, init_from=BranchPoint({branch_from!r}, 4))
train_lm(config)
"""


def _start(cache: Path, out: Path, steps: int, every: int, die_after: int,
           branch_from: str = "") -> subprocess.Popen:
    script = SCRIPT.format(root=str(ROOT), cache=str(cache), out=str(out), steps=steps,
                           every=every, die_after=die_after, branch_from=branch_from)
    return subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


def _killed(proc: subprocess.Popen) -> None:
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == -signal.SIGKILL, err.decode()[-3000:]


def test_a_branch_waits_for_a_killed_parent_and_resumes_from_its_own_checkpoint(
        cache: Path, tmp_path: Path, monkeypatch):
    parent, branch = tmp_path / "stable", tmp_path / "branch"
    _killed(_start(cache, parent, 8, every=2, die_after=2))  # dies before step 4
    assert [s for s, _ in complete_checkpoints(str(parent / "checkpoints"))] == [2]
    waiting = _start(cache, branch, 8, every=1, die_after=6, branch_from=str(parent))
    deadline = time.monotonic() + 300
    while not (tmp_path / "waiting").exists():  # it looks for step 4, which is not there
        assert waiting.poll() is None, waiting.communicate()[1].decode()[-3000:]
        assert time.monotonic() < deadline, "the branch never started waiting"
        time.sleep(0.05)
    assert waiting.poll() is None and not complete_checkpoints(str(branch / "checkpoints"))
    train_lm(_config(cache, parent, 8, checkpoint_every=2, checkpoint_keep_every=4))
    _killed(waiting)  # it went on from step 4 once published, and died after its step 6
    assert [s for s, _ in complete_checkpoints(str(branch / "checkpoints"))][-1] == 6

    def parent_read(*args):
        raise AssertionError("a branch with checkpoints of its own read its parent's")

    monkeypatch.setattr(trainer, "read_checkpoint", parent_read)
    resumed = dataclasses.replace(_config(cache, branch, 8, checkpoint_every=1),
                                  init_from=BranchPoint(str(parent), 4))
    train_lm(resumed)
    monkeypatch.undo()
    train_lm(dataclasses.replace(resumed, output_path=str(tmp_path / "straight")))
    got, want = _losses(branch), _losses(tmp_path / "straight")
    assert sorted(got) == sorted(want) == list(range(5, 9))
    assert [got[s] for s in range(5, 9)] == pytest.approx([want[s] for s in range(5, 9)],
                                                          rel=1e-6)
    assert np.isfinite(list(got.values())).all()
