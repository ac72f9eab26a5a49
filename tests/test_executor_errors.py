"""A failed step's error, as the run result and its status record give it: one line, with
the exception's type and every line of its message."""

from __future__ import annotations

from pathlib import Path

from marin.execution import Executor, ExecutorStep, StepState, this_output_path
from marin.execution.status import StatusRecord, status_path


def _fails_with_a_report(config: dict) -> None:
    raise ValueError("2 validation errors for TrainConfig\nlearning_rate\n  must be > 0\n")


def _fails_silently(config: dict) -> None:
    raise KeyError()


def test_a_failed_step_keeps_every_line_of_its_message_on_one_line(tmp_path: Path):
    report = ExecutorStep("report", _fails_with_a_report, {"out": this_output_path()})
    silent = ExecutorStep("silent", _fails_silently, {"out": this_output_path()})
    result = Executor(str(tmp_path), max_concurrent=1).run([report, silent])
    errors = {s.name: s.error for s in result.steps if s.state is StepState.FAILED}
    assert errors == {
        "report": "ValueError: 2 validation errors for TrainConfig learning_rate must be > 0",
        "silent": "KeyError"}
    for entry in result.plan.entries:
        status = StatusRecord.decode(Path(status_path(entry.output_path)).read_bytes())
        assert status.error == errors[entry.name] and "Traceback" in status.traceback
