"""A study's candidate run killed with SIGKILL mid-training resumes from its last checkpoint
on the next run, and ends with the losses of a run that was never interrupted (real
processes: the executor in a child process, killed as a whole)."""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from marin.training.checkpoint import complete_checkpoints
from tests.conftest import ROOT
from tests.helpers.studies import play_corpus

pytestmark = pytest.mark.slow

SCRIPT = """
import sys
from marin.execution import Executor
from marin.scaling_laws.study import StudyCorpus, isoflop_study, run_candidate
from tests.helpers.studies import TINY, VOCAB

corpus = StudyCorpus(train=(sys.argv[2],), validation=(sys.argv[3],))
steps = isoflop_study("resume", corpus, (3e9,), TINY, tokenizer_vocab_size=VOCAB,
                      train_options={"compute_dtype": "float32", "eval_batches": 1,
                                     "checkpoint_every": 100, "async_checkpoints": False,
                                     "log_every": 10000})
[run] = [s for s in steps.steps if s.fn is run_candidate and s.name.endswith("-h16-l1")]
result = Executor(sys.argv[1], max_concurrent=1, lease_ttl=4).run(steps, run_only=[run.name])
print("RUN", result.ok, [(s.name, s.state.value) for s in result.steps], flush=True)
sys.exit(0 if result.ok else 1)
"""


def _run(script: Path, prefix: Path, corpus, **popen) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, str(script), str(prefix), corpus.train[0],
                             corpus.validation[0]], cwd=ROOT, env=env, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            **popen)


def _losses(prefix: Path) -> tuple[dict[int, float], list[int]]:
    """The run's train loss per step, and the steps that compiled (a run's first step)."""
    [run] = glob.glob(str(prefix / "resume" / "runs" / "*" / "*-h16-l1-*"))
    losses: dict[int, float] = {}
    compiled = []
    for line in (Path(run) / "metrics.jsonl").read_text().splitlines():
        record = json.loads(line)
        if "train/loss" in record:
            assert record["step"] not in losses, "a step was logged twice"
            losses[record["step"]] = record["train/loss"]
        if "compile_time" in record:
            compiled.append(record["step"])
    return losses, compiled


def test_a_killed_study_run_resumes_from_its_checkpoint_with_the_same_losses(tmp_path):
    corpus = play_corpus(tmp_path / "data", 0)
    script = tmp_path / "study.py"
    script.write_text(SCRIPT)

    killed = tmp_path / "killed"
    proc = _run(script, killed, corpus)
    deadline = time.monotonic() + 600
    found: list = []
    while not found:
        assert proc.poll() is None, "the run finished before it could be killed: " + \
            (proc.stdout.read() if proc.stdout else "")
        assert time.monotonic() < deadline, "no checkpoint appeared"
        roots = [os.path.join(d, "checkpoints") for d, subdirs, _ in os.walk(killed)
                 if "checkpoints" in subdirs]  # attempts live in hidden folders
        found = [c for root in roots for c in complete_checkpoints(root)]
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    kept = max(step for root in roots for step, _ in complete_checkpoints(root))
    assert not glob.glob(str(killed / "resume" / "runs" / "*" / "*-h16-l1-*" / "outcome.json"))

    again = _run(script, killed, corpus)
    log, _ = again.communicate(timeout=900)
    assert again.returncode == 0, log[-3000:]

    fresh = tmp_path / "fresh"
    reference = _run(script, fresh, corpus)
    reference_log, _ = reference.communicate(timeout=900)
    assert reference.returncode == 0, reference_log[-3000:]

    (resumed, compiled), (uninterrupted, fresh_compiled) = _losses(killed), _losses(fresh)
    # the new attempt started from the checkpoint, not from step 0: its first step, which
    # compiled, follows the checkpoint; the uninterrupted run compiled nothing there
    assert 0 < kept < max(resumed)
    assert kept + 1 in compiled and kept + 1 not in fresh_compiled and 1 in fresh_compiled
    assert sorted(resumed) == sorted(uninterrupted) and len(resumed) > 100
    assert resumed == uninterrupted  # bit for bit: the same data and state after the kill
    [outcome] = glob.glob(str(killed / "resume" / "runs" / "*" / "*-h16-l1-*" / "outcome.json"))
    assert json.loads(Path(outcome).read_text())["status"] == "ok"
