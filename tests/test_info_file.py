"""What ``.executor_info`` holds: configs encoded by the config walk, and the git commit."""

from __future__ import annotations

import enum
import json
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


def _strict(raw: bytes) -> object:
    """``raw`` parsed as JSON proper, which has no NaN or Infinity."""
    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(raw, parse_constant=refuse)


def test_configs_become_plain_json():
    info = decode_info(encode_info({"version": {"v": 1}, "config": Outer()}))
    assert info["version"] == {"v": 1}
    assert info["config"] == {
        "inner": {"color": "red", "sizes": [10, 100, 9]},  # sorted by their JSON text
        "table": {"2": "b", "null": "n", "true": "t", "1.5": "f", "s": "x"},
        "fn": repr(len),
    }


def test_non_finite_floats_are_written_as_valid_json_and_old_files_still_read():
    config = {"lr": math.nan, "clip": [math.inf, -math.inf], "ok": 0.5}
    raw = encode_info({"version": 1, "config": config})
    assert _strict(raw)["config"] == {"lr": "nan", "clip": ["inf", "-inf"], "ok": 0.5}
    old = b'{"version": 1, "config": {"lr": NaN, "clip": [Infinity, -Infinity]}}'
    read = decode_info(old)["config"]  # as written before: bare constants
    assert math.isnan(read["lr"]) and read["clip"] == [math.inf, -math.inf]


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
