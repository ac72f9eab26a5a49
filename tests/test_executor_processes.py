"""Executors in separate processes: racing on one graph, killed mid-step, interrupted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.helpers.processes import marin_command

pytestmark = pytest.mark.slow

EXPERIMENT = "tests.fixtures.ledger_experiment"
LABELS = {"root", "left", "right", "far_left", "far_right", "join"}


def _start(prefix: Path, env: dict[str, str], *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [*marin_command(), "executor", "--prefix", str(prefix), *extra, EXPERIMENT],
        cwd=ROOT, env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)


def _ledger(path: Path) -> Counter:
    return Counter(line.split()[0] for line in path.read_text().splitlines())


def _statuses(prefix: Path) -> dict[str, str]:
    return {p.parent.name.rsplit("-", 1)[0]: json.loads(p.read_text())["status"]
            for p in prefix.glob("ledger/*/.executor_status")}


def _wait_for(path: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def test_two_executors_on_one_graph_run_each_step_once(tmp_path: Path):
    ledger = tmp_path / "ledger.txt"
    env = {"MARIN_TEST_LEDGER": str(ledger), "MARIN_TEST_SLEEP": "0.4"}
    procs = [_start(tmp_path / "prefix", env, "--lease-ttl", "5") for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, out + err
    assert _ledger(ledger) == Counter(dict.fromkeys(LABELS, 1))
    assert set(_statuses(tmp_path / "prefix").values()) == {"SUCCESS"}
    assert not list((tmp_path / "prefix").glob("ledger/*/.executor_lease"))


def test_a_killed_executors_step_is_taken_over_at_once(tmp_path: Path):
    prefix, ledger, started = tmp_path / "prefix", tmp_path / "ledger.txt", tmp_path / "started"
    victim = _start(prefix, {"MARIN_TEST_LEDGER": str(ledger), "MARIN_TEST_STARTED": str(started),
                             "MARIN_TEST_BLOCK_ON": "far_left",
                             "MARIN_TEST_RELEASE": str(tmp_path / "never")},
                    "--lease-ttl", "60")  # long: under load a short lease could lapse first
    _wait_for(started / "far_left")
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=30)
    assert _statuses(prefix)["far_left"] == "RUNNING"  # a dead executor leaves RUNNING behind
    survivor = _start(prefix, {"MARIN_TEST_LEDGER": str(ledger)}, "--lease-ttl", "5")
    out, err = survivor.communicate(timeout=120)
    assert survivor.returncode == 0, out + err
    # Same host and boot, the holder's pid is gone: taken over without waiting for the ttl.
    assert "took over at once the lease of" in out and "that process is gone" in out
    assert set(_statuses(prefix).values()) == {"SUCCESS"}
    assert _ledger(ledger)["far_left"] == 1 and _ledger(ledger)["join"] == 1


def test_ctrl_c_releases_leases_and_leaves_no_running_status(tmp_path: Path):
    prefix, ledger, started = tmp_path / "prefix", tmp_path / "ledger.txt", tmp_path / "started"
    env = {"MARIN_TEST_LEDGER": str(ledger), "MARIN_TEST_STARTED": str(started),
           "MARIN_TEST_BLOCK_ON": "far_left", "MARIN_TEST_RELEASE": str(tmp_path / "never")}
    proc = _start(prefix, env, "--lease-ttl", "60")
    _wait_for(started / "far_left")
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, out + err
    assert "interrupted" in out
    statuses = _statuses(prefix)
    assert statuses["far_left"] == "CANCELLED"
    assert "RUNNING" not in statuses.values()
    assert not list(prefix.glob("ledger/*/.executor_lease"))
    # The lease is gone, so a new run resumes at once despite the 60 s ttl.
    rerun = _start(prefix, {"MARIN_TEST_LEDGER": str(ledger)})
    out, err = rerun.communicate(timeout=60)
    assert rerun.returncode == 0, out + err
    assert set(_statuses(prefix).values()) == {"SUCCESS"}
