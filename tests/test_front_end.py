"""One front end: every experiment under both entry points, with every spelling.

``python EXP.py`` is run in this process as Python runs a script (``runpy.run_path`` with
``__name__ == "__main__"`` and ``sys.argv`` set), and ``marin executor EXP.py`` through
``marin.cli.main``: the real entry points, without a process start per case. One case of
each also runs as a real process. A dry run writes nothing and runs no preflight;
``--help`` exits 0 and names the executor's options, the experiment's and the overrides.
"""

from __future__ import annotations

import dataclasses
import io
import json
import re
import runpy
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from marin import cli
from marin.execution import (
    ExecutorMainConfig,
    ExecutorStep,
    Experiment,
    Plan,
    RunResult,
    executor_main,
    this_output_path,
)
from marin.execution.experiments import experiment_of_module, load_experiment
from marin.execution.frontend.command_line import (
    Style,
    UsageError,
    override_example,
    parse_invocation,
)
from marin.execution.invocations import invocations_folder
from tests.conftest import ROOT

EXPERIMENTS = sorted((ROOT / "experiments").glob("*.py"))
DRY_RUNS = [["--dry-run"], ["--dry_run"], ["--dry-run", "true"], ["--dry_run=true"]]


def _readme_experiment(folder: Path) -> Path:
    """The experiment file of README.md (its ``docs: file word_counts.py`` block)."""
    text = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- docs: file word_counts.py -->\n```python\n(.*?)```", text, re.S)
    assert block, "README.md's word_counts.py block moved"
    path = folder / "word_counts.py"
    path.write_text(block.group(1))
    return path


def _script(path: Path, args: list[str], monkeypatch) -> tuple[int, str, str]:
    """``python PATH ARGS`` in this process: exit status, stdout, stderr."""
    monkeypatch.setattr(sys, "argv", [str(path), *args])
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with redirect_stdout(out), redirect_stderr(err):
        try:
            runpy.run_path(str(path), run_name="__main__")
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return code, out.getvalue(), err.getvalue()


