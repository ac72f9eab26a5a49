"""Checkpoints in the folder that a training step's attempts share: a resume and a commit
copy none of them, and a paused attempt that lost its lease neither publishes nor deletes
one. Real executors as processes, a real tiny training run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from marin.training import train_lm
from marin.training.checkpoint import Checkpoints, complete_checkpoints
from tests.conftest import ROOT
from tests.helpers.processes import marin_command
from tests.helpers.training import tiny_config

pytestmark = pytest.mark.slow

EXPERIMENT = "tests.fixtures.train_experiment"
STEPS = 60


def _start(tmp_path: Path, cache: Path, *extra: str, **env: str) -> subprocess.Popen:
    return subprocess.Popen(
        [*marin_command(), "executor", "--prefix", str(tmp_path / "prefix"), *extra,
         EXPERIMENT], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "MARIN_TEST_CACHE": str(cache),
             "MARIN_TEST_STEPS": str(STEPS), **env})


def _finish(proc: subprocess.Popen, timeout: float = 600) -> tuple[int, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out + err


def _output(tmp_path: Path) -> Path:
    (found,) = (tmp_path / "prefix" / "train").glob("tiny-*")
    return found


def _wait_for_marker(tmp_path: Path, proc: subprocess.Popen, step: int) -> Path:
    deadline = time.monotonic() + 300
    while True:
        assert proc.poll() is None, f"executor exited early: {proc.communicate()}"
        found = list((tmp_path / "prefix" / "train").glob(
            f"tiny-*/checkpoints/step_{step:08d}.ref"))
        if found:
            return found[0]
        assert time.monotonic() < deadline, "no checkpoint was published"
        time.sleep(0.02)


def _losses(metrics: Path) -> list[tuple[int, float]]:
    rows = [json.loads(line) for line in metrics.read_text().splitlines()]
    return [(r["step"], r["train/loss"]) for r in rows if "train/loss" in r]


def _runs(marker: Path) -> str:
    return json.loads(marker.read_text())["run"]


def test_a_paused_holder_neither_publishes_nor_deletes_and_the_resume_matches_a_straight_run(
        cache: Path, tmp_path: Path):
    # Each save waits 1 s after it starts: the paused run has steps left to train and
    # checkpoints left to write once it is let go.
    paused = _start(tmp_path, cache, "--lease-ttl", "3", MARIN_TEST_SAVE_SLEEP="1")
    first = _wait_for_marker(tmp_path, paused, 20)
    paused.send_signal(signal.SIGSTOP)
    paused_run = _runs(first)
    try:
        code, text = _finish(_start(tmp_path, cache))
        assert code == 0, text
    finally:
        paused.send_signal(signal.SIGCONT)
    code, text = _finish(paused)
    assert code == 1 and "taken over by another executor" in text, text
    output = _output(tmp_path)
    status = json.loads((output / ".executor_status").read_text())
    assert status["status"] == "SUCCESS" and "checkpoints" in status["outputs"]
    # Both attempts wrote checkpoints in the shared folder; only the holder's count.
    runs = {p.name for p in (output / "checkpoints" / "runs").iterdir()}
    assert paused_run in runs and len(runs) == 2, runs
    holder = (runs - {paused_run}).pop()
    assert status["run_id"] == holder
    written_by_paused = {p.name for p in (output / "checkpoints" / "runs" / paused_run
                                          ).glob("step_*")}
    assert any(int(n.split("_")[1]) > 20 for n in written_by_paused), written_by_paused
    markers = sorted((output / "checkpoints").glob("step_*.ref"))
    assert [m.name for m in markers] == [f"step_{s:08d}.ref" for s in (STEPS - 10, STEPS)]
    assert {_runs(m) for m in markers} == {holder}
    # The committed output restores, and its losses are an uninterrupted run's.
    straight = tmp_path / "straight"
    config = tiny_config(cache, straight, train_steps=STEPS, eval_every=0, checkpoint_every=10)
    train_lm(config)
    checkpoints = Checkpoints(str(output / "checkpoints"))
    assert checkpoints.latest_step() == STEPS
    reference = Checkpoints(str(straight / "checkpoints"))
    like = _like(config)
    (model, _), meta = checkpoints.restore(STEPS, like=like)
    (expected, _), _ = reference.restore(STEPS, like=like)
    checkpoints.close()
    reference.close()
    assert meta["data_step"] == STEPS
    import jax
    import numpy as np

    for got, want in zip(jax.tree.leaves(model), jax.tree.leaves(expected), strict=True):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
    resumed, uninterrupted = _losses(output / "metrics.jsonl"), _losses(straight / "metrics.jsonl")
    assert [s for s, _ in resumed] == list(range(1, STEPS + 1))
    assert [v for _, v in resumed] == pytest.approx([v for _, v in uninterrupted], rel=1e-6)
    assert [s for s, _ in complete_checkpoints(str(output / "checkpoints"))] == [STEPS - 10,
                                                                                 STEPS]


def _like(config):
    import equinox as eqx
    import jax

    from marin.models.transformer import TransformerLM
    from marin.training.optimizer import build_optimizer

    model = TransformerLM.init(config.model, key=jax.random.PRNGKey(config.seed))
    params = eqx.filter(model, eqx.is_inexact_array)
    tx, _ = build_optimizer(config.optimizer, config.train_steps, params)
    return model, tx.init(params)


def test_a_rerun_of_a_succeeded_step_starts_afresh(cache: Path, tmp_path: Path):
    code, text = _finish(_start(tmp_path, cache, MARIN_TEST_STEPS="20"))
    assert code == 0, text
    output = _output(tmp_path)
    before = {m.name: _runs(m) for m in (output / "checkpoints").glob("step_*.ref")}
    code, text = _finish(_start(tmp_path, cache, "--force-run", "train/tiny",
                                MARIN_TEST_STEPS="20"))
    assert code == 0, text
    after = {m.name: _runs(m) for m in (output / "checkpoints").glob("step_*.ref")}
    assert after.keys() == before.keys() and not set(after.values()) & set(before.values())
    assert [s for s, _ in _losses(output / "metrics.jsonl")] == list(range(1, 21))




_CONCURRENT_SAVES = """
import os, sys, threading, time
import jax.numpy as jnp
from marin.training.checkpoint import Checkpoints

