"""The commit protocol's fault matrix: an executor (a real process, on a one-step experiment
this module writes under tmp_path) is stopped at each stage a step passes through, with
SIGKILL, SIGTERM or a pause (SIGSTOP) past the lease's ttl while a second executor takes the
step; then the step is run again and the invariants are checked:

- SUCCESS implies the output holds exactly the committed attempt's files (each attempt
  writes a name of its own and its token into every file, so a mixture shows);
- no SUCCESS without its files;
- the committed attempt's function completed exactly once (completions are appended to a
  file outside the output), and no more attempts completed than the fault allows;
- the lease is free (absent, or held by a process that is gone) once the executors exit;
- ``marin gc --yes`` afterwards deletes none of the committed files.

The stops come from ``MARIN_FAULT`` (``marin.execution._faults``), a test-only hook.
Also here: a ``--force-run`` that writes fewer files than the run before, and the other
termination signals during the commit.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from marin.execution._faults import STAGES
from marin.execution.lease import LeaseRecord
from tests.conftest import ROOT
from tests.helpers.processes import marin_command, wait_stopped

pytestmark = pytest.mark.slow

TTL = "2"

EXPERIMENT = '''
import fcntl
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

from marin.execution import ExecutorStep, executor_main, this_output_path
from marin.execution._faults import fault_point
from marin.execution.shared import SharedFolder


@dataclass(frozen=True)
class WriteConfig:
    output_path: str


def write(config: WriteConfig) -> None:
    token = uuid.uuid4().hex[:12]
    out = Path(config.output_path)
    out.mkdir(parents=True, exist_ok=True)
    files = int(os.environ.get("COMMIT_TEST_FILES", "6"))
    for i in range(files):
        if i == files // 2:
            fault_point("writes")
        (out / f"f{i:02d}").write_text(token)
    (out / f"own-{token}").write_text(token)  # a name no other attempt writes
    (out / "sub").mkdir()
    (out / "sub" / f"x-{token}").write_text(token)  # a folder replaced whole
    shared = SharedFolder.of(str(out / "checkpoints"))
    entry = Path(shared.own) / "step_1"
    entry.mkdir(parents=True)
    (entry / "data").write_text(token)
    shared.publish("step_1", {"step": 1})
    with open(os.environ["COMMIT_TEST_LEDGER"], "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.write(token + "\\n")


steps = [ExecutorStep("commit/write", write, WriteConfig(this_output_path()))]

if __name__ == "__main__":
    executor_main(steps)
'''


class Run:
    """The experiment and its prefix under ``tmp_path``."""

    def __init__(self, tmp_path: Path):
        self.tmp = tmp_path
        self.prefix = tmp_path / "prefix"
        self.ledger = tmp_path / "completions.txt"
        self.experiment = tmp_path / "commit_experiment.py"
        self.experiment.write_text(EXPERIMENT)

    def start(self, *extra: str, **env: str) -> subprocess.Popen:
        return subprocess.Popen(
            [*marin_command(), "executor", "--prefix", str(self.prefix), "--lease-ttl", TTL,
             *extra, str(self.experiment)],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1",
                 "COMMIT_TEST_LEDGER": str(self.ledger), **env})

    def run(self, *extra: str, **env: str) -> tuple[int, str]:
        return finish(self.start(*extra, **env))

    @property
    def output(self) -> Path:
        (found,) = (self.prefix / "commit").glob("write-*")
        return found

    def completions(self) -> list[str]:
        return self.ledger.read_text().split() if self.ledger.exists() else []

    def gc(self) -> tuple[int, str]:
        proc = subprocess.run([*marin_command(), "gc", "--prefix", str(self.prefix), "--yes",
                               "--older-than", "0s"], cwd=ROOT, capture_output=True,
                              text=True, timeout=120)
        return proc.returncode, proc.stdout + proc.stderr


def finish(proc: subprocess.Popen, timeout: float = 120) -> tuple[int, str]:
    out, _ = proc.communicate(timeout=timeout)
    return proc.returncode, out


def committed(run: Run, files: int = 6) -> dict[str, bytes]:
    """Check that the output is exactly one attempt's, under its SUCCESS; its files."""
    out = run.output
    status = json.loads((out / ".executor_status").read_text())
    assert status["status"] == "SUCCESS", status
    (own,) = [p.name for p in out.iterdir() if p.name.startswith("own-")]  # one attempt
    token = own.removeprefix("own-")
    names = {f"f{i:02d}" for i in range(files)} | {own, "sub", "checkpoints"}
    records = {".executor_status", ".executor_info", ".executor_lease", ".attempts"}
    top = {p.name for p in out.iterdir()}
    assert top - records == names, f"not exactly the attempt's names: {sorted(top)}"
    assert status["outputs"] == sorted(names)
    for name in names - {"sub", "checkpoints"}:
        assert (out / name).read_text() == token, f"{name} is another attempt's"
    assert [p.name for p in (out / "sub").iterdir()] == [f"x-{token}"]
    shared = out / "checkpoints"
    marker = json.loads((shared / "step_1.ref").read_text())
    entry = shared / "runs" / marker["run"] / "step_1" / "data"
    assert entry.read_text() == token, "the published checkpoint is another attempt's"
    assert (shared / ".published_by").read_text() == marker["run"]
    assert run.completions().count(token) == 1, "the committed attempt did not complete once"
    kept = [out / n for n in names - {"sub", "checkpoints"}] + [
        out / "sub" / f"x-{token}", shared / "step_1.ref", entry, out / ".executor_status"]
    return {str(p): p.read_bytes() for p in kept}