def _marin(path: Path, before: list[str], after: list[str] = ()) -> tuple[int, str, str]:
    """``marin executor BEFORE PATH AFTER`` in this process."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = cli.main(["executor", *before, str(path), *after])
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
    return code, out.getvalue(), err.getvalue()


def _files(folder: Path) -> set[Path]:
    return {p for p in folder.rglob("*")}


@pytest.fixture(scope="module")
def docs_experiment(tmp_path_factory) -> Path:
    return _readme_experiment(tmp_path_factory.mktemp("docs-experiment"))


def _all(docs_experiment: Path) -> list[Path]:
    return [*EXPERIMENTS, docs_experiment]


@pytest.mark.parametrize("entry", ["python", "marin executor"])
def test_every_experiment_dry_runs_with_every_spelling_and_writes_nothing(
        entry, docs_experiment, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    prefix = tmp_path / "store"
    for path in _all(docs_experiment):
        for spelling in DRY_RUNS:
            before = _files(tmp_path)
            if entry == "python":
                code, out, err = _script(path, [*spelling, "--prefix", str(prefix)],
                                         monkeypatch)
            else:  # the executor's options before the experiment, and after it
                code, out, err = _marin(path, spelling, ["--prefix", str(prefix)])
                assert code == 0, (path.name, spelling, err)
                code, out, err = _marin(path, [], [*spelling, "--prefix", str(prefix)])
            assert code == 0, (path.name, spelling, err)
            assert "dry run" in out, (path.name, spelling, out)
            assert "refusing" not in err  # the preflight did not run
            assert _files(tmp_path) == before, (path.name, spelling)  # nothing written


@pytest.mark.parametrize("entry", ["python", "marin executor"])
def test_help_lists_the_options_of_the_executor_and_the_experiment_and_an_override(
        entry, docs_experiment, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for path in _all(docs_experiment):
        if entry == "python":
            code, out, err = _script(path, ["--help"], monkeypatch)
        else:
            code, out, err = _marin(path, [], ["--help"])
        assert code == 0, (path.name, err)
        assert "--dry-run" in out and "--max-concurrent" in out and "--config-path" in out
        declared = experiment_of_module(load_experiment(str(path)))
        names = [f.name for f in dataclasses.fields(ExecutorMainConfig)
                 if f.name != "runner_options"] + ["runner_option"]
        if declared.options is not None:
            names += [f.name for f in dataclasses.fields(declared.options)]
            assert f"options of this experiment ({declared.options.__name__})" in out
        for name in names:
            assert f"--{name.replace('_', '-')}" in out, (path.name, name)
        example = override_example(declared.build(declared.default_options()))
        assert example is not None and f"for example: {example}" in out, (path.name, out)
        assert list(tmp_path.iterdir()) == []


def test_the_3e19_options_parse_alike_in_both_front_ends(tmp_path, monkeypatch):
    experiment = load_experiment(str(ROOT / "experiments" / "isoflop_3e19.py")).experiment
    for style, positional, head in ((Style.DRACCUS, None, []),
                                    (Style.CLI, "experiment", ["x.py"])):
        got = parse_invocation(experiment, [*head, "--hardware", "tpu-v5p", "--yes",
                                            "--max_local_device_hours=3", "--dry-run"],
                               style, positional=positional)
        assert got.experiment_options.hardware == "tpu-v5p"
        assert got.experiment_options.yes is True
        assert got.experiment_options.max_local_device_hours == 3.0
        assert got.options.dry_run is True


def test_a_real_run_consults_the_preflight_and_a_dry_run_does_not(tmp_path, monkeypatch):
    called: list[str] = []

    def refuse(options, executor):
        called.append(executor.prefix)
        return "refusing to start: too large for `max_concurrent` here"

    experiment = Experiment([_step()], preflight=refuse)
    prefix = str(tmp_path / "store")
    assert isinstance(executor_main(experiment, args=["--prefix", prefix, "--dry-run"]), Plan)
    assert called == []
    err = io.StringIO()
    with redirect_stderr(err), pytest.raises(SystemExit) as exit_info:
        executor_main(experiment, args=["--prefix", prefix])
    assert exit_info.value.code == 2 and called == [prefix]
    assert "--max_concurrent" in err.getvalue()  # the message, spelled for this front end
    assert not (tmp_path / "store").exists()


@dataclasses.dataclass(frozen=True)
class _Cfg:
    output_path: str = this_output_path()
    fail: bool = False


def _work(config: _Cfg) -> None:
    if config.fail:
        raise RuntimeError("failed on purpose")


def _step(fail: bool = False) -> ExecutorStep:
    return ExecutorStep("front/one", _work, _Cfg(fail=fail))


def test_executor_main_returns_the_result_and_exits_on_failure_unless_told_not(tmp_path):
    prefix = str(tmp_path / "store")
    plan = executor_main([_step()], args=["--prefix", prefix, "--dry-run", "--json"])
    assert isinstance(plan, Plan) and plan.entries[0].output_path.startswith(prefix)
    result = executor_main([_step()], args=["--prefix", prefix])
    assert isinstance(result, RunResult) and result.ok
    assert [(s.name, s.state) for s in result.steps] == [("front/one", "succeeded")]
    assert Path(result.steps[0].output_path, ".executor_status").exists()
    with pytest.raises(SystemExit) as exit_info:
        executor_main([_step(fail=True)], args=["--prefix", prefix])
    assert exit_info.value.code == 1
    failed = executor_main([_step(fail=True)], args=["--prefix", prefix],
                           exit_on_failure=False)
    assert isinstance(failed, RunResult) and not failed.ok
    assert failed.steps[0].state == "failed" and "failed on purpose" in failed.steps[0].error


def test_the_invocation_record_names_the_entry_point_not_a_guess(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    hello = ROOT / "experiments" / "hello_pipeline.py"
    prefix = tmp_path / "somewhere" / "store"
    code = cli.main(["executor", "--prefix", str(prefix), "--run-only", "corpus/.*",
                     str(hello)])
    assert code == 0
    [record] = [json.loads(p.read_text())
                for p in Path(invocations_folder(str(prefix))).glob("*.json")]
    assert record["experiment"] == str(hello)
    code, _, err = _script(hello, ["--prefix", str(tmp_path / "other"), "--run_only",
                                   "corpus/.*"], monkeypatch)
    assert code == 0, err
    [record] = [json.loads(p.read_text())
                for p in Path(invocations_folder(str(tmp_path / "other"))).glob("*.json")]
    assert record["experiment"] == str(hello)


def test_a_config_file_gives_options_and_the_command_line_wins(tmp_path):
    experiment = load_experiment(str(ROOT / "experiments" / "isoflop_3e19.py")).experiment
    config = tmp_path / "options.yaml"
    config.write_text("dry_run: true\nmax-concurrent: 3\nhardware: tpu-v5p\ndevices: 4\n")
    got = parse_invocation(experiment, ["--config_path", str(config), "--devices", "16"],
                           Style.DRACCUS)
    assert got.options.dry_run is True and got.options.max_concurrent == 3
    assert got.experiment_options.hardware == "tpu-v5p"
    assert got.experiment_options.devices == 16
    config.write_text("hardwar: tpu-v5p\n")
    with pytest.raises(UsageError) as caught:
        parse_invocation(experiment, ["--config-path", str(config)], Style.CLI)
    message = str(caught.value)
    assert "\n" not in message and str(config) in message and "hardwar" in message


def test_help_shows_each_options_type_and_default(tmp_path, monkeypatch):
    code, out, _ = _script(ROOT / "experiments" / "isoflop_3e19.py", ["-h"], monkeypatch)
    assert code == 0
    flat = " ".join(out.split())
    assert "(float, default: 24.0)" in flat  # max_local_device_hours
    assert "(str, default: gpu-h100)" in flat  # hardware
    assert "(bool, default: false)" in flat


def test_a_real_process_takes_each_spelling(tmp_path):
    hello = ROOT / "experiments" / "hello_pipeline.py"
    for command in ([sys.executable, str(hello), "--dry_run", "--prefix", str(tmp_path / "p")],
                    [sys.executable, "-m", "marin.cli", "executor", "--dry-run", str(hello),
                     "--prefix", str(tmp_path / "p")]):
        run = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path,
                             timeout=300)
        assert run.returncode == 0, run.stderr
        assert "dry run" in run.stdout
    assert list(tmp_path.iterdir()) == []
