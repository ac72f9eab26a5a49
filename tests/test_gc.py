"""``marin gc`` and ``marin du`` on a prefix built by real executors: two versions of a
study step, a killed attempt, a cut checkpoint save and a step running during gc."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow

EXPERIMENT = "tests.fixtures.gc_experiment"
#: These tests gc outputs they have just made: no grace period (24 hours by default).
ANY_AGE = ("--older-than", "0")


def _env(tmp_path: Path, **env: str) -> dict[str, str]:
    return {**os.environ, "MARIN_TEST_DIR": str(tmp_path), "PYTHONUNBUFFERED": "1", **env}


def _executor(tmp_path: Path, *extra: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "marin.cli", "executor", "--prefix",
                           str(tmp_path / "prefix"), *extra, EXPERIMENT], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, env=_env(tmp_path, **env))


def _marin(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "marin.cli", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, env=_env(tmp_path))


def _one(prefix: Path, pattern: str) -> Path:
    (found,) = prefix.glob(pattern)
    return found


def _ledger(tmp_path: Path) -> list[str]:
    path = tmp_path / "ledger.txt"
    return path.read_text().split() if path.exists() else []


def _build(tmp_path: Path) -> dict[str, Path]:
    prefix = tmp_path / "prefix"
    assert _executor(tmp_path, MARIN_TEST_RATE="1").returncode == 0
    old = {p.name for p in (prefix / "gc").glob("study-*")}
    assert _executor(tmp_path, MARIN_TEST_RATE="2").returncode == 0
    (new,) = {p.name for p in (prefix / "gc").glob("study-*")} - old
    killed = _executor(tmp_path, MARIN_TEST_SET="crash")
    assert killed.returncode == -9, killed.stderr
    crash = _one(prefix, "gc/crash-*")
    (attempt,) = (crash / ".attempts").iterdir()
    cut = prefix / "gc" / new / "checkpoints" / "step_00000010.orbax-checkpoint-tmp-1700000000"
    cut.mkdir(parents=True)
    (cut / "part").write_bytes(b"y" * 500)
    return {"old": prefix / "gc" / old.pop(), "new": prefix / "gc" / new, "crash": crash,
            "attempt": attempt, "cut": cut, "data": _one(prefix, "gc/data-*")}


def test_gc_lists_then_deletes_exactly_what_nothing_needs(tmp_path: Path):
    paths = _build(tmp_path)
    prefix = tmp_path / "prefix"
    holder = subprocess.Popen([sys.executable, "-m", "marin.cli", "executor", "--prefix",
                               str(prefix), EXPERIMENT], cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True,
                              env=_env(tmp_path, MARIN_TEST_SET="hold"))
    try:
        while not (tmp_path / "holding").exists():
            assert holder.poll() is None, holder.communicate()
            time.sleep(0.05)
        held = _one(prefix, "gc/hold-*")
        expected = {(str(paths["old"]), "output"), (str(paths["attempt"]), "attempt"),
                    (str(paths["cut"]), "orbax-tmp")}
        dry = _marin(tmp_path, "gc", "--prefix", str(prefix), *ANY_AGE, "--json")
        assert dry.returncode == 0, dry.stderr
        report = json.loads(dry.stdout)
        assert {(c["path"], c["kind"]) for c in report["candidates"]} == expected
        sizes = {c["path"]: c["bytes"] for c in report["candidates"]}
        assert sizes[str(paths["cut"])] == 500
        assert sizes[str(paths["old"])] == sum(
            f.stat().st_size for f in paths["old"].rglob("*") if f.is_file())
        assert paths["old"].exists() and paths["attempt"].exists()  # a dry run deletes nothing
        du = json.loads(_marin(tmp_path, "du", "--prefix", str(prefix), "--json").stdout)
        assert du["gc_frees"] == report["bytes"]
        assert {r["key"] for r in du["steps"]} == {
            str(p.relative_to(prefix)) for p in (paths["old"], paths["new"], paths["crash"],
                                                 paths["data"], held)}
        done = _marin(tmp_path, "gc", "--prefix", str(prefix), *ANY_AGE, "--yes", "--json")
        assert done.returncode == 0, done.stderr
        assert {(c["path"], c["kind"]) for c in json.loads(done.stdout)["candidates"]} \
            == expected
        assert not paths["old"].exists() and not paths["attempt"].exists()
        assert not paths["cut"].exists()
        for kept in ("new", "data", "crash"):
            assert (paths[kept] / ".executor_status").exists(), kept
        assert (held / ".executor_lease").exists()
        assert (held / ".attempts").exists()  # the running step's attempt is untouched
    finally:
        (tmp_path / "release").touch()
        out, err = holder.communicate(timeout=120)
    assert holder.returncode == 0, out + err
    before = _ledger(tmp_path)
    rerun = _executor(tmp_path, MARIN_TEST_RATE="2")
    assert rerun.returncode == 0, rerun.stderr
    assert _ledger(tmp_path) == before  # every step skipped


def test_gc_waits_for_an_executor_between_its_plan_and_its_invocation_record(tmp_path: Path):
    """An executor that planned "skip" on an output no record names yet: gc waits for its
    record, and keeps the output."""
    from marin.execution import Executor
    from marin.execution import executor as executor_module
    from tests.fixtures import gc_experiment

    paths = _build(tmp_path)
    os.environ["MARIN_TEST_DIR"] = str(tmp_path)
    planned, go = threading.Event(), threading.Event()
    original = executor_module.record_invocation

    def slow_record(*args, **kwargs):
        planned.set()
        go.wait(30)
        return original(*args, **kwargs)

    old_version = os.environ.get("MARIN_TEST_RATE")
    os.environ["MARIN_TEST_RATE"] = "1"  # the older version again: its study is unreachable
    try:
        steps = gc_experiment.steps()
    finally:
        os.environ.pop("MARIN_TEST_RATE") if old_version is None else None
    executor_module.record_invocation = slow_record
    results = []
    try:
        run = threading.Thread(target=lambda: results.append(
            Executor(prefix=str(tmp_path / "prefix")).run(steps)))
        run.start()
        assert planned.wait(60)
        threading.Timer(1.0, go.set).start()
        done = _marin(tmp_path, "gc", "--prefix", str(tmp_path / "prefix"), *ANY_AGE, "--yes",
                      "--json")
        run.join(60)
    finally:
        executor_module.record_invocation = original
        go.set()
    assert done.returncode == 0, done.stderr
    assert results and all(e.action == "skip" for e in results[0].plan.entries)
    assert (paths["old"] / ".executor_status").exists()  # planned "skip": kept
    assert not paths["attempt"].exists()


@pytest.mark.parametrize("args, expected", [
    (["--prefix", "{tmp}/nowhere"], "does not exist"),
    (["--prefix", "{prefix}", "--keep", "no-such-experiment"], "names no experiment"),
    (["--prefix", "{prefix}", "--older-than", "thirty days"], "is not an age"),
    (["--prefix", "{prefix}", "--wait", "-5"], "--wait -5: give the seconds"),
    (["--prefix", "{prefix}", "--wait", "nan"], "--wait nan: give the seconds"),
])
def test_bad_input_is_one_line(tmp_path: Path, args: list[str], expected: str):
    assert _executor(tmp_path, MARIN_TEST_RATE="1").returncode == 0
    filled = [a.format(tmp=tmp_path, prefix=tmp_path / "prefix") for a in args]
    result = _marin(tmp_path, "gc", *filled)
    assert result.returncode == 2
    assert expected in result.stderr and len(result.stderr.strip().splitlines()) == 1, \
        result.stderr


def test_a_second_gc_is_refused_naming_the_first(tmp_path: Path):
    from marin.execution.prefix_guard import take_prefix_for_gc
    from marin.storage import get_storage

    assert _executor(tmp_path, MARIN_TEST_RATE="1").returncode == 0
    prefix = str(tmp_path / "prefix")
    lease = take_prefix_for_gc(prefix, get_storage(prefix), "gc-first")
    try:
        result = _marin(tmp_path, "gc", "--prefix", prefix, "--yes")
    finally:
        lease.release()
    assert result.returncode == 2 and "another marin gc runs" in result.stderr
    assert "gc-first" in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_a_pinned_old_version_is_kept_until_unpinned(tmp_path: Path):
    prefix = tmp_path / "prefix"
    assert _executor(tmp_path, MARIN_TEST_RATE="1").returncode == 0
    (old,) = (prefix / "gc").glob("study-*")
    assert _executor(tmp_path, MARIN_TEST_RATE="2").returncode == 0
    key = str(old.relative_to(prefix))
    assert _marin(tmp_path, "pin", key, "--prefix", str(prefix)).returncode == 0
    assert _marin(tmp_path, "pin", "--list", "--prefix", str(prefix)).stdout.split() == [key]
    dry = json.loads(_marin(tmp_path, "gc", "--prefix", str(prefix), *ANY_AGE, "--json").stdout)
    assert dry["candidates"] == []
    assert _marin(tmp_path, "unpin", key, "--prefix", str(prefix)).returncode == 0
    dry = json.loads(_marin(tmp_path, "gc", "--prefix", str(prefix), *ANY_AGE, "--json").stdout)
    assert [c["step"] for c in dry["candidates"]] == [key]
    wrong = _marin(tmp_path, "pin", "gc/nothing-0000", "--prefix", str(prefix))
    assert wrong.returncode == 2 and "no step output 'gc/nothing-0000'" in wrong.stderr
    assert len(wrong.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("store", ["gcs_bucket", "s3_bucket"])
def test_many_deletes_on_an_object_store_remove_exactly_those(store: str, request):
    """``delete_files`` on GCS (batch requests of 100) and S3 (DeleteObjects): three
    batches' worth, names that need quoting, a file already gone; the rest stays."""
    from marin.storage import get_storage

    bucket = request.getfixturevalue(store)
    storage = get_storage(bucket)
    names = [f"p/out-{i}/part #{i}?x=1" for i in range(250)]
    kept = [f"p/keep-{i}" for i in range(3)]
    for name in names + kept:
        storage.write(f"{bucket}/{name}", b"x")
    storage.delete_files([f"{bucket}/{n}" for n in names] + [f"{bucket}/p/never-written"])
    assert sorted(f.path for f in storage.list_files(f"{bucket}/p")) == \
        sorted(f"{bucket}/{n}" for n in kept)


