"""The invocation record: one type written by the executor and read by the dashboard and by
``marin gc``; records of the earlier format still read."""

from __future__ import annotations

import json
from pathlib import Path

from marin.dashboard.reader import PrefixReader
from marin.execution import Executor, RunResult
from marin.execution.gc import collect
from marin.execution.gc.scan import scan_prefix
from marin.execution.invocation_record import InvocationRecord, InvocationStep
from tests.helpers.steps import step


def _run_two_steps(prefix: Path) -> tuple[RunResult, Path, dict]:
    """Run ``a`` then ``b`` under ``prefix``: the result, its record's file and data."""
    result = Executor(str(prefix), max_concurrent=1).run([step("b", step("a"))],
                                                         experiment="exp.py")
    assert result.ok, result.summary()
    [path] = sorted((prefix / ".marin" / "invocations").glob("*.json"))
    return result, path, json.loads(path.read_text())


def test_the_written_record_reads_back_whole_in_the_dashboard_and_in_gc(tmp_path: Path):
    prefix = tmp_path / "p"
    result, path, data = _run_two_steps(prefix)
    record = InvocationRecord.from_json(data, path.name)
    assert record.error is None and record.problems == ()
    assert record.to_json() == data  # nothing written is lost on reading
    assert (record.format, record.experiment, record.id) == (3, "exp.py", path.stem)
    assert (record.script, record.name) == (None, "exp.py")  # named by code: no script
    keys = [e.node.key for e in result.plan.entries]
    assert [(s.key, s.dependencies, s.outcome) for s in record.steps] == [
        (keys[0], (), "succeeded"), (keys[1], (keys[0],), "succeeded")]
    assert record.counts == {"succeeded": 2} and record.ended >= record.started
    assert PrefixReader(str(prefix)).invocations() == [record]
    [seen] = scan_prefix(str(prefix)).invocations
    assert seen.record == record and seen.keys == set(keys)


def test_a_record_of_the_first_format_still_reads():
    # As the first format's writer wrote it when the run ended: no "nonblocking", no
    # "output_path" read back by the dashboard before, a step that was skipped.
    old = {"format": 1, "id": "20250101-120000-1a2b3c4d", "prefix": "/p", "experiment": "e.py",
           "argv": ["e.py"], "cwd": "/w", "user": "u", "host": "h", "pid": 7,
           "git_commit": None, "started": 1735732800.0, "ended": 1735732860.5,
           "steps": [{"key": "a-1234abcd", "name": "a", "output_path": "/p/a-1234abcd",
                      "dependencies": [], "action": "skip", "reason": "already succeeded",
                      "description": None, "status_at_plan": "SUCCESS",
                      "outcome": "skipped"},
                     {"key": "b-1234abcd", "name": "b", "output_path": "/p/b-1234abcd",
                      "dependencies": ["a-1234abcd"], "action": "run",
                      "reason": "no output yet", "description": "B",
                      "status_at_plan": None, "outcome": "succeeded", "seconds": 1.25,
                      "error": None}],
           "counts": {"skipped": 1, "succeeded": 1}}
    record = InvocationRecord.decode("20250101-120000-1a2b3c4d.json", json.dumps(old).encode())
    assert record.problems == () and record.error is None
    assert (record.format, record.experiment, record.duration) == (1, "e.py", 60.5)
    assert (record.script, record.name, record.complete) == (None, None, True)
    assert record.steps == (
        InvocationStep("a-1234abcd", "a", "/p/a-1234abcd", (), (), "skip",
                       "already succeeded", None, "SUCCESS", "skipped"),
        InvocationStep("b-1234abcd", "b", "/p/b-1234abcd", ("a-1234abcd",), (), "run",
                       "no output yet", "B", None, "succeeded", 1.25, None))


def test_gc_keeps_what_a_record_with_one_damaged_step_names(tmp_path: Path):
    prefix = tmp_path / "p"
    _, path, data = _run_two_steps(prefix)
    data["steps"].append({"key": "c-1234abcd"})  # a hand edit: a step with a key alone
    path.write_text(json.dumps(data))
    assert collect(scan_prefix(str(prefix)), keep=[], older_than=None) == []
    dashboard = PrefixReader(str(prefix)).invocations()[0]
    assert [s.key for s in dashboard.steps][-1] == "c-1234abcd"
