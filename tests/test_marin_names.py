"""Marin's import paths and spellings build the same steps as marin.execution's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import marin.execution as execution
from marin.execution import StepGraph
from marin.execution import step as step_module
from marin.execution.executor import (
    THIS_OUTPUT_PATH,
    ExecutorStep,
    InputName,
    OutputName,
    executor_main,
    output_path_of,
    this_output_path,
    versioned,
)
from tests.conftest import ROOT

EXPERIMENT = ROOT / "tests" / "fixtures" / "marin_style_experiment.py"


def noop(config):
    return None


def test_the_names_are_the_one_implementation():
    assert executor_main is execution.executor_main
    assert ExecutorStep is execution.ExecutorStep
    assert InputName is step_module.OutputPathOf is execution.InputName
    assert OutputName is step_module.ThisOutputPath
    assert output_path_of is execution.output_path_of
    assert versioned is execution.versioned
    with pytest.raises(ImportError, match="cannot import name 'nothing'"):
        from marin.execution.executor import nothing  # noqa: F401


def test_marin_spellings_of_an_input_are_one_placeholder():
    data = ExecutorStep("data", noop, {"out": THIS_OUTPUT_PATH})
    spellings = [InputName(data, "a/b.json"), InputName(step=data, name="a/b.json"),
                 output_path_of(data, name="a/b.json"), data / "a" / "b.json",
                 data.cd("a").cd("b.json"), output_path_of(data, "a/b.json")]
    assert len(set(spellings)) == 1
    assert spellings[0].name == "a/b.json" and spellings[0].step is data
    assert InputName(data, name=None) == output_path_of(data)
    assert output_path_of(data).name is None
    assert OutputName(name="x") == this_output_path("x")
    assert this_output_path() == THIS_OUTPUT_PATH


def test_marin_spellings_hash_and_resolve_as_ours():
    ours_data = ExecutorStep("data", noop, {"out": this_output_path()})
    theirs_data = ExecutorStep("data", noop, {"out": THIS_OUTPUT_PATH})
    ours = ExecutorStep("use", noop, {"in": output_path_of(ours_data, "f"),
                                      "out": this_output_path("o")})
    theirs = ExecutorStep("use", noop, {"in": InputName(theirs_data, name="f"),
                                        "out": OutputName(name="o")})
    g_ours, g_theirs = StepGraph.build([ours], "/p"), StepGraph.build([theirs], "/p")
    assert g_ours.node_of(ours).key == g_theirs.node_of(theirs).key
    assert (g_ours.resolve_config(g_ours.node_of(ours))
            == g_theirs.resolve_config(g_theirs.node_of(theirs)))


@pytest.mark.parametrize("make", [
    lambda s: InputName(s, "x", block_on_step=False),
    lambda s: InputName(s, "x").nonblocking(),
    lambda s: InputName(s).nonblocking() / "x",
    lambda s: output_path_of(s, "x", blocking=False),
])
def test_marin_nonblocking_spellings_are_one_dependency_not_waited_for(make):
    data = ExecutorStep("data", noop, {"out": this_output_path()})
    blocking = ExecutorStep("use", noop, {"in": InputName(data, "x")})
    nonblocking = ExecutorStep("use", noop, {"in": make(data)})
    g_block, g_non = StepGraph.build([blocking], "/p"), StepGraph.build([nonblocking], "/p")
    node_block, node_non = g_block.node_of(blocking), g_non.node_of(nonblocking)
    assert node_non.key == node_block.key  # hashed as a blocking dependency
    assert g_non.resolve_config(node_non) == g_block.resolve_config(node_block) == {
        "in": f"{g_non.node_of(data).output_path}/x"}
    assert node_non.dependencies == [g_non.node_of(data)]
    assert node_non.nonblocking == {g_non.node_of(data)} and not node_block.nonblocking


def test_a_hardcoded_input_is_refused_with_the_fix():
    with pytest.raises(ValueError, match="plain string"):
        InputName.hardcoded("raw/data")


def test_an_input_that_is_not_a_step_names_the_fix():
    with pytest.raises(TypeError, match="pass the path string itself"):
        InputName(None, name="raw/data")  # type: ignore[arg-type]


@pytest.mark.slow
def test_a_marin_style_experiment_runs_unchanged(tmp_path: Path):
    prefix = tmp_path / "store"
    env = {**os.environ, "MARIN_PREFIX": str(prefix),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    run = subprocess.run([sys.executable, str(EXPERIMENT)], capture_output=True, text=True,
                         env=env, cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    [numbers_dir] = (prefix / "marin_style").glob("numbers-*")
    [stats_dir] = (prefix / "marin_style").glob("stats-*")
    assert json.loads((numbers_dir / "numbers.json").read_text()) == list(range(50))
    expected = list(range(50))
    assert json.loads((stats_dir / "stats.json").read_text()) == {
        "count": len(expected), "sum": sum(expected), "mean": sum(expected) / len(expected),
        "min": min(expected), "max": max(expected)}
    info = json.loads((stats_dir / ".executor_info").read_text())
    assert info["dependencies"] == [str(numbers_dir)]
    assert info["config"]["numbers_file"] == str(numbers_dir / "numbers.json")

    again = subprocess.run([sys.executable, str(EXPERIMENT), "--dry_run", "true", "--json",
                            "true"], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    plan = json.loads(again.stdout)
    assert sorted(e["action"] for e in plan["steps"]) == ["skip", "skip"], plan
