"""``dev.py``, the set-up script a new checkout starts with: its help and its refusals."""

from __future__ import annotations

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
