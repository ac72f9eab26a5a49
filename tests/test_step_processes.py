"""Processes a step starts: a forked copy never writes a status, a lease or a commit, and
no child outlives its step's commit. Real processes throughout."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from marin.execution.lease import Lease
from marin.execution.processes import descendants, end_processes, leave_if_forked
from marin.storage import LocalStorage
from tests.conftest import ROOT
from tests.helpers.processes import marin_command

EXPERIMENT = "tests.fixtures.fork_experiment"
#: Ten steps, each leaving a process behind (the last one's child returns into the worker).
MODES = ["fork", "multiprocessing", "subprocess", "fork", "stubborn", "multiprocessing",
         "subprocess", "fork", "multiprocessing", "returns"]


def _in_child(body, *args) -> int:
    """Run ``body(*args)`` in a forked child; its exit status (``os._exit(3)`` when
    ``body`` returns into this code instead of leaving)."""
    pid = os.fork()
    if pid == 0:
        try:
            body(*args)
        finally:
            os._exit(3)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def test_a_forked_copy_leaves_at_once_and_the_owner_carries_on(tmp_path: Path):
    owner = os.getpid()
    after = tmp_path / "after"

    def child() -> None:
        leave_if_forked(owner, 7)
        after.touch()  # executor code a forked copy must never reach

    assert _in_child(child) == 7
    assert not after.exists()
    leave_if_forked(owner)  # in the owner: returns
    assert os.getpid() == owner


def test_a_forked_copy_can_neither_take_renew_nor_release_the_lease(tmp_path: Path):
    storage = LocalStorage()
    path = str(tmp_path / ".executor_lease")
    lease = Lease(storage, path, "run-1", ttl=60)
    assert lease.try_acquire()
    before = Path(path).read_bytes()

    def child() -> None:
        held = [lease.renew(), lease.confirm(), Lease(storage, path, "x", 60).try_acquire()]
        lease.release()
        os._exit(0 if held[:2] == [False, False] else 1)

    assert _in_child(child) == 0
    assert Path(path).read_bytes() == before  # neither renewed nor deleted by the copy
    assert lease.confirm()  # still the owner's
    lease.release()
    assert not Path(path).exists()


def test_processes_that_ignore_sigterm_are_killed_with_their_descendants():
    shell = subprocess.Popen(["sh", "-c", "trap '' TERM; sleep 60 & wait"])
    try:
        deadline = time.monotonic() + 10
        while len(descendants([shell.pid])) < 2:  # the shell and its sleep
            assert time.monotonic() < deadline, "the shell never started its sleep"
            time.sleep(0.01)
        found = descendants([shell.pid])
        assert shell.pid in found
        survivors = end_processes(found, grace=0.2)
        assert survivors == []
        assert shell.wait(timeout=10) == -signal.SIGKILL  # TERM ignored: killed
        assert descendants(found) == set()
    finally:
        if shell.poll() is None:
            shell.kill()


def _run_bounded(argv: list[str], env: dict[str, str], timeout: float = 120) -> tuple[int, str]:
    """Run ``argv`` in a session of its own; fail when its output pipe is still open after
    ``timeout`` seconds (held by a child that outlived the run), ending the session."""
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True, env={**os.environ, **env})
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"the pipe stayed open after the run: a child held it\n{out}")
    return proc.returncode, out


def _statuses(prefix: Path) -> dict[str, dict]:
    return {p.parent.name.rsplit("-", 1)[0]: json.loads(p.read_text())
            for p in prefix.glob("forks/*/.executor_status")}


@pytest.mark.slow
def test_children_left_by_ten_steps_are_ended_before_their_commit(tmp_path: Path):
    prefix = tmp_path / "prefix"
    command = [*marin_command(), "executor", "--max-concurrent", "3", "--prefix", str(prefix),
               EXPERIMENT]
    # Through a pipe, as `marin executor ... | cat`: cat ends only when every process
    # holding the pipe (a lingering child included) has closed it.
    code, out = _run_bounded(["sh", "-c", f"{shlex.join(command)} | cat"],
                             {"MARIN_TEST_DIR": str(tmp_path), "MARIN_TEST_MODES": ",".join(MODES)})
    assert code == 0, out
    assert "10 succeeded" in out, out
    pids = dict(line.split() for line in (tmp_path / "ledger.txt").read_text().splitlines())
    statuses = _statuses(prefix / "")
    assert len(statuses) == len(MODES)
    for label, status in statuses.items():
        label = label.removeprefix("forks/")
        assert status["status"] == "SUCCESS", (label, status)
        assert str(status["pid"]) == pids[label]  # written by the step's own process
        data = (next(prefix.glob(f"forks/{label}-*")) / "data.txt").read_text()
        expected = f"parent {pids[label]}\n"
        if label.endswith("returns"):
            child_lines = data.splitlines()[1:]
            assert child_lines[0].endswith("did its part")
            assert child_lines[1] == "child exit status 0"  # it left, not ran the worker on
            assert data.startswith(expected)
        else:
            assert data == expected, (label, data)  # nothing written after the commit
    assert list((tmp_path / "ran-on").iterdir()) == []  # no child outlived its commit
    assert not list(prefix.rglob(".executor_lease")) and not list(prefix.rglob(".attempts"))
    assert "ended 1 process" in out


def test_a_step_that_forks_is_recorded_by_its_own_process_only(tmp_path: Path):
    """The same in this process, through the Python API (no pipe): ten runs."""
    code = (
        "import os, sys\n"
        "from marin.execution import Executor\n"
        "from tests.fixtures.fork_experiment import steps\n"
        "result = Executor(sys.argv[1], max_concurrent=2).run(steps())\n"
        "print(os.getpid(), result.ok, flush=True)\n")
    for run in range(10):
        folder = tmp_path / f"run{run}"
        folder.mkdir()
        returncode, out = _run_bounded([sys.executable, "-c", code, str(folder / "p")],
                                       {"MARIN_TEST_DIR": str(folder), "MARIN_TEST_MODES": "fork"},
                                       timeout=60)
        assert returncode == 0, out
        pid, ok = out.split()[-2:]
        assert ok == "True"
        (status,) = _statuses(folder / "p").values()
        assert status["status"] == "SUCCESS" and str(status["pid"]) == pid


_REGISTERING = """
import json, signal, subprocess, threading
from marin.execution import processes
from marin.execution.processes import StepChildren

