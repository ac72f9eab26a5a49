"""Steps whose function can resume, resume by default: a plain training step
(``ExecutorStep("train/plain", train_lm, config)``, no ``resumable`` argument) killed with
SIGKILL once a checkpoint is published trains only the steps after it on the next run, on
one host and on two, and ends with an uninterrupted run's losses; ``resumable=False`` starts
from step 0. Real processes: ``marin executor`` on ``tests/fixtures/plain_training.py``,
each killed from inside the process that trains (the executor's own with one host, host 1
of the gang with two). Which steps a run trained is read from what each process read (one
record per batch) and from the metrics' times; which step a run resumed from, from its
output. A plain tokenize step killed midway reuses the units it finished."""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import NamedTuple

import pytest

from marin.execution import Executor, ExecutorStep, resumable
from marin.execution.status import lease_path
from marin.execution.step import StepDefinitionError
from marin.processing.tokenize import TokenizeConfig, tokenize
from marin.processing.tokenize.ledger import read_ledger
from marin.training import train_lm
from tests.conftest import ROOT
from tests.fixtures import plain_training
from tests.fixtures.plain_training import KILL_AFTER, STEPS, training_config
from tests.helpers.corpus import plays
from tests.helpers.processes import marin_command

pytestmark = pytest.mark.slow

EXPERIMENT = str(ROOT / "tests" / "fixtures" / "plain_training.py")


def _executor(prefix: Path, cache: Path, witness: Path, **env: str
              ) -> subprocess.CompletedProcess:
    witness.mkdir(parents=True)
    return subprocess.run(
        [*marin_command(), "executor", "--prefix", str(prefix), EXPERIMENT], cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "MARIN_TEST_CACHE": str(cache),
             "MARIN_TEST_WITNESS": str(witness), **env},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900)


def _output(prefix: Path) -> Path:
    [output] = (prefix / "train").glob("plain-*")
    return output


def _metrics(output: Path) -> dict[int, dict]:
    """Step -> its training record, each step logged once."""
    records = [json.loads(line) for line in (output / "metrics.jsonl").open()]
    steps = [r["step"] for r in records if "train/loss" in r]
    assert len(steps) == len(set(steps)), f"a step was logged twice: {steps}"
    return {r["step"]: r for r in records if "train/loss" in r}


def _read_steps(witness: Path, host: int) -> list[int]:
    """The batches (0-based steps) host ``host`` read, in order."""
    return [json.loads(line)["step"] for line in (witness / f"host-{host}.jsonl").open()]


class Killed(NamedTuple):
    prefix: Path
    run: subprocess.CompletedProcess
    at: float
    """When the killed process killed itself."""


def _killed_run(root: Path, cache: Path, hosts: int) -> Killed:
    witness = root / "killed"
    run = _executor(root / "prefix", cache, witness, MARIN_TEST_HOSTS=str(hosts),
                    MARIN_TEST_KILL_HOST=str(hosts - 1))
    assert (witness / "killed").exists(), run.stdout[-3000:]
    return Killed(root / "prefix", run, float((witness / "killed").read_text()))


@pytest.fixture(scope="module")
def reference(cache: Path, tmp_path_factory) -> dict[int, float]:
    """The losses of one uninterrupted run in one process."""
    out = tmp_path_factory.mktemp("uninterrupted")
    train_lm(dataclasses.replace(training_config(cache), output_path=str(out)))
    return {step: r["train/loss"] for step, r in _metrics(out).items()}


@pytest.fixture(scope="module")
def one_host(cache: Path, tmp_path_factory) -> Killed:
    """The executor's process killed after checkpoint KILL_AFTER; a copy of its prefix as
    the kill left it, for the run that opts out."""
    root = tmp_path_factory.mktemp("one-host")
    killed = _killed_run(root, cache, hosts=1)
    shutil.copytree(killed.prefix, root / "prefix-copy")
    return killed


def _check_resumed(killed: Killed, rerun: subprocess.CompletedProcess, witness: Path,
                   hosts: int, reference: dict[int, float], rel: float) -> None:
    assert rerun.returncode == 0, rerun.stdout[-3000:]
    for host in range(hosts):  # no batch before the checkpoint was read again
        assert min(_read_steps(witness, host)) == KILL_AFTER
    metrics = _metrics(_output(killed.prefix))
    assert sorted(metrics) == list(range(1, STEPS + 1))
    # the steps up to the checkpoint are the killed run's, trained before the kill
    assert all((metrics[s]["wall_time"] < killed.at) == (s <= KILL_AFTER) for s in metrics)
    # each run compiled the update once, at its first step
    assert [s for s in metrics if "compile_time" in metrics[s]] == [1, KILL_AFTER + 1]
    losses = {s: r["train/loss"] for s, r in metrics.items()}
    assert losses == pytest.approx(reference, rel=rel)
    # the executor says what the step resumed from
    [done] = [line for line in rerun.stdout.splitlines()
              if re.search(r"\]\s+done\s+train/plain-", line)]
    assert f"resumed from checkpoints/step_{KILL_AFTER:08d}" in done


def _planned_reason(prefix: Path, cache: Path, monkeypatch, **env: str) -> str:
    """Why the dry run runs the step again."""
    for name, value in {"MARIN_TEST_CACHE": str(cache), **env}.items():
        monkeypatch.setenv(name, value)
    [entry] = Executor(str(prefix)).plan(plain_training.steps()).entries
    assert entry.action == "run"
    return entry.reason


