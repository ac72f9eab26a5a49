"""`marin executor` and `executor_main`, driven as a user would: in a subprocess."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from marin.execution import Executor
from tests.conftest import ROOT

HELLO = str(ROOT / "experiments" / "hello_pipeline.py")


def marin(*args: str, cwd: Path = ROOT, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "marin.cli", *args], capture_output=True,
                          text=True, cwd=cwd, env={**os.environ, **(env or {})}, timeout=120)


def test_without_an_experiment_it_lists_the_ones_it_finds():
    out = marin("executor")
    assert out.returncode == 2
    assert "needs an EXPERIMENT" in out.stderr
    assert "experiments/hello_pipeline.py" in out.stderr


def test_an_unknown_experiment_path_or_module_is_named(tmp_path: Path):
    missing = marin("executor", "--dry-run", "experiments/nope.py")
    assert missing.returncode == 2
    assert "experiments/nope.py does not exist" in missing.stderr
    assert "hello_pipeline.py" in missing.stderr
    module = marin("executor", "--dry-run", "experiments.nope_module")
    assert module.returncode == 2
    assert "no experiment file or module named 'experiments.nope_module'" in module.stderr


def test_dry_run_json_for_a_file_and_for_a_module(tmp_path: Path):
    by_file = marin("executor", "--dry-run", "--json", "--prefix", str(tmp_path), HELLO)
    assert by_file.returncode == 0, by_file.stderr
    plan = json.loads(by_file.stdout)
    assert [s["name"] for s in plan["steps"]] == ["corpus/pydoc_topics", "counts/words",
                                                  "fit/zipf"]
    assert {s["action"] for s in plan["steps"]} == {"run"}
    assert plan["totals"]["run"] == 3
    by_module = marin("executor", "--dry-run", "--json", "--prefix", str(tmp_path),
                      "tests.fixtures.ledger_experiment")
    assert by_module.returncode == 0, by_module.stderr
    assert len(json.loads(by_module.stdout)["steps"]) == 6
    assert list(tmp_path.iterdir()) == []
    step_lines = [line for line in by_file.stdout.splitlines() if '"action": ' in line]
    assert len(step_lines) == 3  # one line per step: grep finds a step's whole record
    assert [json.loads(line.rstrip(","))["name"] for line in step_lines] == [
        s["name"] for s in plan["steps"]]


def test_json_report_parses_like_the_standard_encoder():
    from marin.execution.json_report import dumps_report

    value = {"prefix": "/p", "steps": [{"name": "a", "deps": ["x"], "cfg": {"k": {1}}},
                                       {"name": "b", "deps": [], "cfg": {}}],
             "totals": {"run": 1, "nested": {"deep": [{"r": 1}]}}, "empty": [],
             "numbers": [1.5, None], "text": "ü\n"}
    expected = json.loads(json.dumps(value, indent=1, default=str))
    assert json.loads(dumps_report(value)) == expected
    assert json.loads(dumps_report([{"a": 1}, {"b": 2}])) == [{"a": 1}, {"b": 2}]
    assert json.loads(dumps_report(3)) == 3
    odd_keys = {True: 1, None: 2, 3: {4.5: "x"}, "s": [1]}
    assert json.loads(dumps_report(odd_keys)) == json.loads(json.dumps(odd_keys, indent=1))
    array = {"a": np.arange(3), "b": [{"c": np.arange(2)}]}  # no JSON form: written as str
    assert json.loads(dumps_report(array)) == json.loads(json.dumps(array, default=str))


def test_a_real_run_then_a_dry_run_shows_everything_skipped(tmp_path: Path):
    run = marin("executor", "--prefix", str(tmp_path), HELLO)
    assert run.returncode == 0, run.stderr
    assert "3 succeeded" in run.stdout
    assert "start   corpus/pydoc_topics-" in run.stdout  # plain progress lines off a TTY
    fits = list(tmp_path.glob("fit/zipf-*/fit.json"))
    assert len(fits) == 1 and 0.5 < json.loads(fits[0].read_text())["zipf_exponent"] < 2
    dry = marin("executor", "--dry-run", "--prefix", str(tmp_path), HELLO)
    assert "3 skipped" in dry.stdout and "already succeeded" in dry.stdout


def _load_hello():
    from marin.execution.experiments import load_experiment

    return load_experiment(HELLO)


def test_overrides_change_hashes_exactly_as_editing_the_file(tmp_path: Path):
    hello = _load_hello()
    out = marin("executor", "--dry-run", "--json", "--prefix", str(tmp_path), HELLO,
                "--corpus/pydoc_topics.lowercase", "false", "--fit/zipf.top_k=500")
    assert out.returncode == 0, out.stderr
    keys = [s["key"] for s in json.loads(out.stdout)["steps"]]
    # The same change made by editing the configs:
    corpus = hello.corpus.with_config(dataclasses.replace(hello.corpus.config, lowercase=False))
    counts = hello.counts.with_config(dataclasses.replace(
        hello.counts.config, corpus_path=hello.output_path_of(corpus, "corpus.txt")))
    fit = hello.fit.with_config(dataclasses.replace(
        hello.fit.config, counts_path=hello.output_path_of(counts, "counts.json"), top_k=500))
    edited = [e.node.key for e in Executor(str(tmp_path)).plan([fit]).entries]
    original = [e.node.key for e in Executor(str(tmp_path)).plan(hello.steps).entries]
    assert keys == edited
    assert all(a != b for a, b in zip(keys, original, strict=True))


@pytest.mark.parametrize(("override", "message"), [
    (["--fit/zipf.nope", "3"], "FitConfig has no field 'nope'"),
    (["--fit/zipf.top_k", "many"], "override fit/zipf.top_k='many': not a valid"),
])
def test_bad_overrides_are_clear_errors(tmp_path: Path, override, message):
    out = marin("executor", "--dry-run", "--prefix", str(tmp_path), HELLO, *override)
    assert out.returncode == 2
    assert message in out.stdout + out.stderr


def test_the_experiment_file_runs_as_a_script_with_draccus_flags(tmp_path: Path):
    out = subprocess.run([sys.executable, HELLO, "--dry_run", "true", "--prefix", str(tmp_path),
                          "--json", "true"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["totals"]["steps"] == 3


def _write_experiment(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "exp.py"
    path.write_text("from marin.execution import ExecutorStep, this_output_path\n" + body)
    return path


def test_a_failing_step_exits_non_zero_with_a_summary(tmp_path: Path):
    exp = _write_experiment(tmp_path, (
        "def boom(cfg):\n    raise ValueError('bad shard 7')\n"
        "steps = [ExecutorStep('boom', boom, {'out': this_output_path()})]\n"))
    out = marin("executor", "--prefix", str(tmp_path / "p"), str(exp))
    assert out.returncode == 1
    assert "FAILED: boom-" in out.stdout and "ValueError: bad shard 7" in out.stdout


def test_an_unhashable_config_is_a_clear_error(tmp_path: Path):
    exp = _write_experiment(tmp_path, (
        "class Opaque:\n    pass\n"
        "steps = [ExecutorStep('s', print, {'thing': Opaque()})]\n"))
    out = marin("executor", "--dry-run", "--prefix", str(tmp_path / "p"), str(exp))
    assert out.returncode == 2
    assert "error: config['thing']: a value of type marin_experiment_exp.Opaque has no " \
        "canonical form" in out.stderr
