"""Real runs with the local runner: skipping, failures, retries, concurrency bounds."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from marin.execution import (
    Executor,
    ExecutorStep,
    StepStatus,
    this_output_path,
)
from marin.execution.frontend.command_line import Style
from marin.execution.lease import Lease
from marin.execution.status import StatusRecord, lease_path, status_path
from marin.storage import StorageError, get_storage
from tests.helpers.steps import CALLS, Cfg, step, work


@pytest.fixture(autouse=True)
def _reset_calls():
    CALLS.clear()


def _status(node_path: str) -> StatusRecord:
    return StatusRecord.decode(Path(status_path(node_path)).read_bytes())


def test_runs_in_dependency_order_then_skips_everything(tmp_path: Path):
    a = step("a")
    b = step("b", a)
    c = step("c", a, b)
    ex = Executor(str(tmp_path), max_concurrent=2)
    result = ex.run([c])
    assert result.ok, result.summary()
    assert CALLS == ["a", "b", "c"]
    for entry in result.plan.entries:
        assert _status(entry.output_path).status is StepStatus.SUCCESS
        info = json.loads(Path(entry.output_path, ".executor_info").read_text())
        assert info["version"] == entry.node.version
        assert info["config"]["output_path"] == entry.output_path
        assert info["code_fingerprint"] and info["user"] and info["created"] > 0
    CALLS.clear()
    again = ex.run([c])
    assert again.ok and CALLS == []
    assert again.by_state() == {"skipped": 3}


def test_a_failure_records_its_traceback_blocks_dependents_and_spares_other_branches(
        tmp_path: Path):
    root = step("root")
    bad = step("bad", root, fail=True)
    after_bad = step("after_bad", bad)
    good = step("good", root)
    ex = Executor(str(tmp_path), max_concurrent=1)
    result = ex.run([after_bad, good])
    states = {s.name: s.state for s in result.steps}
    assert states == {"root": "succeeded", "bad": "failed", "after_bad": "blocked",
                      "good": "succeeded"}
    assert not result.ok
    assert "after_bad" not in CALLS
    bad_path = result.plan.entry_of(result.plan.graph.node_of(bad)).output_path
    record = _status(bad_path)
    assert record.status is StepStatus.FAILED
    assert "RuntimeError: step bad broke on purpose" in record.error
    assert "Traceback" in record.traceback and "work" in record.traceback
    summary = result.summary()
    assert "FAILED: bad-" in summary and "BLOCKED: after_bad-" in summary


def test_the_next_run_retries_failed_steps_unless_told_not_to(tmp_path: Path):
    bad = step("flaky", fail=True)
    ex = Executor(str(tmp_path))
    assert not ex.run([bad]).ok
    refused = ex.run([bad], force_run_failed=False)
    assert refused.by_state() == {"failed": 1} and CALLS == ["flaky"]
    assert "`force_run_failed` is false" in refused.steps[0].error  # the field, unspelled
    fixed = step("flaky", fail=False)  # same version: `fail` is unversioned
    retried = ex.run([fixed])
    assert retried.ok and CALLS == ["flaky", "flaky"]


def test_max_concurrent_bounds_the_steps_running_at_once(tmp_path: Path):
    """Each step waits at a barrier of 3: the run finishes only if 3 steps do run at once
    (a barrier that never fills breaks after its timeout and fails the step), and a 4th
    step started while 3 wait would raise the peak above 3."""
    running = 0
    peak = 0
    lock = threading.Lock()
    together = threading.Barrier(3)

    def gated(cfg: dict) -> None:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        together.wait(timeout=120)  # only a guard against a hang; never reached when correct
        with lock:
            running -= 1

    steps = [ExecutorStep(f"fan/{i}", gated, {"i": i}) for i in range(9)]
    result = Executor(str(tmp_path), max_concurrent=3).run(steps)
    assert result.ok, result.summary()
    assert peak == 3


def test_a_corrupt_status_is_rerun_with_a_warning_and_the_output_is_kept(tmp_path: Path,
                                                                          caplog):
    a = step("a")
    ex = Executor(str(tmp_path))
    entry = ex.run([a]).plan.entries[0]
    Path(status_path(entry.output_path)).write_text("{garbage")
    Path(entry.output_path, ".executor_info").write_text("not json either")
    plan = ex.plan([a])
    assert plan.entries[0].action == "run"
    assert "unreadable" in plan.entries[0].warnings[0]
    assert Path(entry.output_path, "out.txt").read_text() == "a"  # never deleted
    assert ex.run([a]).ok
    assert _status(entry.output_path).status is StepStatus.SUCCESS


def test_an_unwritable_prefix_fails_before_any_step_runs(tmp_path: Path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(StorageError, match="not writable"):
        Executor(str(blocker / "prefix")).run([step("a")])
    assert CALLS == []


def test_a_step_whose_lease_was_taken_over_never_writes_success(tmp_path: Path):
    storage = get_storage(str(tmp_path))
    ex = Executor(str(tmp_path), lease_ttl=30)
    victim = ExecutorStep("victim", lambda cfg: _steal_lease(output),
                          {"out": this_output_path()})
    output = ex.plan([victim]).entries[0].output_path
    result = ex.run([victim])
    assert result.steps[0].state == "lost_lease"
    assert not result.ok
    record = _status(result.plan.entries[0].output_path)
    assert record.status is StepStatus.RUNNING  # the thief owns the step now
    assert storage.read(lease_path(result.plan.entries[0].output_path)) is not None


def _steal_lease(output_path: str) -> None:
    path = lease_path(output_path)
    storage = get_storage(path)
    blob = storage.read(path)
    thief = Lease(storage, path, "thief", 30)
    assert storage.compare_and_swap(path, blob.token, thief._record()) is not None


def test_steps_declared_waiting_reuse_the_other_executors_result(tmp_path: Path):
    a = step("a")
    ex = Executor(str(tmp_path), lease_ttl=30, poll_interval=0.05)
    out = ex.plan([a]).entries[0].output_path
    other = Lease(get_storage(out), lease_path(out), "other", 30)
    assert other.try_acquire()
    get_storage(out).write(status_path(out), StatusRecord.now(StepStatus.RUNNING, "other",
                                                               "").encode())
    assert ex.plan([a]).entries[0].action == "wait"

    def finish_elsewhere() -> None:
        time.sleep(0.3)
        get_storage(out).write(status_path(out), StatusRecord.now(StepStatus.SUCCESS, "other",
                                                                   "").encode())
        other.release()

    threading.Thread(target=finish_elsewhere).start()
    result = ex.run([a])
    assert result.steps[0].state == "reused" and CALLS == []


def other_work(cfg: Cfg) -> None:
    work(cfg)
    CALLS.append("changed code")


def test_a_changed_code_fingerprint_is_reported_not_ignored(tmp_path: Path):
    ex = Executor(str(tmp_path))
    assert ex.run([step("a")]).ok
    edited = ExecutorStep("a", other_work, step("a").config)  # same name and config
    entry = ex.plan([edited]).entries[0]
    assert entry.action == "skip"
    assert "the code of other_work changed since this output was made" in entry.warnings[0]


def test_the_live_view_on_a_terminal_shows_counts(tmp_path: Path):
    import io

    from rich.console import Console

    from marin.execution.progress import LiveProgress, progress_for

    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, color_system=None, width=100)
    progress = progress_for(console)
    assert isinstance(progress, LiveProgress)
    result = Executor(str(tmp_path)).run([step("b", step("a")), step("c", fail=True)],
                                         progress=progress)
    assert not result.ok
    text = buffer.getvalue()
    assert "done 2" in text and "failed 1" in text and "pending 0" in text
    assert "FAILED c-" in text


def test_no_retry_failed_blocks_dependents_in_process(tmp_path: Path):
    boom = step("boom", fail=True)
    after = step("after", boom)
    ex = Executor(str(tmp_path))
    assert not ex.run([after]).ok
    refused = ex.run([after], force_run_failed=False)
    assert {s.name: s.state for s in refused.steps} == {"boom": "failed", "after": "blocked"}
    assert "--no-retry-failed" in Style.CLI.spell(refused.steps[0].error)
    assert "--force_run_failed is false" in Style.DRACCUS.spell(refused.steps[0].error)
    assert CALLS == ["boom"]
    assert not Path(refused.plan.entries[1].output_path, ".executor_status").exists()


def test_a_success_whose_output_is_missing_runs_again(tmp_path: Path):
    a = step("a")
    b = step("b", a)
    ex = Executor(str(tmp_path))
    assert ex.run([b]).ok
    a_out = ex.plan([b]).entries[0].output_path
    Path(a_out, "out.txt").unlink()
    entries = {e.name: e for e in ex.plan([b]).entries}
    assert entries["a"].action == "run"
    assert entries["a"].reason.startswith("output missing: out.txt")
    assert entries["b"].action == "skip"
    CALLS.clear()
    assert ex.run([b]).ok and CALLS == ["a"]
    assert Path(a_out, "out.txt").read_text() == "a"


def test_force_run_reruns_matching_steps_that_succeeded(tmp_path: Path):
    a, b = step("a"), step("b")
    ex = Executor(str(tmp_path))
    assert ex.run([a, b]).ok
    plan = ex.plan([a, b], force_run=["^b$"])
    assert [(e.name, e.action, Style.CLI.spell(e.reason)) for e in plan.entries] == [
        ("a", "skip", "already succeeded"), ("b", "run", "forced by --force-run")]
    CALLS.clear()
    assert ex.run([a, b], force_run=["^b$"]).ok and CALLS == ["b"]
    with pytest.raises(ValueError, match="`force_run`"):
        ex.plan([a, b], force_run=["nothing"])


def test_each_attempt_writes_in_its_own_folder_and_only_the_commit_reaches_the_output(
        tmp_path: Path):
    seen = []

    def write(cfg: dict) -> None:
        seen.append(cfg["out"])
        Path(cfg["out"]).mkdir(parents=True)
        Path(cfg["out"], "result.txt").write_text("done")

    s = ExecutorStep("attempted", write, {"out": this_output_path()})
    result = Executor(str(tmp_path)).run([s])
    output = Path(result.plan.entries[0].output_path)
    assert seen[0].startswith(f"{output}/.attempts/")
    assert sorted(p.name for p in output.iterdir()) == [
        ".executor_info", ".executor_status", "result.txt"]
    assert _status(str(output)).outputs == ["result.txt"]
    info = json.loads(Path(output, ".executor_info").read_text())
    assert info["config"]["out"] == str(output)  # the info names the committed path


@pytest.mark.parametrize("kwargs", [{"lease_ttl": float("nan")}, {"lease_ttl": float("inf")},
                                    {"lease_ttl": 0}, {"max_concurrent": 0},
                                    {"poll_interval": -1.0}])
def test_numeric_options_must_be_positive_and_finite(tmp_path: Path, kwargs):
    with pytest.raises(ValueError, match=f"{next(iter(kwargs))}`? must be"):
        Executor(str(tmp_path), **kwargs)


def test_step_identity_does_not_depend_on_how_its_module_was_loaded(tmp_path: Path,
                                                                    monkeypatch):
    import importlib.util
    import sys

    # As a script, the module's `executor_main` runs: make it a dry run under tmp_path.
    monkeypatch.setattr(sys, "argv", ["x", "--dry_run", "true", "--prefix", str(tmp_path)])
    from marin.execution.status import code_fingerprint, function_name
    from tests.conftest import ROOT

    path = ROOT / "experiments" / "hello_pipeline.py"
    loaded = []
    for name in ("__main__", "experiments.hello_pipeline"):
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        saved = sys.modules.get(name)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
            loaded.append((code_fingerprint(module.fit_zipf), function_name(module.fit_zipf)))
        finally:
            if saved is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = saved
    assert loaded[0][0] == loaded[1][0]
    assert loaded[1][1] == "experiments.hello_pipeline.fit_zipf"


def test_a_resumable_step_starts_from_the_unfinished_attempt_and_others_start_clean(
        tmp_path: Path):
    tries: list[list[str]] = []

    def checkpointing(cfg: dict) -> None:
        out = Path(cfg["out"])
        out.mkdir(parents=True, exist_ok=True)
        tries.append(sorted(p.name for p in out.iterdir()))
        (out / f"ckpt-{len(tries)}").write_text("state")
        if len(tries) == 1:
            raise RuntimeError("preempted")

    ex = Executor(str(tmp_path))
    for resumable, expected in ((True, [[], ["ckpt-1"]]), (False, [[], []])):
        tries.clear()
        s = ExecutorStep(f"resumable-{resumable}", checkpointing, {"out": this_output_path()},
                         resumable=resumable)
        assert not ex.run([s]).ok
        assert ex.run([s]).ok
        assert tries == expected
        output = Path(ex.plan([s]).entries[0].output_path)
        committed = sorted(p.name for p in output.iterdir() if p.name.startswith("ckpt"))
        assert committed == (["ckpt-1", "ckpt-2"] if resumable else ["ckpt-2"])


def _active_item(tmp_path: Path, run_id: str):
    from marin.execution.worker import StepJob, _Active
    out = str(tmp_path / "step-abc")
    storage = get_storage(out)
    job = StepJob(key="step-abc", name="step", output_path=out, fn=work, config=None, info={},
                  code_fingerprint="", run_id=run_id, lease_ttl=30, poll_interval=0.1)
    return _Active(job, Lease(storage, lease_path(out), run_id, 30), storage), storage, out


def test_after_an_interrupt_no_worker_can_take_a_lease_or_write_a_status(tmp_path: Path):
    """Workers are daemon threads that outlive Ctrl-C: a worker caught between taking its
    lease and writing RUNNING must not leave RUNNING behind once the run is cancelled."""
    from marin.execution.worker import ActiveSteps
    active = ActiveSteps()
    caught, storage, out = _active_item(tmp_path / "a", "run-1")
    assert active.acquire(caught)
    assert active.cancel_all("interrupted (Ctrl-C)") == ["step-abc"]
    assert not active.write_status(caught, StepStatus.RUNNING)
    record = StatusRecord.decode(storage.read(status_path(out)).data)
    assert record.status is StepStatus.CANCELLED and record.error == "interrupted (Ctrl-C)"
    assert storage.read(lease_path(out)) is None
    late, storage, out = _active_item(tmp_path / "b", "run-1")
    assert not active.acquire(late)
    assert storage.read(lease_path(out)) is None and storage.read(status_path(out)) is None


def test_ctrl_c_while_the_run_starts_reports_an_interrupted_run(tmp_path: Path):
    from marin.execution.progress import SilentProgress

    class InterruptedAtStart(SilentProgress):
        finished = False

        def invocation_started(self, plan, pending):
            raise KeyboardInterrupt  # as Ctrl-C lands while the run record is written

        def invocation_finished(self):
            self.finished = True

    progress = InterruptedAtStart()
    result = Executor(str(tmp_path)).run([step("a")], progress=progress)
    assert result.interrupted and not result.ok
    assert CALLS == [] and progress.finished
    assert not list(tmp_path.rglob(".executor_lease"))
    assert not list(tmp_path.rglob(".executor_status"))
