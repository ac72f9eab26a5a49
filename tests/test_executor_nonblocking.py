"""Nonblocking dependencies with the real executor: an evaluation that reads the checkpoints
a training step publishes while it still runs, sequenced by files, never by sleeps."""

from __future__ import annotations

import io
import json
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from rich.console import Console

from marin.dashboard.reader import PrefixReader
from marin.execution import (
    Executor,
    ExecutorStep,
    InputName,
    StepGraph,
    StepState,
    output_path_of,
    this_output_path,
)
from marin.execution.frontend.render import print_plan
from marin.execution.gc import collect
from marin.execution.gc.scan import scan_prefix
from marin.execution.graph import StepGraphError, StepOrder
from marin.execution.overrides import apply_overrides
from marin.execution.shared import SharedFolder
from marin.execution.status import StatusRecord, status_path

_DEADLINE = 120.0  # seconds a step waits for the other's file before the test fails


def _wait_for(path: Path, what: str) -> None:
    """Return once ``path`` exists; a missing file past the deadline is the test's failure
    (the two steps did not run side by side), not a hang."""
    deadline = time.monotonic() + _DEADLINE
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: {path} never appeared")
        time.sleep(0.01)


@dataclass(frozen=True)
class TrainConfig:
    output_path: str
    evaluated: str
    """A file the evaluation writes once it has read the checkpoint."""
    wait_for_eval: bool = True
    fail_after_publish: bool = False


def train(config: TrainConfig) -> None:
    shared = SharedFolder.of(f"{config.output_path}/checkpoints")
    assert shared is not None
    entry = Path(shared.own, "step_1")
    entry.mkdir(parents=True)
    (entry / "weights.txt").write_text("weights at step 1")
    assert shared.publish("step_1", {})
    if config.wait_for_eval:  # still running while the evaluation reads
        _wait_for(Path(config.evaluated), "train waits for the evaluation")
    if config.fail_after_publish:
        raise RuntimeError("training broke after its first checkpoint")
    Path(config.output_path).mkdir(parents=True, exist_ok=True)
    Path(config.output_path, "final.txt").write_text("done")


@dataclass(frozen=True)
class EvalConfig:
    checkpoints: str
    train_output: str
    output_path: str
    evaluated: str


def evaluate(config: EvalConfig) -> None:
    _wait_for(Path(config.checkpoints, "step_1.ref"), "the evaluation waits for a checkpoint")
    run = json.loads(Path(config.checkpoints, "step_1.ref").read_text())["run"]
    weights = Path(config.checkpoints, "runs", run, "step_1", "weights.txt").read_text()
    train_state = StatusRecord.decode(Path(status_path(config.train_output)).read_bytes())
    Path(config.output_path).mkdir(parents=True, exist_ok=True)
    Path(config.output_path, "seen.json").write_text(json.dumps(
        {"weights": weights, "train_status": train_state.status.value}))
    Path(config.evaluated).write_text("read")


def _pipeline(tmp_path: Path, blocking: bool = False, **train_options) -> tuple[
        ExecutorStep, ExecutorStep]:
    evaluated = str(tmp_path / "evaluated")
    trainer = ExecutorStep("train", train, TrainConfig(this_output_path(), evaluated,
                                                       **train_options))
    if blocking:
        inputs = dict(checkpoints=output_path_of(trainer, "checkpoints"),
                      train_output=output_path_of(trainer))
    else:  # both spellings: ours and Marin's
        inputs = dict(checkpoints=output_path_of(trainer, "checkpoints", blocking=False),
                      train_output=InputName(trainer).nonblocking())
    evaluator = ExecutorStep("eval", evaluate, EvalConfig(
        output_path=this_output_path(), evaluated=evaluated, **inputs))
    return trainer, evaluator


def _seen(result, name: str) -> dict:
    [entry] = [e for e in result.plan.entries if e.name == name]
    return json.loads(Path(entry.output_path, "seen.json").read_text())


def test_a_nonblocking_dependent_reads_what_the_running_dependency_publishes(tmp_path: Path):
    _, evaluator = _pipeline(tmp_path)
    # Only the evaluation is listed: the training step is scheduled because it names it.
    result = Executor(str(tmp_path / "p"), max_concurrent=2).run([evaluator])
    assert result.ok, result.summary()
    assert {s.name: s.state for s in result.steps} == {"train": StepState.SUCCEEDED,
                                                       "eval": StepState.SUCCEEDED}
    assert _seen(result, "eval") == {"weights": "weights at step 1",
                                     "train_status": StepState.RUNNING.value}
    info = json.loads(Path(result.plan.entries[-1].output_path, ".executor_info").read_text())
    assert info["nonblocking_dependencies"] == [result.plan.entries[0].output_path]


def test_a_blocking_dependency_is_still_waited_for(tmp_path: Path):
    _, evaluator = _pipeline(tmp_path, blocking=True, wait_for_eval=False)
    result = Executor(str(tmp_path / "p"), max_concurrent=2).run([evaluator])
    assert result.ok, result.summary()
    assert [s.name for s in result.steps] == ["train", "eval"]
    assert _seen(result, "eval") == {"weights": "weights at step 1",
                                     "train_status": StepState.SUCCEEDED.value}


def test_nonblocking_hashes_and_resolves_as_blocking(tmp_path: Path):
    _, waiting = _pipeline(tmp_path, blocking=True)
    _, not_waiting = _pipeline(tmp_path)
    g_wait, g_not = StepGraph.build([waiting], "/p"), StepGraph.build([not_waiting], "/p")
    n_wait, n_not = g_wait.node_of(waiting), g_not.node_of(not_waiting)
    assert n_wait.key == n_not.key
    assert g_wait.resolve_config(n_wait) == g_not.resolve_config(n_not)
    assert [d.key for d in n_wait.dependencies] == [d.key for d in n_not.dependencies]
    assert n_wait.nonblocking == frozenset() and n_not.nonblocking == set(n_not.dependencies)


