"""The executor runs packs (``--pack N``): each member trains as it would alone, keeps its
own step (lease, status, commit), fails alone, and is never trained twice. Real tiny
training runs, a real second executor process."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from marin.execution import Executor, StepState
from marin.execution.packs import plan_packs
from marin.execution.status import StatusRecord, status_path
from marin.training import train_lm
from tests.conftest import ROOT
from tests.fixtures.pack_experiment import RUNS, STEPS, member_config, pack_steps
from tests.helpers.processes import marin_command

pytestmark = pytest.mark.slow


def _losses(folder: Path) -> list[float]:
    rows = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    return [r["train/loss"] for r in rows if "train/loss" in r]


def _durations(folder: Path) -> list[float]:
    rows = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    return [r["throughput/duration"] for r in rows if "train/loss" in r]


def _states(result) -> dict[str, StepState]:
    return {s.name: s.state for s in result.steps}


def test_members_train_as_alone_fail_alone_and_a_rerun_skips_them(cache: Path,
                                                                   tmp_path: Path):
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
        seed, lr = RUNS[name]
        alone = tmp_path / "alone" / name
        train_lm(member_config(cache, seed, lr, str(alone)))
        assert len(_losses(outputs[name])) == STEPS
        np.testing.assert_allclose(_losses(outputs[name]), _losses(alone), rtol=1e-6)
        assert json.loads((outputs[name] / "summary.json").read_text())["eval_loss"] == \
            pytest.approx(json.loads((alone / "summary.json").read_text())["eval_loss"],
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


def test_a_member_leased_by_another_executor_is_not_trained_twice(cache: Path,
                                                                   tmp_path: Path):
    prefix = tmp_path / "prefix"
    other = subprocess.Popen(
        [*marin_command(), "executor", "--prefix", str(prefix), "--run-only", "train/b",
         "tests.fixtures.pack_experiment"], cwd=ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "MARIN_TEST_CACHE": str(cache)})
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
