"""One vocabulary of step states: status files, outcomes, results and JSON agree."""

import json
from pathlib import Path

import pytest

from marin.execution import Executor, ExecutorStep, StepState, StepStatus, this_output_path
from marin.execution.status import CorruptRecordError, StatusRecord, status_path


def test_status_files_keep_their_spelling_and_old_files_still_read():
    # A status file exactly as earlier versions wrote it.
    for text, state in [("SUCCESS", StepState.SUCCEEDED), ("FAILED", StepState.FAILED),
                        ("RUNNING", StepState.RUNNING), ("CANCELLED", StepState.CANCELLED)]:
        raw = json.dumps({"status": text, "run_id": "r", "time": 1.0}).encode()
        record = StatusRecord.decode(raw)
        assert record.status is state
        assert json.loads(record.encode())["status"] == text


@pytest.mark.parametrize("text", ["succeeded", "BLOCKED", "reused", "", "Success"])
def test_a_status_no_executor_writes_is_a_corrupt_record(text: str):
    with pytest.raises(CorruptRecordError, match="unknown status"):
        StatusRecord.decode(json.dumps({"status": text}).encode())


def test_states_never_stored_cannot_be_written():
    for state in (StepState.REUSED, StepState.SKIPPED, StepState.LOST_LEASE, StepState.BLOCKED):
        with pytest.raises(ValueError, match="never written"):
            StatusRecord(state).encode()


def test_predicates_partition_the_final_states():
    final = [s for s in StepState if s.is_final]
    assert StepState.RUNNING not in final
    for state in final:
        # done, failure, or skipped: exactly one
        assert [state.is_done, state.is_failure, state is StepState.SKIPPED].count(True) == 1
    assert StepStatus.SUCCESS is StepState.SUCCEEDED


def _fail(config):
    raise RuntimeError("broken")


def _write(config):
    Path(config["output"]).mkdir(parents=True, exist_ok=True)
    (Path(config["output"]) / "x").write_text("x")


def test_result_json_spells_states_by_their_values(tmp_path: Path):
    ok = ExecutorStep("ok", _write, {"output": this_output_path()})
    bad = ExecutorStep("bad", _fail, {"output": this_output_path()})
    after = ExecutorStep("after", _write, {"output": this_output_path(), "dep": bad})
    ex = Executor(str(tmp_path), max_concurrent=1)
    result = ex.run([ok, bad, after])
    data = json.loads(json.dumps(result.to_json()))
    assert {s["name"]: s["state"] for s in data["steps"]} == {
        "ok": "succeeded", "bad": "failed", "after": "blocked"}
    assert data["counts"] == {"succeeded": 1, "failed": 1, "blocked": 1}
    assert [s.name for s in result.failed] == ["bad", "after"]
    plan = json.loads(json.dumps(ex.plan([ok, bad]).to_json()))
    assert {s["name"]: s["status"] for s in plan["steps"]} == {"ok": "succeeded",
                                                                "bad": "failed"}
    ok_path = next(s.output_path for s in result.steps if s.name == "ok")
    on_disk = json.loads(Path(status_path(ok_path)).read_text())
    assert on_disk["status"] == "SUCCESS"


def test_the_result_and_the_invocation_record_tell_one_outcome_per_step(tmp_path: Path):
    from marin.execution.invocation_record import InvocationRecord

    ok = ExecutorStep("ok", _write, {"output": this_output_path()})
    bad = ExecutorStep("bad", _fail, {"output": this_output_path()})
    after = ExecutorStep("after", _write, {"output": this_output_path(), "dep": bad})
    result = Executor(str(tmp_path), max_concurrent=1).run([ok, bad, after], experiment="e")
    [path] = (tmp_path / ".marin" / "invocations").glob("*.json")
    record = InvocationRecord.decode(path.name, path.read_bytes())
    told = {s.key: (s.outcome, s.seconds, s.error) for s in record.steps}
    assert told == {s.key: (s.state.value, round(s.seconds, 3), s.error) for s in result.steps}
    assert {s.name: s.state for s in result.steps} == {
        "ok": StepState.SUCCEEDED, "bad": StepState.FAILED, "after": StepState.BLOCKED}
    bad_result = next(s for s in result.steps if s.name == "bad")
    assert "broken" in bad_result.error and "RuntimeError" in bad_result.traceback
    assert bad_result.output_path == str(tmp_path / bad_result.key)


def test_the_dashboard_shows_each_stored_state_by_its_stored_spelling(tmp_path: Path):
    from marin.dashboard.records import ViewState, status_fields

    for state in (StepState.RUNNING, StepState.SUCCEEDED, StepState.FAILED,
                  StepState.CANCELLED):
        raw = StatusRecord(state, run_id="r1", time=5.0, host="h", error="e").encode()
        fields = status_fields("/p/a-1234abcd", raw)
        assert fields["state"] is ViewState.of(state)
        assert fields["state"] == json.loads(raw)["status"]  # the page shows the file's word
        assert (fields["updated"], fields["host"], fields["run_id"]) == (5.0, "h", "r1")
        assert fields["error"] == ("e" if state in (StepState.FAILED, StepState.CANCELLED)
                                   else None)
    assert {v.value for v in ViewState} == {"SUCCESS", "FAILED", "RUNNING", "CANCELLED",
                                            "STOPPED", "PENDING", "CORRUPT"}
    assert status_fields("/p/a-1234abcd", None) == {"state": ViewState.PENDING}


@pytest.mark.parametrize("raw", [b"{not json", b"[1]", b'{"status": "succeeded"}',
                                 b"[" * 100_000 + b"]" * 100_000])
def test_a_status_the_executor_cannot_read_is_corrupt_on_the_dashboard(raw: bytes):
    from marin.dashboard.records import ViewState, status_fields

    with pytest.raises(CorruptRecordError):
        StatusRecord.decode(raw)
    fields = status_fields("/p/a-1234abcd", raw)
    assert fields["state"] is ViewState.CORRUPT
    assert fields["error"].startswith("/p/a-1234abcd/.executor_status is unreadable")
