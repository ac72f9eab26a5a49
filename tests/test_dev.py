"""``dev.py``, the set-up script a new checkout starts with: its help and its refusals."""

from __future__ import annotations

import ast
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT


def _dev(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """Run a copy of dev.py in an empty folder: whatever it would install lands there."""
    shutil.copy(ROOT / "dev.py", tmp_path / "dev.py")
    return subprocess.run([sys.executable, str(tmp_path / "dev.py"), *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_prints_the_usage_and_exits_0_without_installing(tmp_path: Path, flag: str):
    out = _dev(tmp_path, flag)
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""
    for command in ("python3 dev.py run", "python3 dev.py test", "python3 dev.py marin"):
        assert command in out.stdout
    assert not (tmp_path / ".venv").exists()


def test_an_unknown_command_is_named_with_exit_status_2(tmp_path: Path):
    out = _dev(tmp_path, "--halp")
    assert out.returncode == 2
    assert "unknown command '--halp'; commands are: run, test, marin, python" in out.stderr
    assert not (tmp_path / ".venv").exists()


def _dev_module():
    spec = importlib.util.spec_from_file_location("dev", ROOT / "dev.py")
    dev = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dev)
    return dev


@pytest.mark.parametrize("flag", [["--newest-jax"], ["--jax", "0.11.2"]])
def test_the_newest_jax_subset_runs_on_3_12_and_refuses_other_pythons_in_one_line(
        tmp_path: Path, flag):
    if sys.version_info[:2] == (3, 12):  # the subset's own folder, pins and test files
        dev = _dev_module()
        venv_dir, pins, args = dev._jax_subset([*flag, "-x"])
        name = "newest" if flag == ["--newest-jax"] else flag[1]
        assert venv_dir == dev.ROOT / f".venv-jax-{name}"
        assert ("jax==0.11.2" in pins) == (name == "0.11.2")
        assert args == [*dev.NEWEST_JAX_TESTS, "-x"]
        return
    out = _dev(tmp_path, "test", *flag)
    assert out.returncode == 1
    assert out.stderr.strip() == (f"dev.py: test {flag[0]} needs Python 3.12 (this is "
                                  f"{sys.version.split()[0]}, which keeps jax 0.10.2); run it "
                                  f"with python3.12")
    assert not list(tmp_path.glob(".venv*"))


def test_each_python_has_an_environment_of_its_own():
    dev = _dev_module()
    expected = ".venv-3.12" if sys.version_info[:2] == (3, 12) else ".venv"
    assert dev.VENV.name == expected
    gitignore = (ROOT / ".gitignore").read_text().splitlines()
    assert ".venv/" in gitignore and ".venv-3.12/" in gitignore


def _slow_functions(path: Path) -> set[str]:
    """The test functions of ``path`` that carry ``@pytest.mark.slow``, read from its source."""
    return {node.name for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
            and any(ast.unparse(d) == "pytest.mark.slow" for d in node.decorator_list)}


def test_the_fast_lane_leaves_out_exactly_the_tests_marked_slow(monkeypatch, capfd):
    dev = _dev_module()
    # this test's interpreter runs in the environment dev.py installs: no install to check
    monkeypatch.setattr(dev, "ensure_environment", lambda *a, **k: Path(sys.executable))
    files = ["tests/test_dev.py", "tests/test_readme.py", "tests/test_tokenize.py", "README.md"]
    collected = []
    for lane in (["--fast"], []):
        assert dev.main(["test", *lane, "--collect-only", "-q", "-p", "no:cacheprovider",
                         *files]) == 0
        collected.append({line for line in capfd.readouterr().out.splitlines() if "::" in line})
    fast, whole = collected
    left_out = whole - fast
    assert fast < whole
    assert {t.split("::")[0] for t in left_out} == {"tests/test_readme.py",
                                                    "tests/test_tokenize.py", "README.md"}
    assert not any(t.startswith("README.md::") for t in fast)  # a page's blocks go together
    assert {t.split("::")[1].split("[")[0] for t in left_out
            if t.startswith("tests/test_tokenize.py")} == _slow_functions(
                ROOT / "tests/test_tokenize.py")


def test_jax_without_a_release_is_refused_in_one_line(tmp_path: Path):
    out = _dev(tmp_path, "test", "--jax", "-x")
    assert out.returncode == 1
    assert out.stderr.strip() == "dev.py: --jax needs a release after it, such as --jax 0.11.2"
    assert not list(tmp_path.glob(".venv*"))


def test_the_newest_jax_subset_names_test_files_that_exist():
    dev = _dev_module()
    assert dev.NEWEST_JAX_TESTS
    for path in dev.NEWEST_JAX_TESTS:
        assert (ROOT / path).is_file(), f"dev.NEWEST_JAX_TESTS names {path}, which is gone"
