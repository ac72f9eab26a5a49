"""What ``.executor_info`` holds: configs encoded by the config walk, and the git commit."""

from __future__ import annotations

import enum
import math
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from marin.execution.status import decode_info, encode_info, git_commit


class Color(enum.Enum):
    RED = "red"


@dataclass(frozen=True)
class Inner:
    color: Color = Color.RED
    sizes: frozenset[int] = frozenset({10, 9, 100})


@dataclass(frozen=True)
class Outer:
    inner: Inner = field(default_factory=Inner)
    table: dict = field(default_factory=lambda: {2: "b", None: "n", True: "t", 1.5: "f",
                                                 "s": "x"})
    fn: object = len


def test_configs_become_plain_json():
    info = decode_info(encode_info({"version": {"v": 1}, "config": Outer(),
                                    "nan": math.nan}))
    assert info["version"] == {"v": 1}
    assert info["config"] == {
        "inner": {"color": "red", "sizes": [10, 100, 9]},  # sorted by their JSON text
        "table": {"2": "b", "null": "n", "true": "t", "1.5": "f", "s": "x"},
        "fn": repr(len),
    }
    assert math.isnan(info["nan"])


def test_mixed_key_types_do_not_break_sorted_output():
    # json.dumps(sort_keys=True) alone raises TypeError comparing 1 with "a".
    assert decode_info(encode_info({"version": 1, "t": {1: "x", "a": "y"}}))["t"] == {
        "1": "x", "a": "y"}


@pytest.fixture
def fresh_git_commit():
    git_commit.cache_clear()
    yield git_commit
    git_commit.cache_clear()


def test_git_commit_outside_a_repository_is_none(tmp_path: Path, monkeypatch,
                                                 fresh_git_commit):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    assert fresh_git_commit() is None


def test_git_commit_inside_a_repository_is_its_head(tmp_path: Path, monkeypatch,
                                                    fresh_git_commit):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@e"}
    subprocess.run(["git", "init", "-q"], check=True, env=env)
    subprocess.run(["git", "-c", "commit.gpgsign=false", "commit", "-q", "--allow-empty",
                    "-m", "x"], check=True, env=env)
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    assert fresh_git_commit() == head