a = StepChildren.start()
own = subprocess.Popen(["sleep", "30"])  # A's own child, which A must end
b_started, b_tracker = [], []
b_forked, b_done = threading.Event(), threading.Event()

def step_b():
    b_tracker.append(StepChildren.start())
    b_started.append(subprocess.Popen(["sleep", "30"]))
    b_forked.set()
    b_done.wait(30)  # a step's thread lives on (Linux hands a dead thread's children on)

real, calls = processes._thread_children, []

def listing_with_b_in_between(tid):
    if tid == a.tid and not calls:
        calls.append(tid)
        threading.Thread(target=step_b, daemon=True).start()
        b_forked.wait(1.0)  # B may get in here only where nothing holds it out
    return real(tid)

processes._thread_children = listing_with_b_in_between
try:
    listed = sorted(a.started())
    forked = b_forked.wait(10)
    ended, survivors = a.end()
    print(json.dumps({"own": own.pid, "b": b_started[0].pid, "listed": listed,
                      "forked": forked, "called": calls == [a.tid], "ended": ended,
                      "survivors": survivors, "own_exit": own.wait(10),
                      "b_running": b_started[0].poll() is None}))
finally:
    b_done.set()
    for proc in [own, *b_started]:
        proc.kill()
        proc.wait()
    for tracker in b_tracker:
        tracker.end()
"""


def test_a_step_registering_while_another_lists_its_children_keeps_its_own():
    """Step A checks that it runs alone and lists the process's children; step B registers
    and starts a child in between. B's child must not be counted as A's (A would end it).
    In a process of its own, whose only children are the two steps'."""
    out = subprocess.run([sys.executable, "-c", _REGISTERING], cwd=ROOT, capture_output=True,
                         text=True, timeout=120, check=True).stdout
    found = json.loads(out)
    assert found["called"] and found["forked"]
    assert found["listed"] == [found["own"]]
    assert found["ended"] == [found["own"]] and found["survivors"] == []
    assert found["own_exit"] == -signal.SIGTERM
    assert found["b_running"]  # B's child still runs