def test_a_plain_training_step_killed_on_one_host_resumes_from_its_checkpoint(
        one_host: Killed, cache: Path, reference, tmp_path: Path, monkeypatch):
    assert one_host.run.returncode == -9, one_host.run.stdout[-3000:]
    assert _planned_reason(one_host.prefix, cache, monkeypatch).endswith(
        "; resumes from what the unfinished attempt left")
    rerun = _executor(one_host.prefix, cache, tmp_path / "rerun")
    _check_resumed(one_host, rerun, tmp_path / "rerun", 1, reference, rel=1e-6)
    assert f"resumed from step {KILL_AFTER} (checkpoint " in rerun.stdout  # the trainer's line


def test_a_plain_training_step_with_a_host_killed_resumes_on_two_hosts(
        cache: Path, reference, tmp_path: Path):
    killed = _killed_run(tmp_path, cache, hosts=2)
    assert killed.run.returncode != 0
    assert "GangError: host 1 of 2" in killed.run.stdout
    assert not Path(lease_path(str(_output(killed.prefix)))).exists()
    rerun = _executor(killed.prefix, cache, tmp_path / "rerun", MARIN_TEST_HOSTS="2")
    _check_resumed(killed, rerun, tmp_path / "rerun", 2, reference, rel=1e-5)


def test_resumable_false_starts_a_killed_training_step_from_step_zero(
        one_host: Killed, cache: Path, reference, tmp_path: Path, monkeypatch):
    prefix = one_host.prefix.parent / "prefix-copy"
    assert "resumes" not in _planned_reason(prefix, cache, monkeypatch,
                                            MARIN_TEST_RESUMABLE="false")
    rerun = _executor(prefix, cache, tmp_path / "rerun", MARIN_TEST_RESUMABLE="false")
    assert rerun.returncode == 0, rerun.stdout[-3000:]
    assert min(_read_steps(tmp_path / "rerun", 0)) == 0
    metrics = _metrics(_output(prefix))
    assert sorted(metrics) == list(range(1, STEPS + 1))
    assert all(r["wall_time"] > one_host.at for r in metrics.values())  # all trained again
    assert {s: r["train/loss"] for s, r in metrics.items()} == pytest.approx(reference,
                                                                            rel=1e-6)
    assert "resumed from" not in rerun.stdout


def test_a_plain_tokenize_step_killed_midway_reuses_the_units_it_finished(tmp_path: Path):
    inputs = tmp_path / "plays"
    inputs.mkdir()
    for play in plays(6):  # one unit each
        shutil.copy(play, inputs / f"{play.stem}.txt")

    def run(**env: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [*marin_command(), "executor", "--prefix", str(tmp_path / "prefix"),
             "tests.fixtures.plain_tokenize"], cwd=ROOT, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, timeout=600,
            env={**os.environ, "PYTHONPATH": str(ROOT), "MARIN_TEST_INPUT": str(inputs), **env})

    killed = run(MARIN_TEST_KILL_AFTER_UNITS="2")
    assert killed.returncode == -9, killed.stdout[-3000:]
    rerun = run()
    assert rerun.returncode == 0, rerun.stdout[-3000:]
    [output] = (tmp_path / "prefix" / "tokenized").glob("plain-*")
    record = read_ledger(str(output))
    assert (record.last_run.built, record.last_run.reused) == (4, 2)
    assert "resumed: 2 unit(s) reused from an earlier attempt, 4 to build" in rerun.stdout
    [done] = [line for line in rerun.stdout.splitlines()
              if re.search(r"\]\s+done\s+tokenized/plain-", line)]
    assert "resumed from the files of attempt " in done
    clean = tokenize(TokenizeConfig(train_paths=(str(inputs),), num_processes=1,
                                    range_bytes=1, cache_path=str(tmp_path / "clean")))
    assert record.totals == clean.totals


def _plain(config: object) -> None:
    """A step function that declares nothing."""


@resumable
def _declared(config: object) -> None:
    """A step function of this module that declares it resumes."""


def test_the_training_and_tokenize_functions_declare_that_their_steps_resume(tmp_path):
    config = training_config(tmp_path)
    tokens = TokenizeConfig(train_paths=("unused.txt",))
    assert ExecutorStep("train/x", train_lm, config).resumes
    assert ExecutorStep("tokenized/x", tokenize, tokens).resumes
    assert ExecutorStep("x", _declared, None).resumes
    assert ExecutorStep("x", functools.partial(_declared), None).resumes
    assert not ExecutorStep("train/x", train_lm, config, resumable=False).resumes
    assert not ExecutorStep("x", _plain, None).resumes
    assert ExecutorStep("x", _plain, None, resumable=True).resumes
    with pytest.raises(StepDefinitionError, match=r"^ExecutorStep 'x': resumable must be True,"
                       r" False or None \(what the function declares\), got 'yes'$"):
        ExecutorStep("x", _plain, None, resumable="yes")


def test_resuming_or_not_moves_no_step_key(tmp_path: Path):
    config = dataclasses.replace(training_config(tmp_path), output_path=str(tmp_path / "o"))
    paths = {Executor(str(tmp_path)).plan([ExecutorStep("train/x", train_lm, config,
                                                        resumable=choice)]).entries[0].output_path
             for choice in (None, True, False)}
    assert len(paths) == 1