root, runs, saves = sys.argv[1], 3, 8
failures = []

def run(i):
    try:
        checkpoints = Checkpoints(os.path.join(root, f"run{i}"), keep_last=2)
        for step in range(1, saves + 1):
            checkpoints.save(step, {"w": jnp.full((64, 64), float(i * 100 + step))},
                             {"data_step": step})
        checkpoints.close()
    except BaseException as e:
        failures.append(f"run{i}: {type(e).__name__}: {e}")

threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(runs)]
for t in threads:
    t.start()
deadline = time.monotonic() + 120
for t in threads:
    t.join(max(0.0, deadline - time.monotonic()))
hung = [t.name for t in threads if t.is_alive()]
print("hung:", len(hung), "failures:", failures, flush=True)
os._exit(1 if hung or failures else 0)
"""


def test_runs_saving_at_once_in_one_process_all_commit(tmp_path: Path):
    """Three runs in threads of one process (as an executor runs training steps side by
    side), each saving asynchronously: every save commits, none waits on another's."""
    try:
        done = subprocess.run([sys.executable, "-c", _CONCURRENT_SAVES, str(tmp_path)],
                              cwd=ROOT, capture_output=True, text=True, timeout=240)
    except subprocess.TimeoutExpired:
        pytest.fail("the concurrent saves hung")
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    import jax.numpy as jnp

    like = {"w": jnp.zeros((64, 64))}
    for i in range(3):
        checkpoints = Checkpoints(str(tmp_path / f"run{i}"))
        assert checkpoints.steps() == [7, 8]
        restored, meta = checkpoints.restore(8, like=like)
        checkpoints.close()
        assert meta["data_step"] == 8
        assert float(restored["w"][0, 0]) == i * 100 + 8

