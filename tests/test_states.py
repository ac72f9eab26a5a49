"""One vocabulary of step states: status files, outcomes, results and JSON agree."""

import json
from pathlib import Path

import pytest

from marin.execution import Executor, ExecutorStep, StepState, this_output_path
from marin.execution.compat import StepStatus
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
