"""Executors as real processes against faults: pauses past the lease, kills, signals, a step
that calls os._exit, one failure seen by two executors. Nothing here may end with a wrong
SUCCESS, a dangling lease, or a step run twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.helpers.processes import marin_command, wait_stopped

pytestmark = pytest.mark.slow

EXPERIMENT = "tests.fixtures.fault_experiment"


def _start(tmp_path: Path, *extra: str, ignoring: tuple[int, ...] = (), **env: str
           ) -> subprocess.Popen:
    return subprocess.Popen(
        [*marin_command(ignoring), "executor", "--prefix", str(tmp_path / "prefix"), *extra,
         EXPERIMENT],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "MARIN_TEST_DIR": str(tmp_path), **env})


def _finish(proc: subprocess.Popen, timeout: float = 120) -> tuple[int, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out + err


def _ledger(tmp_path: Path) -> Counter:
    path = tmp_path / "ledger.txt"
    return Counter(line.split()[0] for line in path.read_text().splitlines()) \
        if path.exists() else Counter()


def _output(tmp_path: Path, label: str) -> Path:
    (found,) = (tmp_path / "prefix" / "faults").glob(f"{label}-*")
    return found


def _status(tmp_path: Path, label: str) -> dict:
    return json.loads((_output(tmp_path, label) / ".executor_status").read_text())


def _files(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}


def _wait_for(path: Path, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, f"executor exited early: {proc.communicate()}"
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


def _pid_of_first(tmp_path: Path, other_than: int) -> int:
    (pid,) = {int(line.split()[1]) for line in (tmp_path / "ledger.txt").read_text().splitlines()
              if line.startswith("first ")} - {other_than}
    return pid


def _no_lease_left(tmp_path: Path) -> bool:
    return not list((tmp_path / "prefix").rglob(".executor_lease"))


def test_a_paused_executor_that_lost_its_lease_cannot_touch_the_committed_output(
        tmp_path: Path):
    # A ttl of 3 s renews every 0.3 s: a pause that lands inside a renewal (which holds the
    # folder's lock on local disk; see "Guarantees" in docs/executor.md) stays unlikely.
    paused = _start(tmp_path, "--lease-ttl", "3", MARIN_TEST_LINES="10",
                    MARIN_TEST_LINE_SLEEP="0.2")
    _wait_for(tmp_path / "started" / "first.3", paused)
    paused.send_signal(signal.SIGSTOP)
    try:
        code, text = _finish(_start(tmp_path, MARIN_TEST_LINES="10"))
        assert code == 0, text
    finally:
        paused.send_signal(signal.SIGCONT)
    code, text = _finish(paused)
    assert code == 1, text
    assert "taken over by another executor" in text, text
    first = _output(tmp_path, "first")
    status = _status(tmp_path, "first")
    assert status["status"] == "SUCCESS"
    expected = "".join(f"line {i} of {_pid_of_first(tmp_path, paused.pid)}\n" for i in range(10))
    assert (first / "lines.txt").read_text() == expected  # all of the committed attempt
    assert _files(first) == {"lines.txt", ".executor_status", ".executor_info"}
    assert _ledger(tmp_path)["second"] == 1 and _no_lease_left(tmp_path)


def test_a_killed_executors_lease_is_taken_over_at_once_and_its_files_stay_out(
        tmp_path: Path):
    victim = _start(tmp_path, "--lease-ttl", "600", MARIN_TEST_LINES="10",
                    MARIN_TEST_LINE_SLEEP="0.2")
    _wait_for(tmp_path / "started" / "first.2", victim)
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=30)
    dry = subprocess.run([sys.executable, "-m", "marin.cli", "executor", "--dry-run",
                          "--prefix", str(tmp_path / "prefix"), EXPERIMENT],
                         cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "MARIN_TEST_DIR": str(tmp_path)})
    assert "lease taken over from a dead pid" in dry.stdout, dry.stdout + dry.stderr
    assert "running in another executor" not in dry.stdout
    # With a 600 s ttl, finishing within the timeout means no wait for the lease to expire.
    code, text = _finish(_start(tmp_path, MARIN_TEST_LINES="10"), timeout=120)
    assert code == 0, text
    assert "that process is gone" in text
    first = _output(tmp_path, "first")
    assert _files(first) == {"lines.txt", ".executor_status", ".executor_info"}
    assert len((first / "lines.txt").read_text().splitlines()) == 10
    assert _ledger(tmp_path) == Counter({"first": 2, "second": 1})


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_term_and_hup_are_handled_like_ctrl_c(tmp_path: Path, signum: int):
    proc = _start(tmp_path, "--lease-ttl", "600", MARIN_TEST_HOLD="1")
    _wait_for(tmp_path / "started" / "first", proc)
    proc.send_signal(signum)
    code, text = _finish(proc, timeout=60)
    assert code == 128 + signum, text
    assert f"interrupted ({signal.Signals(signum).name})" in text
    assert _status(tmp_path, "first")["status"] == "CANCELLED"
    assert _no_lease_left(tmp_path)
    (tmp_path / "release").touch()
    code, text = _finish(_start(tmp_path), timeout=120)  # resumes at once despite the ttl
    assert code == 0, text


def test_a_run_started_under_nohup_keeps_running_when_its_terminal_hangs_up(tmp_path: Path):
    proc = _start(tmp_path, MARIN_TEST_HOLD="1", ignoring=(signal.SIGHUP,))
    _wait_for(tmp_path / "started" / "first", proc)
    proc.send_signal(signal.SIGHUP)
    (tmp_path / "release").touch()
    code, text = _finish(proc, timeout=120)
    assert code == 0, text
    assert "interrupted" not in text
    assert {_status(tmp_path, label)["status"] for label in ("first", "second")} == {"SUCCESS"}
    assert _no_lease_left(tmp_path)


def test_a_step_calling_os_exit_fails_the_run_instead_of_ending_it_with_0(tmp_path: Path):
    code, text = _finish(_start(tmp_path, MARIN_TEST_FIRST="exit"))
    assert code == 1, text
    status = _status(tmp_path, "first")
    assert status["status"] == "FAILED" and "os._exit(0)" in status["error"]
    assert _no_lease_left(tmp_path)
    assert _ledger(tmp_path)["second"] == 0 and "BLOCKED" in text


def test_a_failure_during_the_run_is_reported_by_every_executor_and_not_retried(
        tmp_path: Path):
    holder = _start(tmp_path, MARIN_TEST_FIRST="raise", MARIN_TEST_HOLD="1")
    _wait_for(tmp_path / "started" / "first", holder)
    waiter = _start(tmp_path, "--lease-ttl", "600", MARIN_TEST_FIRST="raise")
    line = ""
    while "running elsewhere" not in line:  # the waiter has planned: it saw RUNNING
        line = waiter.stdout.readline()
        assert line, waiter.communicate()
    (tmp_path / "release").touch()
    results = [_finish(holder), _finish(waiter)]
    for code, text in results:
        assert code == 1, text
        assert "first failed on purpose" in text
    assert _ledger(tmp_path) == Counter({"first": 1})


def test_no_retry_failed_blocks_dependents_and_names_the_flag_used(tmp_path: Path):
    code, text = _finish(_start(tmp_path, MARIN_TEST_FIRST="raise"))
    assert code == 1, text
    code, text = _finish(_start(tmp_path, "--no-retry-failed"))
    assert code == 1, text
    assert "--no-retry-failed" in text and "--force_run_failed" not in text
    assert _ledger(tmp_path) == Counter({"first": 1})
    assert not list((tmp_path / "prefix" / "faults").glob("second-*/.executor_status"))
    code, text = _finish(_start(tmp_path))  # fixed: the retry runs both
    assert code == 0, text
    assert _ledger(tmp_path) == Counter({"first": 2, "second": 1})


def test_an_executor_stopped_during_its_commit_reports_its_lease_lost(tmp_path: Path):
    files = {"MARIN_TEST_FILES": "3000"}  # a commit of many renames, to stop in the middle
    paused = _start(tmp_path, "--lease-ttl", "2", MARIN_TEST_STOP_AT_COMMIT="1", **files)
    try:
        wait_stopped(paused)
        assert (tmp_path / "stopping").exists()
        taker = _start(tmp_path, **files)
        code, text = _finish(taker)
        assert code == 0, text
    finally:
        paused.send_signal(signal.SIGCONT)
    code, text = _finish(paused)
    assert code == 1, text
    assert "lost_lease" in text.lower() or "LOST_LEASE" in text, text
    assert "taken over by another executor" in text, text
    assert "Traceback" not in text and "FileNotFoundError" not in text, text
    # The taker finished the paused attempt's commit from its record instead of running
    # the step again: every committed file is the paused attempt's.
    status = _status(tmp_path, "first")
    assert status["status"] == "SUCCESS" and status["pid"] == taker.pid
    assert _ledger(tmp_path)["first"] == 1
    first = _output(tmp_path, "first")
    assert {(first / f"f{i:05d}").read_text() for i in range(3000)} == {
        f"{i} of {paused.pid}\n" for i in range(3000)}
    assert _no_lease_left(tmp_path) and not (first / ".attempts").exists()
