"""Dry runs: no side effects, the same decisions as a real run, and reasons for each."""

from __future__ import annotations

import time
from pathlib import Path

from marin.execution import ComputeEstimate, Executor, ExecutorStep, StepStatus, this_output_path
from marin.execution.frontend.command_line import Style
from marin.execution.lease import LeaseRecord
from marin.execution.status import StatusRecord, lease_path, status_path
from tests.conftest import snapshot
from tests.helpers.steps import CALLS, Cfg, step, work


def _prepare(tmp_path: Path) -> tuple[Executor, list[ExecutorStep]]:
    """A prefix with one done step, one failed step, one changed config."""
    ex = Executor(str(tmp_path / "prefix"))
    done = step("done")
    failed = step("failed", fail=True)
    old = ExecutorStep("tuned", work, Cfg("tuned-v1", this_output_path()))
    ex.run([done, failed, old])
    new = ExecutorStep("tuned", work, Cfg("tuned-v2", this_output_path()))
    fresh = step("fresh", done)
    return ex, [done, failed, new, fresh]


def test_dry_run_writes_nothing(tmp_path: Path):
    ex, steps = _prepare(tmp_path)
    before = snapshot(tmp_path)
    time.sleep(0.01)
    plan = ex.plan(steps)
    assert snapshot(tmp_path) == before
    assert plan.totals()["run"] == 3


def test_dry_run_on_a_missing_prefix_does_not_create_it(tmp_path: Path):
    Executor(str(tmp_path / "nowhere")).plan([step("a")])
    assert not (tmp_path / "nowhere").exists()


def test_each_step_says_why_it_would_run(tmp_path: Path):
    ex, steps = _prepare(tmp_path)
    entries = {e.name: e for e in ex.plan(steps).entries}
    assert (entries["done"].action, entries["done"].reason) == ("skip", "already succeeded")
    assert entries["failed"].action == "run"
    assert entries["failed"].reason.startswith("failed before: RuntimeError: step failed broke")
    assert entries["fresh"].reason == "no output yet"
    tuned = entries["tuned"]
    assert tuned.action == "run"
    assert [(c.path, c.old, c.new) for c in tuned.changed_fields] == [
        ("label", "tuned-v1", "tuned-v2")]
    assert tuned.reason.startswith("config changed since tuned-")
    assert tuned.previous_output and tuned.previous_output != tuned.output_path


def test_dry_run_decisions_match_what_the_real_run_does(tmp_path: Path):
    ex, steps = _prepare(tmp_path)
    plan = ex.plan(steps)
    CALLS.clear()
    result = ex.run(steps)
    ran = {s.name for s in result.steps if s.state in ("succeeded", "failed")}
    assert ran == {e.name for e in plan.entries if e.action == "run"}
    assert sorted(label.split("-")[0] for label in CALLS) == sorted(ran)


def test_running_elsewhere_waits_and_a_stale_lease_is_taken_over(tmp_path: Path):
    ex = Executor(str(tmp_path))
    live, dead = step("live"), step("dead")
    for s, renewed in ((live, time.time()), (dead, time.time() - 3600)):
        out = ex.plan([s]).entries[0].output_path
        Path(out).mkdir(parents=True)
        Path(status_path(out)).write_bytes(
            StatusRecord.now(StepStatus.RUNNING, "other-run", "").encode())
        Path(lease_path(out)).write_bytes(
            LeaseRecord("other-run", "elsewhere", 42, renewed, 60).encode())
    entries = {e.name: e for e in ex.plan([live, dead]).entries}
    assert entries["live"].action == "wait"
    assert "running in another executor: other-run on elsewhere (pid 42)" in \
        entries["live"].reason
    assert entries["dead"].action == "run"
    assert "stale" in entries["dead"].reason and "taking over" in entries["dead"].reason


def test_totals_sum_declared_compute_of_steps_to_run(tmp_path: Path):
    steps = [ExecutorStep(f"train/{i}", work, Cfg(str(i), "x"),
                          estimate=ComputeEstimate(flops=1e18 * (i + 1), device_hours=2.0))
             for i in range(3)]
    totals = Executor(str(tmp_path)).plan(steps).totals()
    assert totals["estimated_flops"] == 6e18
    assert totals["estimated_device_hours"] == 6.0


def test_run_only_selects_matching_steps_and_their_dependencies(tmp_path: Path):
    a = step("a")
    b = step("b", a)
    c = step("c", a)
    plan = Executor(str(tmp_path)).plan([b, c], run_only=["^b$"])
    actions = {e.name: (e.action, Style.CLI.spell(e.reason)) for e in plan.entries}
    assert actions["a"][0] == "run" and actions["b"][0] == "run"
    assert actions["c"] == ("skip", "not selected by --run-only")
