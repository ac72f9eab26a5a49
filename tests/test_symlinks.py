"""Symbolic links under the prefix: every local path is resolved and checked against the
prefix, and the executor writes nothing where a link leads out of it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from marin.execution import Executor, ExecutorStep, this_output_path
from marin.storage import StorageError
from marin.storage.files import resolve_under
from tests.conftest import ROOT


def write_marker(config: dict) -> None:
    os.makedirs(config["out"], exist_ok=True)
    Path(config["out"], "result.txt").write_text("written\n")


def _step() -> ExecutorStep:
    return ExecutorStep("linked/step", write_marker, {"out": this_output_path()})


def _tree(tmp_path: Path) -> tuple[Path, Path]:
    prefix, outside = tmp_path / "prefix", tmp_path / "outside"
    prefix.mkdir()
    outside.mkdir()
    return prefix, outside


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_paths_under_the_prefix_are_returned_as_they_are(tmp_path: Path):
    prefix, _ = _tree(tmp_path)
    (prefix / "a").mkdir()
    assert resolve_under(str(prefix), str(prefix / "a" / "x.json")) == str(prefix / "a/x.json")
    assert resolve_under(str(prefix), f"file://{prefix}/a") == str(prefix / "a")
    assert resolve_under(str(prefix), str(prefix / "not" / "yet")) == str(prefix / "not/yet")
    (prefix / "latest").symlink_to(prefix / "a")  # a link that stays inside is followed
    assert resolve_under(str(prefix), str(prefix / "latest" / "x")) == str(prefix / "a" / "x")


@pytest.mark.parametrize("make, path", [
    (lambda p, o: (p / "step").symlink_to(o), "step/x.json"),  # a folder linking out
    (lambda p, o: (p / "passwd.txt").symlink_to("/etc/passwd"), "passwd.txt"),  # a file
    (lambda p, o: (p / "deep").symlink_to(o) or (o / "in").mkdir(), "deep/in/x"),
    (lambda p, o: None, "../outside/x"),  # no link at all: ".." leaves the prefix
])
def test_a_path_that_leads_outside_the_prefix_is_one_line(tmp_path: Path, make, path: str):
    prefix, outside = _tree(tmp_path)
    make(prefix, outside)
    with pytest.raises(StorageError) as info:
        resolve_under(str(prefix), f"{prefix}/{path}")
    message = str(info.value)
    assert "\n" not in message and f"{prefix}/{path}" in message and str(prefix) in message


def test_object_store_urls_are_compared_as_text():
    assert resolve_under("gs://b/p", "gs://b/p/step/x") == "gs://b/p/step/x"
    assert resolve_under("gcs://b/p/", "gs://b/p/step") == "gs://b/p/step"
    for url in ("gs://b/px/y", "gs://b/p/../q", "s3://b/p/x", "gs://other/p/x"):
        with pytest.raises(StorageError, match="is not under the prefix"):
            resolve_under("gs://b/p", url)


def test_a_step_folder_linking_outside_the_prefix_is_refused_before_anything_runs(
        tmp_path: Path):
    prefix, outside = _tree(tmp_path)
    executor = Executor(str(prefix))
    output = Path(executor.plan([_step()]).entries[0].output_path)
    output.parent.mkdir(parents=True)
    output.symlink_to(outside)
    with pytest.raises(StorageError, match="leads outside the prefix"):
        executor.run([_step()])
    assert list(outside.iterdir()) == []  # no info, status, lease or output written there


def test_a_group_folder_linking_outside_is_refused_too(tmp_path: Path):
    prefix, outside = _tree(tmp_path)
    (prefix / "linked").symlink_to(outside)
    with pytest.raises(StorageError, match="leads outside the prefix"):
        Executor(str(prefix)).run([_step()])
    assert list(outside.iterdir()) == []


@pytest.mark.parametrize("name", [".executor_status", ".executor_info", ".executor_lease",
                                  ".attempts"])
def test_a_record_or_the_attempts_folder_linking_outside_fails_the_step(tmp_path: Path,
                                                                      name: str):
    prefix, outside = _tree(tmp_path)
    victim = outside / "victim"
    victim.mkdir() if name == ".attempts" else victim.write_text("keep me\n")
    executor = Executor(str(prefix))
    output = Path(executor.plan([_step()]).entries[0].output_path)
    output.mkdir(parents=True)
    (output / name).symlink_to(victim)
    before = _snapshot(outside)
    result = executor.run([_step()])
    assert not result.ok
    (failed,) = result.failed
    assert "leads outside the prefix" in failed.error and name in failed.error
    assert _snapshot(outside) == before
    assert (output / name).is_symlink()  # left as it was, not replaced or written through
    assert not (output / "result.txt").exists()


def test_links_that_stay_inside_the_prefix_are_used(tmp_path: Path):
    prefix, _ = _tree(tmp_path)
    (prefix / "real").mkdir()
    (prefix / "linked").symlink_to(prefix / "real")
    assert Executor(str(prefix)).run([_step()]).ok
    (written,) = (prefix / "real").glob("step-*/result.txt")
    assert written.read_text() == "written\n"


@pytest.mark.slow
def test_marin_executor_reports_a_step_folder_linking_outside_in_one_line(tmp_path: Path):
    prefix, outside = _tree(tmp_path)
    experiment = ROOT / "experiments" / "hello_pipeline.py"
    marin = str(Path(sys.executable).parent / "marin")
    plan = subprocess.run([marin, "executor", "--dry-run", "--json", "--prefix", str(prefix),
                           str(experiment)], capture_output=True, text=True, timeout=120)
    first = Path(json.loads(plan.stdout)["steps"][0]["output_path"])
    first.parent.mkdir(parents=True, exist_ok=True)
    first.symlink_to(outside)
    out = subprocess.run([marin, "executor", "--prefix", str(prefix), str(experiment)],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 2, out.stdout + out.stderr
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "leads outside the prefix" in lines[0], out.stderr
    assert list(outside.iterdir()) == []
