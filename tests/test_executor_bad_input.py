"""Bad input to the executor: one line naming the step, the field or the path and the rule,
exit status 2, and nothing written under the prefix."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from marin.execution import ExecutorStep, output_path_of, this_output_path
from marin.execution.step import ComputeEstimate, StepDefinitionError
from tests.conftest import ROOT
from tests.helpers.processes import one_line_error

MARIN = str(Path(sys.executable).parent / "marin")
HELLO = str(ROOT / "experiments" / "hello_pipeline.py")


def _marin(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """``marin ARGS``; a hang (the walk of a cyclic config) fails as a timeout."""
    return subprocess.run([MARIN, *args], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ}, timeout=timeout)


def _experiment(tmp_path: Path, body: str) -> str:
    path = tmp_path / "experiment.py"
    path.write_text("from marin.execution import ExecutorStep, this_output_path\n"
                    "def fn(config):\n    pass\n" + body)
    return str(path)


@pytest.mark.parametrize("name", ["..", "a//b", "/abs", "gs://bucket/x", "", "a/./b", "x/",
                                  ".marin/invocations/x", "runs/.attempts", ".hidden",
                                  "two\nlines", "tab\there", "spoof\u202etxt.exe",
                                  "zero\u200bwidth", "C:/x"])
def test_a_step_name_that_cannot_be_a_folder_under_the_prefix_is_refused(name: str):
    with pytest.raises(StepDefinitionError) as info:
        ExecutorStep(name, print, {})
    message = str(info.value)
    assert "\n" not in message and repr(name) in message


@pytest.mark.parametrize("sub", ["../../escape", "/abs", "gs://b/x", "~/x", "a/../../b",
                                 "new\nline", "\u202eevil"])
def test_a_sub_path_that_leaves_the_output_is_refused(sub: str):
    step = ExecutorStep("a", print, {})
    for build in (lambda: this_output_path(sub), lambda: output_path_of(step, sub),
                  lambda: step / sub):
        with pytest.raises(StepDefinitionError, match="must stay inside the output") as info:
            build()
        assert "\n" not in str(info.value)


def test_plain_names_and_sub_paths_are_accepted():
    step = ExecutorStep("tokenized/web-v2.1_en", print, {"out": this_output_path("a/b.txt")})
    assert output_path_of(step, "shard-0/x.json").sub == "shard-0/x.json"


@pytest.mark.parametrize("field, value", [("flops", float("nan")), ("flops", -1.0),
                                          ("device_hours", float("inf")), ("flops", "1e18")])
def test_an_estimate_that_is_not_a_finite_count_is_refused(field: str, value: object):
    with pytest.raises(StepDefinitionError, match=f"ComputeEstimate {field}"):
        ComputeEstimate(**{field: value})


slow = pytest.mark.slow


@slow
@pytest.mark.parametrize("body, words", [
    ('steps = [ExecutorStep("a//b", fn, {"out": this_output_path()})]\n',
     ["experiment.py:4", "'a//b'", "no empty parts"]),
    ('steps = [ExecutorStep("a", fn, {"out": this_output_path("../../escape")})]\n',
     ["experiment.py:4", "'../../escape'", "must stay inside the output"]),
    ('steps = [ExecutorStep(".marin/invocations/x", fn, {"out": this_output_path()})]\n',
     ["experiment.py:4", "'.marin/invocations/x'", "may start with '.'"]),
], ids=["name", "sub-path", "reserved"])
def test_marin_executor_reports_a_bad_step_in_one_line_with_its_place(tmp_path: Path, body,
                                                                      words):
    prefix = tmp_path / "prefix"
    one_line_error(_marin("executor", "--prefix", str(prefix), _experiment(tmp_path, body)),
                    *words)
    assert not prefix.exists()


@slow
@pytest.mark.parametrize("loop, field", [
    ("loop = []\nloop.append(loop)\n", "config['loop'][0]"),
    ("loop = {}\nloop['me'] = loop\n", "config['loop']['me']"),
], ids=["list", "dict"])
def test_a_config_that_contains_itself_is_one_line_not_a_hang(tmp_path: Path, loop: str,
                                                              field: str):
    experiment = _experiment(tmp_path, loop + 'steps = [ExecutorStep("cyclic", fn, '
                             '{"out": this_output_path(), "loop": loop})]\n')
    for dry in (["--dry-run"], []):
        one_line_error(_marin("executor", *dry, "--prefix", str(tmp_path / "p"), experiment),
                        "step 'cyclic'", field, "contains itself")
    assert not (tmp_path / "p").exists()


@slow
def test_a_config_100000_levels_deep_is_one_line(tmp_path: Path):
    experiment = _experiment(tmp_path, "deep = 1\nfor _ in range(100_000):\n    deep = [deep]\n"
                             'steps = [ExecutorStep("deep", fn, {"d": deep})]\n')
    one_line_error(_marin("executor", "--dry-run", "--prefix", str(tmp_path / "p"),
                           experiment), "step 'deep'", "config['d'][0]", "levels deep")


@contextlib.contextmanager
def _read_only_folder(folder: Path) -> Iterator[None]:
    """``folder`` on a read-only file system for the block: a read-only tmpfs mounted there
    where this process may mount (root, as in the development container, where chmod would
    not stop a write), else the folder's write bits removed (which stops any other user)."""
    folder.mkdir()
    if os.geteuid() != 0:
        folder.chmod(0o555)
        try:
            yield
        finally:
            folder.chmod(0o755)
        return
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(folder)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.fail(f"cannot mount a read-only file system here ({mounted.stderr.strip()}); "
                    "as root, chmod would not stop writes, so the test needs the mount")
    try:
        yield
    finally:
        subprocess.run(["umount", str(folder)], check=True)


@slow
def test_an_existing_prefix_on_a_read_only_file_system_is_one_line(tmp_path: Path):
    prefix = tmp_path / "prefix"
    with _read_only_folder(prefix):
        for where in (prefix, prefix / "sub"):
            one_line_error(_marin("executor", "--prefix", str(where), HELLO),
                            f"prefix {where} is not writable", "--prefix")
        assert list(prefix.iterdir()) == []


@slow
def test_a_prefix_that_is_a_file_is_one_line(tmp_path: Path):
    prefix = tmp_path / "prefix"
    prefix.write_text("not a folder\n")
    one_line_error(_marin("executor", "--prefix", str(prefix), HELLO),
                    f"prefix {prefix} is a file, not a folder")
    assert prefix.read_text() == "not a folder\n"