def lease_is_free(run: Run) -> bool:
    path = run.output / ".executor_lease"
    if not path.exists():
        return True
    record = LeaseRecord.decode(path.read_bytes())
    return record is None or record.takeover_reason() is not None


def check_gc_keeps(run: Run, kept: dict[str, bytes]) -> None:
    code, text = run.gc()
    assert code == 0, text
    assert {p: Path(p).read_bytes() for p in kept if Path(p).exists()} == kept, text


# A paused attempt whose function was already under way when it stopped may finish it into
# its own folder after it resumes (nothing can stop it; unless its writes fail, the folder
# removed by the commit of the executor that took over); it then finds its lease lost.
RUNS_ON_AFTER_PAUSE = {"running", "writes", "publish"}


@pytest.mark.parametrize("action", ["sigkill", "sigterm", "pause"])
@pytest.mark.parametrize("stage", STAGES)
def test_a_step_stopped_at_any_stage_ends_committed_exactly_once(tmp_path: Path, stage: str,
                                                                 action: str):
    run = Run(tmp_path)
    first = run.start(MARIN_FAULT=f"{stage}:{action}")
    if action == "pause":
        wait_stopped(first)
        try:
            code, text = run.run()  # takes the step over once the stopped one's ttl passed
            assert code == 0, text
        finally:
            first.send_signal(signal.SIGCONT)
        code, text = finish(first)
        assert code in (0, 1) and "Traceback" not in text, text
        lost = code == 1
        assert not lost or "taken over by another executor" in text, text
        expected = (1, 2) if stage in RUNS_ON_AFTER_PAUSE else (1,)
    else:
        code, text = finish(first)
        expected_code = -signal.SIGKILL if action == "sigkill" else 128 + signal.SIGTERM
        assert code == expected_code, text
        assert "Traceback" not in text, text
        code, text = run.run()
        assert code == 0, text
        expected = (1,)
    kept = committed(run)
    assert len(run.completions()) in expected, (run.completions(), text)
    assert lease_is_free(run)
    assert not (run.output / ".executor_commit").exists()
    check_gc_keeps(run, kept)


def test_a_forced_rerun_that_writes_fewer_files_leaves_only_its_own(tmp_path: Path):
    run = Run(tmp_path)
    code, text = run.run(COMMIT_TEST_FILES="20")
    assert code == 0, text
    code, text = run.run("--force-run", "commit/write", COMMIT_TEST_FILES="5")
    assert code == 0, text
    committed(run, files=5)
    assert len(run.completions()) == 2


@pytest.mark.parametrize("action", ["sigint", "sighup"])
def test_ctrl_c_and_hang_up_during_the_commit_let_it_finish(tmp_path: Path, action: str):
    run = Run(tmp_path)
    code, text = run.run(MARIN_FAULT=f"commit:{action}")
    assert code == 128 + {"sigint": signal.SIGINT, "sighup": signal.SIGHUP}[action], text
    code, text = run.run()
    assert code == 0, text
    committed(run)
    assert len(run.completions()) == 1


# The storage operation under the commit, on every backend: exact, and repeatable after a
# stop anywhere (here: an exception after the first name, as a kill would leave it).

OLD = {"a": b"old", "gone": b"old", "data/keep": b"old", "data/stale": b"old",
       "checkpoints/step.ref": b"shared", ".executor_status": b"record",
       ".attempts/r1/a": b"new"}
NEW = {"a": b"new", "data/keep": b"new", "data/more/deep": b"new", "z": b"new"}


