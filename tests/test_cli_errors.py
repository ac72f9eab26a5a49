"""Bad input through `marin executor` and `executor_main`: one line naming the problem and
the fix, exit status 2, nothing written; and output that scripts can rely on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from marin.execution import Executor, ExecutorStep, StepGraphError, output_path_of, this_output_path
from tests.conftest import ROOT
from tests.helpers.processes import one_line_error

pytestmark = pytest.mark.slow

HELLO = str(ROOT / "experiments" / "hello_pipeline.py")
MARIN = str(Path(sys.executable).parent / "marin")


def run(*command: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(list(command), capture_output=True, text=True, cwd=cwd,
                          env={**os.environ}, timeout=120)


@pytest.mark.parametrize("args, words", [
    (["--lease-ttl", "nan"], ["--lease-ttl", "positive, finite"]),
    (["--lease-ttl", "inf"], ["--lease-ttl", "positive, finite"]),
    (["--max-concurrent", "0"], ["--max-concurrent", "at least 1"]),
    (["--run-only", "["], ["--run-only", "not a valid regular expression"]),
])
def test_bad_numbers_on_marin_executor(tmp_path: Path, args, words):
    one_line_error(run(MARIN, "executor", "--prefix", str(tmp_path), *args, HELLO), *words)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args, words", [
    (["--lease_ttl", "inf"], ["--lease_ttl", "positive, finite"]),
    (["--max_concurrent", "0"], ["--max_concurrent", "at least 1"]),
    (["--dry_run", "maybe"], ["maybe"]),
])
def test_bad_options_of_an_experiment_script(tmp_path: Path, args, words):
    one_line_error(run(sys.executable, HELLO, "--prefix", str(tmp_path), *args), *words)
    assert list(tmp_path.iterdir()) == []


def test_an_override_before_the_experiment_names_the_right_order(tmp_path: Path):
    out = run(MARIN, "executor", "--dry-run", "--prefix", str(tmp_path),
              "--fit/zipf.top_k", "5", HELLO)
    one_line_error(out, "'5' was read as the experiment", HELLO, "go after the experiment")
    fixed = run(MARIN, "executor", "--dry-run", "--prefix", str(tmp_path), HELLO,
                "--fit/zipf.top_k", "5")
    assert fixed.returncode == 0, fixed.stderr
    assert list(tmp_path.iterdir()) == []


def test_an_output_override_must_stay_under_the_prefix(tmp_path: Path):
    out = run(MARIN, "executor", "--prefix", str(tmp_path / "p"), HELLO,
              "--fit/zipf.output_path", str(tmp_path / "elsewhere"))
    one_line_error(out, "fit/zipf.output_path", "must stay under the prefix")
    assert not (tmp_path / "elsewhere").exists()


def test_a_cycle_is_one_line(tmp_path: Path):
    experiment = tmp_path / "cycle.py"
    experiment.write_text(
        "from marin.execution import ExecutorStep\n"
        "def fn(config): pass\n"
        "a = ExecutorStep('a', fn, {'x': None})\n"
        "b = ExecutorStep('b', fn, {'in': a})\n"
        "a.config['x'] = b\n"
        "steps = [b]\n")
    one_line_error(run(MARIN, "executor", "--dry-run", "--prefix", str(tmp_path / "p"),
                        str(experiment)), "cycle")


@pytest.mark.parametrize("value, field, words", [
    ("10**5000", "config['value']", "an integer of about 5001 digits"),
    ("-(10**5000)", "config['value']", "an integer of about 5001 digits"),
    ("[1, {'x': 10**5000}]", "config['value'][1]['x']", "an integer of about 5001 digits"),
    ("{10**5000: 1}", "config['value'] (a dict key)", "an integer of about 5001 digits"),
    ("'\\ud800'", "config['value']", "lone surrogate"),
    ("{'ok': ['x', 'a\\udcffb']}", "config['value']['ok'][1]", "lone surrogate"),
    ("{'\\ud800': 1}", "config['value'] (a dict key)", "lone surrogate"),
    ("print", "config['value']", "a callable (print)"),
])
def test_a_config_value_with_no_json_form_names_the_step_and_the_field(tmp_path: Path, value,
                                                                       field, words):
    experiment = tmp_path / "odd.py"
    experiment.write_text(
        "from marin.execution import ExecutorStep, executor_main\n"
        "def fn(config): pass\n"
        f"steps = [ExecutorStep('data/odd', fn, {{'value': {value}}})]\n"
        "if __name__ == '__main__':\n"
        "    executor_main(steps)\n")
    for command in ([MARIN, "executor", "--prefix", str(tmp_path / "p"), str(experiment)],
                    [sys.executable, str(experiment), "--prefix", str(tmp_path / "p")]):
        one_line_error(run(*command), f"error: {field}: ", words, "(in step 'data/odd')")
        assert not (tmp_path / "p").exists()


def test_an_unversioned_value_too_long_to_record_fails_its_step_naming_the_field(
        tmp_path: Path):
    experiment = tmp_path / "odd.py"
    experiment.write_text(
        "from marin.execution import ExecutorStep, unversioned\n"
        "def fn(config): pass\n"
        "steps = [ExecutorStep('data/odd', fn, {'value': unversioned(10**5000)})]\n")
    out = run(MARIN, "executor", "--json", "--prefix", str(tmp_path / "p"), str(experiment))
    [step] = json.loads(out.stdout)["result"]["steps"]
    assert step["state"] == "failed", step
    assert "config['value']: an integer of about 5001 digits" in step["error"]


def test_a_status_path_that_is_a_folder_is_one_line(tmp_path: Path):
    plan = run(MARIN, "executor", "--dry-run", "--json", "--prefix", str(tmp_path), HELLO)
    first = json.loads(plan.stdout)["steps"][0]["output_path"]
    Path(first, ".executor_status").mkdir(parents=True)
    one_line_error(run(MARIN, "executor", "--prefix", str(tmp_path), HELLO),
                    ".executor_status is a folder")


def test_json_stdout_is_only_json_even_when_steps_print(tmp_path: Path):
    out = run(MARIN, "executor", "--json", "--prefix", str(tmp_path), HELLO)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["result"]["ok"] is True
    assert "Zipf exponent" in out.stderr  # the step's own print, on stderr


def test_the_module_form_works_from_the_console_script(tmp_path: Path):
    out = run(MARIN, "executor", "--dry-run", "--json", "--prefix", str(tmp_path),
              "experiments.hello_pipeline")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["totals"]["run"] == 3


def test_dev_py_passes_marin_commands_through_and_names_unknown_ones():
    unknown = run(sys.executable, str(ROOT / "dev.py"), "foo")
    assert unknown.returncode == 2
    assert "unknown command 'foo'" in unknown.stderr


def test_sub_paths_and_names_cannot_leave_the_prefix(tmp_path: Path):
    a = ExecutorStep("a", print, {})
    for bad in ("../../x", "/abs", "gs://bucket/x", "x/../../y"):
        with pytest.raises(ValueError, match="must stay inside the output"):
            this_output_path(bad)
        with pytest.raises(ValueError, match="must stay inside the output"):
            output_path_of(a, bad)
    assert output_path_of(a, "sub/file.txt").sub == "sub/file.txt"
    with pytest.raises(StepGraphError, match="exceeds the 255-byte limit"):
        Executor(str(tmp_path)).plan([ExecutorStep("x" * 300, print, {})])


def test_cache_stats_with_and_without_json_agree_on_no_cache(tmp_path: Path):
    for extra in ([], ["--json"]):
        out = run(MARIN, "cache", "stats", str(tmp_path), *extra)
        assert out.returncode == 2 and out.stdout == "", out.stdout
        assert "no token cache" in out.stderr


@pytest.mark.parametrize("scheme", ["gs", "s3"])
def test_an_unreachable_endpoint_is_one_line(tmp_path: Path, scheme: str):
    from tests.servers import S3_ENV, free_port

    closed = f"http://127.0.0.1:{free_port()}"  # bound once, then released: nothing listens
    env = {"STORAGE_EMULATOR_HOST": closed} if scheme == "gs" else \
        {"AWS_ENDPOINT_URL_S3": closed, **S3_ENV}
    for command in (["executor", "--dry-run", "--prefix", f"{scheme}://b/x", HELLO],
                    ["cache", "stats", f"{scheme}://b/x"]):
        out = subprocess.run([MARIN, *command], capture_output=True, text=True, cwd=ROOT,
                             env={**os.environ, **env}, timeout=120)
        one_line_error(out, "cannot reach", closed)


def test_an_experiment_script_takes_plain_regexes_for_its_list_options(tmp_path: Path):
    assert run(sys.executable, HELLO, "--prefix", str(tmp_path)).returncode == 0
    out = run(sys.executable, HELLO, "--prefix", str(tmp_path), "--dry_run", "true",
              "--json", "true", "--run_only", "counts/.*", "--force_run", "corpus/.*")
    assert out.returncode == 0, out.stderr
    reasons = {s["name"]: (s["action"], s["reason"]) for s in json.loads(out.stdout)["steps"]}
    assert reasons["corpus/pydoc_topics"] == ("run", "forced by --force_run")
    assert reasons["counts/words"][0] == "skip" and reasons["fit/zipf"][0] == "skip"


def test_a_reader_that_goes_away_ends_the_command_quietly(tmp_path: Path):
    """``marin executor --dry-run --json ... | head -1``: no error, the shell's status 141."""
    proc = subprocess.Popen([MARIN, "executor", "--dry-run", "--json", "--prefix", str(tmp_path),
                             HELLO], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    assert proc.stdout is not None
    proc.stdout.close()  # long before the command, still importing, writes its plan
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 141, err.decode()
    assert b"error" not in err, err.decode()