def test_one_blocking_reference_makes_the_edge_blocking():
    def noop(config):
        return None

    data = ExecutorStep("data", noop, {"out": this_output_path()})
    both = ExecutorStep("both", noop, {"a": output_path_of(data, "x", blocking=False),
                                       "b": output_path_of(data, "y")})
    assert StepGraph.build([both], "/p").node_of(both).nonblocking == frozenset()


def test_a_dependency_that_fails_after_starting_does_not_stop_its_reader(tmp_path: Path):
    _, evaluator = _pipeline(tmp_path, fail_after_publish=True)
    result = Executor(str(tmp_path / "p"), max_concurrent=2).run([evaluator])
    assert {s.name: s.state for s in result.steps} == {"train": StepState.FAILED,
                                                       "eval": StepState.SUCCEEDED}
    assert _seen(result, "eval")["weights"] == "weights at step 1"


def test_a_dependency_that_never_starts_blocks_its_nonblocking_dependent(tmp_path: Path):
    def broken(config):
        raise RuntimeError("no data")

    upstream = ExecutorStep("data", broken, {"out": this_output_path()})
    evaluated = str(tmp_path / "evaluated")
    trainer = ExecutorStep("train", train, {"c": TrainConfig(this_output_path(), evaluated),
                                            "data": output_path_of(upstream)})
    evaluator = ExecutorStep("eval", evaluate, EvalConfig(
        output_path_of(trainer, "checkpoints", blocking=False),
        output_path_of(trainer, blocking=False), this_output_path(), evaluated))
    result = Executor(str(tmp_path / "p"), max_concurrent=2).run([evaluator])
    states = {s.name: (s.state, s.error) for s in result.steps}
    assert states["data"][0] is StepState.FAILED
    assert states["train"][0] is StepState.BLOCKED
    assert states["eval"][0] is StepState.BLOCKED and "data-" in states["eval"][1]


def test_a_cycle_through_a_nonblocking_edge_is_refused():
    def noop(config):
        return None

    config_a: dict = {}
    a = ExecutorStep("a", noop, config_a)
    b = ExecutorStep("b", noop, {"in": output_path_of(a, blocking=False)})
    config_a["in"] = output_path_of(b)
    with pytest.raises(StepGraphError, match="cycle: a -> b -> a"):
        StepGraph.build([a], "/p")


def test_the_dry_run_shows_the_edge_and_an_override_keeps_it(tmp_path: Path):
    _, evaluator = _pipeline(tmp_path)
    executor = Executor(str(tmp_path / "p"))
    walked = apply_overrides(StepOrder.of([evaluator]), {"train.wait_for_eval": "false"})
    plan = executor.plan(StepGraph.from_order(walked, executor.prefix))
    train_key = plan.entries[0].node.key
    assert plan.entries[0].node.step.config.wait_for_eval is False
    steps = plan.to_json()["steps"]
    assert [s["nonblocking_dependencies"] for s in steps] == [[], [train_key]]
    assert steps[1]["dependencies"] == [train_key]
    out = io.StringIO()
    print_plan(plan, Console(file=out, width=300))
    assert f"reads {train_key} without waiting: starts once it has started" in out.getvalue()
    assert not (tmp_path / "p").exists()  # a dry run writes nothing


def test_gc_and_the_dashboard_count_a_nonblocking_dependency(tmp_path: Path):
    _, evaluator = _pipeline(tmp_path)
    prefix = str(tmp_path / "p")
    result = Executor(prefix, max_concurrent=2).run([evaluator])
    assert result.ok, result.summary()
    train_key, eval_key = (e.node.key for e in result.plan.entries)
    assert [c.output for c in collect(scan_prefix(prefix), keep=[], older_than=None)
            if c.kind == "output"] == []
    reader = PrefixReader(prefix)
    [invocation] = reader.invocations()
    planned = {s.key: s for s in invocation.steps}
    assert planned[eval_key].dependencies == planned[eval_key].nonblocking == (train_key,)
    for plan in (planned, None):  # from the invocation record, and from the info files
        states = {s.key: s for s in reader.step_states([train_key, eval_key], plan)}
        assert states[eval_key].dependencies == [train_key]


@dataclass(frozen=True)
class StartConfig:
    output_path: str
    log: str
    """A file each step appends its name to as it starts."""
    name: str
    parent: str | None = None


def log_start(config: StartConfig) -> None:
    with open(config.log, "a") as f:
        f.write(config.name + "\n")
    Path(config.output_path).mkdir(parents=True, exist_ok=True)


def test_steps_that_wait_for_a_start_are_submitted_after_the_steps_ready_beside_it(
        tmp_path: Path):
    # Two parents ready together, each with a nonblocking dependent: one runner slot runs
    # both parents before either dependent, so a dependent waiting inside its step never
    # holds the slot a ready parent needs.
    log = str(tmp_path / "started.txt")
    parents = [ExecutorStep(f"stable/{n}", log_start, StartConfig(this_output_path(), log, n))
               for n in ("a", "b")]
    children = [ExecutorStep(f"branch/{p.name[-1]}", log_start, StartConfig(
        this_output_path(), log, f"branch-{p.name[-1]}", output_path_of(p, blocking=False)))
        for p in parents]
    result = Executor(str(tmp_path / "p"), max_concurrent=1).run(children)
    assert result.ok, result.summary()
    assert Path(log).read_text().split() == ["a", "b", "branch-a", "branch-b"]