def test_gc_while_executors_run_deletes_nothing_they_use(tmp_path: Path):
    """Three gc runs with ``--yes`` while two executors are in the middle of new versions of
    the study: no gc lists any output or attempt of theirs, both succeed, and the newer
    version then reruns with every step skipped."""
    prefix = tmp_path / "prefix"
    paths = _build(tmp_path)
    runs = [subprocess.Popen([sys.executable, "-m", "marin.cli", "executor", "--prefix",
                              str(prefix), EXPERIMENT], cwd=ROOT, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True,
                             env=_env(tmp_path, MARIN_TEST_RATE=rate, MARIN_TEST_HOLD="1"))
            for rate in ("3", "4")]
    try:
        while not all((tmp_path / f"holding-{r}").exists() for r in (3, 4)):
            assert all(r.poll() is None for r in runs), [r.communicate() for r in runs]
            time.sleep(0.05)
        running = {p for p in (prefix / "gc").glob("study-*") if (p / ".attempts").exists()}
        assert len(running) == 2
        gcs = [_marin(tmp_path, "gc", "--prefix", str(prefix), *ANY_AGE, "--yes", "--json")
               for _ in range(3)]
    finally:
        (tmp_path / "release").touch()
        outcomes = [r.communicate(timeout=300) for r in runs]
    assert [r.returncode for r in runs] == [0, 0], outcomes
    assert all(g.returncode == 0 for g in gcs), [g.stderr for g in gcs]
    deleted = {c["path"] for g in gcs for c in json.loads(g.stdout)["candidates"]}
    assert str(paths["old"]) in deleted and str(paths["attempt"]) in deleted
    used = {str(p) for p in running} | {str(paths["data"])}
    assert not {d for d in deleted if any(d == u or d.startswith(u + "/") for u in used)}
    before = _ledger(tmp_path)
    rerun = _executor(tmp_path, MARIN_TEST_RATE="4")
    assert rerun.returncode == 0, rerun.stderr
    assert _ledger(tmp_path) == before  # every step skipped: nothing of it was deleted