@pytest.fixture(params=["file", "memory", "gs", "s3"])
def folder(request, tmp_path: Path) -> str:
    if request.param == "file":
        return str(tmp_path / "out")
    if request.param == "memory":
        return f"memory://commit-{tmp_path.name}/out"
    return request.getfixturevalue("gcs_bucket" if request.param == "gs" else
                                   "s3_bucket") + "/out"


def _put(storage, root: str, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        path = f"{root}/{name}"
        if "://" not in path:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        storage.write(path, data)


def _tree(storage, root: str) -> dict[str, bytes]:
    if root.startswith("memory://"):
        from marin.storage import _memory

        key = root.removeprefix("memory://") + "/"
        return {k[len(key):]: v[0] for k, v in _memory._STORE.items() if k.startswith(key)}
    found = {}
    for entry in storage.list_files(root):
        relative = entry.path[len(root) + 1:] if "://" in root else os.path.relpath(
            entry.path, root)
        found[relative] = storage.read(entry.path).data
    return found


class _Stop(Exception):
    pass


@pytest.mark.parametrize("stopped", [False, True])
def test_commit_tree_leaves_exactly_the_attempts_files_and_finishes_when_repeated(
        folder: str, stopped: bool):
    from marin.execution.commit import kept_in_output
    from marin.storage import get_storage

    storage = get_storage(folder)
    attempt = f"{folder}/.attempts/r2"
    _put(storage, folder, OLD)
    _put(storage, attempt, NEW)
    names = sorted({n.split("/", 1)[0] for n in NEW})

    def keep(name: str) -> bool:
        return kept_in_output(name, ("checkpoints",))

    if stopped:
        def stop(name: str) -> None:
            raise _Stop(name)

        with pytest.raises(_Stop):
            storage.commit_tree(attempt, folder, names, keep, after_each=stop)
    storage.commit_tree(attempt, folder, names, keep)
    outside = {k: v for k, v in _tree(storage, folder).items() if not k.startswith(".attempts/")}
    assert outside == {**NEW, "checkpoints/step.ref": b"shared", ".executor_status": b"record"}


def test_a_stopped_commit_whose_attempt_is_gone_is_undone_by_a_fresh_run(tmp_path: Path):
    run = Run(tmp_path)
    code, text = run.run(MARIN_FAULT="commit:sigkill")
    assert code == -signal.SIGKILL, text
    record = json.loads((run.output / ".executor_commit").read_text())
    shutil.rmtree(run.output / ".attempts" / record["run_id"])  # removed by hand, say
    code, text = run.run()
    assert code == 0, text
    committed(run)  # the fresh attempt's files only: the stopped commit's first name went
    assert len(run.completions()) == 2 and not (run.output / ".executor_commit").exists()


def test_a_forced_rerun_killed_during_its_commit_is_finished_with_only_its_files(
        tmp_path: Path):
    run = Run(tmp_path)
    code, text = run.run(COMMIT_TEST_FILES="20")
    assert code == 0, text
    code, text = run.run("--force-run", "commit/write", MARIN_FAULT="commit:sigkill",
                         COMMIT_TEST_FILES="5")
    assert code == -signal.SIGKILL, text
    code, text = run.run()  # finishes the forced attempt's commit; runs nothing
    assert code == 0 and "finished the commit of attempt" in text, text
    committed(run, files=5)
    assert len(run.completions()) == 2 and not (run.output / ".executor_commit").exists()


def test_the_commit_record_round_trips_and_refuses_what_it_cannot_read():
    from marin.execution.commit import CommitRecord
    from marin.execution.status import CorruptRecordError

    record = CommitRecord("r1", ("a", "b"), ("checkpoints",), "fp")
    assert CommitRecord.decode(record.encode()) == record
    assert record.outputs == ["a", "b", "checkpoints"]
    data = json.loads(record.encode())
    for bad in ({**data, "format": 2}, {**data, "names": ["a/b"]}, {**data, "run_id": ""},
                {k: v for k, v in data.items() if k != "names"}):
        with pytest.raises(CorruptRecordError):
            CommitRecord.decode(json.dumps(bad).encode())
    with pytest.raises(CorruptRecordError):
        CommitRecord.decode(b"\xff not json")


def test_gc_between_a_stopped_commit_and_the_rerun_keeps_the_attempt_it_commits(tmp_path: Path):
    run = Run(tmp_path)
    code, text = finish(run.start(MARIN_FAULT="commit:sigkill"))
    assert code == -signal.SIGKILL, text
    assert (run.output / ".executor_commit").exists()
    code, text = run.gc()
    assert code == 0, text
    code, text = run.run()
    assert code == 0, text
    committed(run)
    assert len(run.completions()) == 1, "gc took the attempt: the step ran again"
