"""Gangs without JAX: a step with ``StepResources(hosts=N)`` runs as N real processes of this
machine under one lease; a member that fails fails the step naming it; Ctrl-C stops them."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

from marin.execution import Executor, ExecutorStep, StepResources, this_output_path
from marin.execution.processes import descendants
from marin.execution.status import StatusRecord, lease_path, status_path
from tests.conftest import ROOT
from tests.fixtures.gang_members import MemberConfig, give_up, record_place
from tests.helpers.processes import marin_command


def _gone(pid: int) -> bool:
    return not descendants([pid])  # neither running nor anything but a zombie


def test_every_member_runs_the_step_with_its_place_under_one_lease(tmp_path: Path):
    step = ExecutorStep("gang/places", record_place,
                        MemberConfig(output_path=this_output_path()),
                        resources=StepResources(hosts=3))
    result = Executor(str(tmp_path)).run([step])
    assert result.ok, result.summary()
    out = Path(result.steps[0].output_path)
    places = [json.loads((out / f"host-{rank}.json").read_text()) for rank in range(3)]
    assert [(p["rank"], p["hosts"]) for p in places] == [(0, 3), (1, 3), (2, 3)]
    assert len({p["coordinator"] for p in places}) == 1
    assert re.fullmatch(r"127\.0\.0\.1:\d+", places[0]["coordinator"])
    assert len({p["pid"] for p in places} | {os.getpid()}) == 4  # three processes of their own
    record = StatusRecord.decode(Path(status_path(str(out))).read_bytes())
    assert record.status == "succeeded" and record.pid == os.getpid()  # the supervisor's
    assert not Path(lease_path(str(out))).exists()


def test_a_member_that_raises_fails_the_step_in_one_line_naming_it(tmp_path: Path):
    pids = tmp_path / "pids"
    pids.mkdir()
    step = ExecutorStep("gang/gives-up", give_up, MemberConfig(
        output_path=this_output_path(), pids=str(pids), failing=1),
        resources=StepResources(hosts=2))
    result = Executor(str(tmp_path / "prefix")).run([step])
    error = result.steps[0].error
    assert result.steps[0].state == "failed"
    member = int((pids / "pid-1").read_text())
    assert error == (f"GangError: host 1 of 2 (pid {member} on this machine) failed: "
                     "ValueError: host 1 gives up; the gang's other hosts were stopped")
    assert _gone(int((pids / "pid-0").read_text()))  # the waiting member was stopped
    assert not Path(lease_path(result.steps[0].output_path)).exists()


def test_a_killed_first_member_fails_the_step_and_frees_its_lease(tmp_path: Path):
    pids = tmp_path / "pids"
    pids.mkdir()
    step = ExecutorStep("gang/killed", give_up, MemberConfig(
        output_path=this_output_path(), pids=str(pids), failing=0, kill=True),
        resources=StepResources(hosts=2))
    result = Executor(str(tmp_path / "prefix")).run([step])
    member = int((pids / "pid-0").read_text())
    assert result.steps[0].error == (f"GangError: host 0 of 2 (pid {member} on this machine) "
                                     "was killed by SIGKILL; the gang's other hosts were "
                                     "stopped")
    assert _gone(int((pids / "pid-1").read_text()))
    output = result.steps[0].output_path
    assert StatusRecord.decode(Path(status_path(output)).read_bytes()).status == "failed"
    assert not Path(lease_path(output)).exists()


def test_an_unpicklable_step_function_is_refused_in_one_line(tmp_path: Path):
    step = ExecutorStep("gang/lambda", lambda config: None,
                        MemberConfig(output_path=this_output_path()),
                        resources=StepResources(hosts=2))
    error = Executor(str(tmp_path)).run([step]).steps[0].error
    assert error.startswith("GangError: StepResources.hosts=2: the step's function and config "
                            "must be picklable to run in 2 processes (")
    assert error.endswith("); define the function at the top level of a module")


EXPERIMENT = '''
import os, time
from dataclasses import dataclass
from marin.execution import ExecutorStep, StepResources, this_output_path
from marin.execution.gang import GangMember


@dataclass(frozen=True)
class Config:
    output_path: str
    pids: str


def wait(config: Config) -> None:  # defined here: the members load this file to find it
    rank = GangMember.from_environment().rank
    with open(os.path.join(config.pids, f"pid-{rank}"), "w") as f:
        f.write(str(os.getpid()))
    time.sleep(120)


steps = [ExecutorStep("gang/waits", wait, Config(this_output_path(), PIDS),
                      resources=StepResources(hosts=2))]
'''


def test_ctrl_c_cancels_a_running_gang_and_ends_its_members(tmp_path: Path):
    pids = tmp_path / "pids"
    pids.mkdir()
    experiment = tmp_path / "waiting_gang.py"
    experiment.write_text(EXPERIMENT.replace("PIDS", repr(str(pids))))
    executor = subprocess.Popen([*marin_command(), "executor", "--prefix", str(tmp_path / "p"),
                                 str(experiment)], cwd=ROOT, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while len(os.listdir(pids)) < 2:
        assert executor.poll() is None, executor.communicate()
        assert time.monotonic() < deadline, "the gang's members never started"
        time.sleep(0.05)
    executor.send_signal(signal.SIGINT)
    out, err = executor.communicate(timeout=120)
    assert executor.returncode != 0, out + err
    members = [int((pids / f"pid-{rank}").read_text()) for rank in (0, 1)]
    assert all(_gone(pid) for pid in members), err[-2000:]
    [status] = (tmp_path / "p").glob("gang/waits-*/.executor_status")
    assert json.loads(status.read_text())["status"] == "CANCELLED"
    assert not list((tmp_path / "p").glob("gang/waits-*/.executor_lease"))
