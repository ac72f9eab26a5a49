"""The executor runs packs (``--pack N``): each member trains as it would alone, keeps its
own step (lease, status, commit), fails alone, and is never trained twice. Real tiny
training runs, a real second executor process."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from marin.execution import Executor, ExecutorStep, StepState
from marin.execution.frontend.render import print_plan
from marin.execution.packs import plan_packs
from marin.execution.status import StatusRecord, status_path
from marin.models import TransformerConfig
from marin.models.memory import estimate_training_memory
from marin.training import TrainingConfigError, train_lm
from marin.training.packing import pack_train
from tests.conftest import ROOT
from tests.fixtures.pack_experiment import RUNS, STEPS, member_config, pack_steps
from tests.helpers.processes import marin_command

EXPERIMENT = "tests.fixtures.pack_experiment"


@pytest.fixture(scope="module")
def alone(cache: Path, tmp_path_factory) -> dict[str, Path]:
    """train/a and train/b trained alone, outside any executor: the reference."""
    root = tmp_path_factory.mktemp("alone")
    folders = {}
    for name in ("train/a", "train/b"):
        seed, lr = RUNS[name]
        folders[name] = root / name
        train_lm(member_config(cache, seed, lr, str(folders[name])))
    return folders


def _executor(prefix: Path, cache: Path, *extra: str, **env: str) -> subprocess.Popen:
    return subprocess.Popen(
        [*marin_command(), "executor", "--prefix", str(prefix), *extra, EXPERIMENT],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "MARIN_TEST_CACHE": str(cache), **env})


def _losses(folder: Path) -> list[float]:
    rows = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    return [r["train/loss"] for r in rows if "train/loss" in r]


def _durations(folder: Path) -> list[float]:
    rows = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    return [r["throughput/duration"] for r in rows if "train/loss" in r]


def _states(result) -> dict[str, StepState]:
    return {s.name: s.state for s in result.steps}


@pytest.mark.slow
def test_members_train_as_alone_fail_alone_and_a_rerun_skips_them(cache: Path,
                                                                   tmp_path: Path, alone):
    steps = pack_steps(cache)
    executor = Executor(str(tmp_path / "prefix"), max_concurrent=1, pack=3)
    packs = plan_packs(executor.plan(steps), executor.pack)
    assert [[e.name for e in pack] for pack in packs] == [list(RUNS)]
    result = executor.run(steps)
    assert _states(result) == {"train/a": StepState.SUCCEEDED, "train/b": StepState.SUCCEEDED,
                               "train/diverges": StepState.FAILED}
    (failed,) = result.failed
    assert "TrainingDivergedError" in failed.error and "learning_rate" in failed.error
    outputs = {s.name: Path(s.output_path) for s in result.steps}
    for name in RUNS:  # each member's own status, written by its own worker
        record = StatusRecord.decode(Path(status_path(str(outputs[name]))).read_bytes())
        assert record.status is _states(result)[name]
    assert not (outputs["train/diverges"] / "summary.json").exists()
    for name in ("train/a", "train/b"):
        assert len(_losses(outputs[name])) == STEPS
        np.testing.assert_allclose(_losses(outputs[name]), _losses(alone[name]), rtol=1e-6)
        assert json.loads((outputs[name] / "summary.json").read_text())["eval_loss"] == \
            pytest.approx(json.loads((alone[name] / "summary.json").read_text())["eval_loss"],
                          rel=1e-6)
    assert _losses(outputs["train/a"]) != _losses(outputs["train/b"])
    # one compiled update stepped both: each step took one time, recorded by each member
    assert _durations(outputs["train/a"]) == _durations(outputs["train/b"])
    # packing is not part of a step's identity: unpacked, the rerun skips what succeeded
    again = Executor(str(tmp_path / "prefix"), max_concurrent=1).run(
        steps, force_run_failed=False)
    assert _states(again) == {"train/a": StepState.SKIPPED, "train/b": StepState.SKIPPED,
                              "train/diverges": StepState.FAILED}
    assert len(_losses(outputs["train/a"])) == STEPS


@pytest.mark.slow
def test_a_member_leased_by_another_executor_is_not_trained_twice(cache: Path,
                                                                   tmp_path: Path):
    prefix = tmp_path / "prefix"
    other = _executor(prefix, cache, "--run-only", "train/b")
    try:
        steps = pack_steps(cache)[:2]
        executor = Executor(str(prefix), max_concurrent=1, pack=2)
        deadline = time.monotonic() + 300
        while True:  # until the other executor runs train/b under its lease
            found = list(prefix.glob("train/b-*/.executor_status"))
            if found and StatusRecord.decode(found[0].read_bytes()).status is \
                    StepState.RUNNING:
                break
            assert other.poll() is None, other.communicate()[0]
            assert time.monotonic() < deadline, "the other executor never ran train/b"
            time.sleep(0.05)
        result = executor.run(steps)
        assert other.wait(timeout=300) == 0, other.communicate()[0]
    finally:
        if other.poll() is None:
            other.kill()
            other.wait()
    assert _states(result) == {"train/a": StepState.SUCCEEDED, "train/b": StepState.REUSED}
    (a,), (b,) = prefix.glob("train/a-*"), prefix.glob("train/b-*")
    ours = StatusRecord.decode((a / ".executor_status").read_bytes())
    theirs = StatusRecord.decode((b / ".executor_status").read_bytes())
    assert theirs.status is StepState.SUCCEEDED and theirs.run_id != ours.run_id
    assert len(_losses(b)) == STEPS and len(_losses(a)) == STEPS  # b trained once, by them


def _refs(output: Path) -> list[Path]:
    return sorted((output / "checkpoints").glob("step_*.ref"))


@pytest.mark.slow
def test_a_killed_pack_resumes_each_member_from_its_own_checkpoint(cache: Path,
                                                                   tmp_path: Path, alone):
    prefix = tmp_path / "prefix"
    run_only = ("--run-only", "train/a", "--run-only", "train/b", "--pack", "2")
    first = _executor(prefix, cache, *run_only, MARIN_TEST_SAVE_SLEEP="0.5")
    try:
        deadline = time.monotonic() + 300
        while len(list(prefix.glob("train/*/checkpoints/step_00000002.ref"))) < 2:
            assert first.poll() is None, first.communicate()[0]
            assert time.monotonic() < deadline, "the pack published no checkpoint"
            time.sleep(0.02)
    finally:
        first.kill()  # SIGKILL: no status, no lease released, no save finished
        first.wait()
    (a,), (b,) = prefix.glob("train/a-*"), prefix.glob("train/b-*")
    assert StatusRecord.decode((a / ".executor_status").read_bytes()).status is \
        StepState.RUNNING
    for ref in _refs(b):  # b stands at step 0, a at its newest checkpoint: two packs
        ref.unlink()
    assert _refs(a) and not _refs(b)
    resumed = Executor(str(prefix), max_concurrent=1, pack=2).run(pack_steps(cache)[:2])
    notes = {s.name: s.note for s in resumed.steps}
    assert _states(resumed) == {"train/a": StepState.SUCCEEDED, "train/b": StepState.SUCCEEDED}
    assert "resumed from checkpoints/step_0000000" in notes["train/a"]
    assert "checkpoints/" not in notes["train/b"]  # from the start: the files of its attempt
    for name, output in (("train/a", a), ("train/b", b)):
        rows = [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines()]
        assert [r["step"] for r in rows if "train/loss" in r] == list(range(1, STEPS + 1))
        np.testing.assert_allclose(_losses(output), _losses(alone[name]), rtol=1e-6)
        assert StatusRecord.decode((output / ".executor_status").read_bytes()).status is \
            StepState.SUCCEEDED


def _big(cache: Path, hidden: int, layers: int, seed: int = 0):
    config = member_config(cache, seed, 1e-3)
    return dataclasses.replace(config, model=TransformerConfig(
        hidden_dim=hidden, intermediate_dim=4 * hidden, num_layers=layers, num_heads=16,
        num_kv_heads=16, vocab_size=32000, seq_len=512))


def test_packs_hold_what_fits_on_one_device_and_a_larger_one_is_refused(tmp_path: Path):
    cache = tmp_path / "nowhere"  # nothing trains: packs are formed or refused first
    config = _big(cache, 1024, 16)
    memory = estimate_training_memory(config.model, config.batch_size, 1)
    fits = int(16e9 // memory.per_device_bytes)  # the cpu preset's 16 GB
    assert fits == 2
    steps = [ExecutorStep(f"big/{seed}", train_lm, dataclasses.replace(
        config, seed=seed, output_path=str(tmp_path / f"out-{seed}"))) for seed in range(3)]
    executor = Executor(str(tmp_path / "prefix"), pack=3)
    plan = executor.plan(steps)
    assert [[e.name for e in p] for p in plan_packs(plan, 3)] == [["big/0", "big/1"]]
    assert plan_packs(plan, 1) == []
    out = Console(file=io.StringIO(), width=200)
    print_plan(plan, out, packs=plan_packs(plan, 3))
    text = out.file.getvalue()
    assert "pack 1: trains together with big/1" in text and "packs: 1, of 2 steps" in text
    members = [dataclasses.replace(config, seed=s, output_path=str(tmp_path / f"m{s}"))
               for s in range(3)]
    with pytest.raises(TrainingConfigError) as refused:
        pack_train(members)
    message = str(refused.value)
    assert "\n" not in message and "K=3" in message and "pack at most 2" in message
    assert f"{memory.per_device_bytes / 1e9:.3g} GB each" in message
    assert not any((tmp_path / f"m{s}").exists() for s in range(3))
    with pytest.raises(ValueError, match="`pack` must be a whole number"):
        Executor(str(tmp_path / "prefix"), pack=0)
