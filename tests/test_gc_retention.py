"""What ``marin gc`` keeps of each experiment's versions: its latest and its last complete
invocation (``--keep-last N``: its newest N), experiments told apart by the script's
resolved path and the experiment's name; the 24-hour grace period; the deletion log."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from marin.execution import Executor, ExecutorStep, this_output_path
from marin.execution.gc import run_gc
from marin.execution.gc.log import GC_LOG_DIR, GcLogEntry
from marin.execution.gc.retention import Retention
from tests.conftest import ROOT

SCRIPT = '''
import os
from dataclasses import dataclass
from pathlib import Path

from marin.execution import Experiment, ExecutorStep, executor_main, this_output_path


@dataclass(frozen=True)
class Options:
    budget: int = 1


@dataclass(frozen=True)
class Cfg:
    version: str
    output_path: str = this_output_path()


def train(cfg: Cfg) -> None:
    Path(cfg.output_path).mkdir(parents=True, exist_ok=True)
    (Path(cfg.output_path) / "out.txt").write_text(cfg.version)
    if os.environ.get("END") == "fail":
        raise RuntimeError("broke on purpose")
    if os.environ.get("END") == "kill":
        os.kill(os.getpid(), 9)


def build(options: Options) -> list[ExecutorStep]:
    return [ExecutorStep("train/x", train, Cfg(os.environ["VERSION"] + f"/{options.budget}"))]


experiment = Experiment(build, options=Options)

if __name__ == "__main__":
    executor_main(experiment)
'''


def _script(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train.py").write_text(SCRIPT)
    return folder / "train.py"


def _run(prefix: Path, cwd: Path, script: str, version: str, *args: str, end: str = "",
         code: int = 0) -> Path:
    """Run ``script`` (as typed, from ``cwd``): the output it made."""
    env = {**os.environ, "VERSION": version, "END": end,
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    before = set((prefix / "train").glob("x-*")) if (prefix / "train").exists() else set()
    done = subprocess.run([sys.executable, script, "--prefix", str(prefix), *args], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == code, done.stdout + done.stderr
    (made,) = set((prefix / "train").glob("x-*")) - before
    return made


def _gc(prefix: Path, rule: Retention | None = None) -> set[str]:
    """gc with ``--yes`` and no grace period: the paths it deleted."""
    return {c.path for c in run_gc(str(prefix), rule or Retention(), 0, yes=True).found}


def _kept(output: Path) -> bool:
    return (output / ".executor_status").exists() and (output / "out.txt").exists()


pytestmark = pytest.mark.slow


@pytest.mark.parametrize("end, code", [("fail", 1), ("kill", -9)])
def test_a_failed_or_killed_run_of_a_changed_config_keeps_the_last_complete_version(
        tmp_path: Path, end: str, code: int):
    prefix, script = tmp_path / "prefix", _script(tmp_path / "exp")
    complete = _run(prefix, script.parent, "train.py", "1")
    broken = _run(prefix, script.parent, "train.py", "2", end=end, code=code)
    _gc(prefix)
    assert _kept(complete)  # the latest invocation broke: the last complete one is kept
    assert broken.exists()  # and the latest one's output (its attempt may go)
    newer = _run(prefix, script.parent, "train.py", "3")
    assert str(complete) in _gc(prefix) and not complete.exists()
    assert _kept(newer)


def test_experiments_are_told_apart_by_the_resolved_script_not_the_path_as_typed(
        tmp_path: Path):
    prefix = tmp_path / "prefix"
    a, b = _script(tmp_path / "a"), _script(tmp_path / "b")
    in_a = _run(prefix, a.parent, "train.py", "1")
    in_b = _run(prefix, b.parent, "train.py", "2")  # another train.py: another experiment
    assert _gc(prefix) == set()
    assert _kept(in_a) and _kept(in_b)
    again = _run(prefix, tmp_path, "./a//train.py", "3")  # a's train.py, typed otherwise
    assert _gc(prefix) == {str(in_a)}
    assert _kept(again) and _kept(in_b)


def test_one_sweep_run_with_other_options_is_another_experiment(tmp_path: Path):
    prefix, script = tmp_path / "prefix", _script(tmp_path / "sweep")
    small = _run(prefix, script.parent, "train.py", "1", "--budget", "1")
    large = _run(prefix, script.parent, "train.py", "1", "--budget", "2")
    assert _gc(prefix) == set()
    assert _kept(small) and _kept(large)
    [record] = [json.loads(p.read_text()) for p in (prefix / ".marin" / "invocations").iterdir()
                if "--budget=2" in json.loads(p.read_text())["name"]]
    assert record["format"] == 3 and record["name"] == "train --budget=2"
    assert record["script"] == str(script.resolve())
    assert _gc(prefix, Retention(keep=("train --budget=2",))) == {str(small)}  # by its name
    assert _kept(large)


def test_keep_last_keeps_the_newest_invocations_of_each_experiment(tmp_path: Path):
    prefix, script = tmp_path / "prefix", _script(tmp_path / "exp")
    v1, v2, v3 = (_run(prefix, script.parent, "train.py", v) for v in "123")
    gc = [sys.executable, "-m", "marin.cli", "gc", "--prefix", str(prefix), "--older-than",
          "0", "--yes", "--json"]
    two = subprocess.run([*gc, "--keep-last", "2"], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert two.returncode == 0, two.stderr
    report = json.loads(two.stdout)
    assert [c["path"] for c in report["candidates"]] == [str(v1)]
    assert _kept(v2) and _kept(v3)
    [logged] = GcLogEntry.decode_lines(Path(report["log"]).read_bytes())
    assert (logged.path, logged.reason) == (str(v1), report["candidates"][0]["reason"])
    one = subprocess.run(gc, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert [c["path"] for c in json.loads(one.stdout)["candidates"]] == [str(v2)]
    zero = subprocess.run([*gc, "--keep-last", "0"], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert zero.returncode == 2 and "--keep-last 0" in zero.stderr
    assert len(zero.stderr.strip().splitlines()) == 1 and _kept(v3)


@dataclass(frozen=True)
class Cfg:
    version: int
    output_path: str = this_output_path()


def write(cfg: Cfg) -> None:
    Path(cfg.output_path).mkdir(parents=True, exist_ok=True)
    (Path(cfg.output_path) / "data.bin").write_bytes(b"x" * (100 * cfg.version))


def _version(prefix: Path, version: int, experiment: str = "exp") -> Path:
    result = Executor(str(prefix), max_concurrent=1).run(
        [ExecutorStep("v", write, Cfg(version))], experiment=experiment)
    assert result.ok, result.summary()
    return Path(result.plan.entries[0].node.output_path)


def _age(folder: Path, seconds: float) -> None:
    then = time.time() - seconds
    for path in [folder, *folder.rglob("*")]:
        os.utime(path, (then, then))


def test_nothing_newer_than_the_grace_period_is_deleted(tmp_path: Path):
    prefix = tmp_path / "prefix"
    old, _ = _version(prefix, 1), _version(prefix, 2)
    assert run_gc(str(prefix), Retention(), yes=True).found == []  # by default: 24 hours
    assert _kept_v(old)
    _age(old, 23 * 3600)
    assert run_gc(str(prefix), Retention(), yes=True).found == []
    _age(old, 25 * 3600)
    (old / "touched").write_text("new")  # one file modified since: the output is kept
    assert run_gc(str(prefix), Retention(), yes=True).found == []
    (old / "touched").unlink()
    assert [c.path for c in run_gc(str(prefix), Retention(), yes=True).found] == [str(old)]
    assert not old.exists()


def _kept_v(output: Path) -> bool:
    return (output / ".executor_status").exists() and (output / "data.bin").exists()


def test_every_deletion_is_listed_in_a_log_that_gc_keeps(tmp_path: Path):
    prefix = tmp_path / "prefix"
    first, second, _ = _version(prefix, 1), _version(prefix, 2), _version(prefix, 3)
    sizes = {p: sum(f.stat().st_size for f in p.rglob("*") if f.is_file())
             for p in (first, second)}
    run = run_gc(str(prefix), Retention(), 0, yes=True)
    assert run.log is not None and Path(run.log).parent == prefix / GC_LOG_DIR
    entries = GcLogEntry.decode_lines(Path(run.log).read_bytes())
    assert {(e.path, e.kind, e.step, e.bytes) for e in entries} == {
        (str(p), "output", str(p.relative_to(prefix)), sizes[p]) for p in (first, second)}
    assert all(e.error is None and "invocation" in e.reason and e.deleted_at for e in entries)
    logged = Path(run.log).read_bytes()
    again = run_gc(str(prefix), Retention(), 0, yes=True)
    assert again.found == [] and again.log is None  # nothing deleted: no log
    fourth = _version(prefix, 4)
    assert fourth.exists() and run_gc(str(prefix), Retention(), 0, yes=True).log is not None
    assert Path(run.log).read_bytes() == logged  # gc never deletes its own logs
    assert len(list((prefix / GC_LOG_DIR).iterdir())) == 2


def test_a_log_line_of_a_newer_format_or_none_at_all_decodes_with_an_error():
    entry = GcLogEntry("/p/v-1", "output", "v-1", "why", 10, 2, 1.0, 2.0)
    assert GcLogEntry.decode(json.dumps(entry.to_json())) == entry
    newer = GcLogEntry.decode(json.dumps({**entry.to_json(), "format": 99}))
    assert newer.path == "/p/v-1" and "format 99" in newer.error
    assert GcLogEntry.decode(b"{cut").error.startswith("not JSON")


def test_records_of_format_2_still_count_by_the_experiment_as_typed(tmp_path: Path):
    """Records written before format 3 name no script or name: invocations of one typed
    experiment and the same step names are one experiment, as before."""
    prefix = tmp_path / "prefix"
    outputs = [_version(prefix, v, experiment) for v, experiment in
               ((1, "e.py"), (2, "e.py"), (3, "other.py"))]
    for path in (prefix / ".marin" / "invocations").iterdir():
        data = json.loads(path.read_text())
        data.pop("script"), data.pop("name")
        path.write_text(json.dumps({**data, "format": 2}))
    assert _gc(prefix) == {str(outputs[0])}


@pytest.mark.parametrize("steps, ended, complete", [
    ([("succeeded", None), ("reused", None)], 1.0, True),
    ([("skipped", "succeeded"), ("succeeded", None)], 1.0, True),
    ([("skipped", None), ("succeeded", None)], 1.0, False),  # not selected by run_only
    ([("succeeded", None), ("failed", None)], 1.0, False),
    ([("succeeded", None), ("cancelled", None)], 1.0, False),
    ([(None, None)], None, False),  # killed: never ended
    ([], 1.0, False),
])
def test_an_invocation_is_complete_when_it_ended_with_every_step_done(steps, ended, complete):
    from marin.execution.invocation_record import InvocationRecord, InvocationStep

    record = InvocationRecord("i", started=0.0, ended=ended, steps=tuple(
        InvocationStep(f"s{n}-0", outcome=outcome, status_at_plan=at)
        for n, (outcome, at) in enumerate(steps)))
    assert record.complete is complete


def test_an_invocation_that_says_it_started_in_the_future_is_not_the_latest(tmp_path: Path):
    """A record dated ahead (a host's wrong clock) would always be the experiment's latest
    and leave its real latest unprotected: it is kept, not counted, and gc says so."""
    prefix = tmp_path / "prefix"
    old, new = _version(prefix, 1), _version(prefix, 2)
    records = sorted((prefix / ".marin" / "invocations").glob("*.json"))
    first = json.loads(records[0].read_text())
    assert old.name in json.dumps(first["steps"])
    first["started"] = time.time() + 10 * 365 * 86400
    records[0].write_text(json.dumps(first))
    assert run_gc(str(prefix), Retention(), 0, yes=True).found == []
    assert _kept_v(old) and _kept_v(new)
    dry = subprocess.run([sys.executable, "-m", "marin.cli", "gc", "--prefix", str(prefix),
                          "--older-than", "0"], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert dry.returncode == 0, dry.stderr
    [note] = [line for line in dry.stdout.splitlines() if "in the future" in line]
    assert note.startswith(f"invocation {first['id']} (") and \
        "not counted as its experiment's latest" in note
