"""Multi-host training: a step with ``StepResources(hosts=2)`` trains as two real processes
(``jax.distributed`` on gloo) with the local runner, and as two Ray tasks on a 2-node Ray
cluster, against one process with the same global batch; a host killed with SIGKILL; the
2-process checkpoint resumed in 2 processes and in 1. The runs are made once per module
and read by several tests."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import time
from pathlib import Path
from typing import NamedTuple

import pytest

from marin.execution import Executor, ExecutorStep, RunResult, StepResources, this_output_path
from marin.execution.status import StatusRecord, lease_path, status_path
from marin.execution.step import StepDefinitionError
from marin.training import TrainLmConfig, train_lm
from tests import servers
from tests.conftest import ROOT
from tests.fixtures.gang_training import KILL_AFTER, WatchedTraining, watched_train
from tests.helpers.training import tiny_config

pytestmark = pytest.mark.slow

STEPS, BATCH = 8, 8


def training(cache: Path) -> TrainLmConfig:
    # one compilation cache for every rank and run, beside the (read-only) token cache
    compiled = str(cache.parent / "jax-compilation")
    config = tiny_config(cache, Path("unused"), train_steps=STEPS, batch_size=BATCH,
                         eval_every=0, checkpoint_every=KILL_AFTER, compute_dtype="float32",
                         compilation_cache=compiled)
    return dataclasses.replace(config, output_path=this_output_path())


def gang_step(cache: Path, witness: Path, hosts: int, placement: str = "pack",
              microbatch_size: int | None = None) -> ExecutorStep:
    """The step every run here shares: hosts, placement and micro-batch change no key."""
    witness.mkdir(exist_ok=True)
    train = dataclasses.replace(training(cache), microbatch_size=microbatch_size)
    return ExecutorStep("train/gang", watched_train, WatchedTraining(train, str(witness)),
                        resources=StepResources(hosts=hosts, placement=placement),
                        resumable=True)


def losses(run: Path) -> dict[int, float]:
    return {r["step"]: r["train/loss"] for r in map(json.loads, (run / "metrics.jsonl").open())
            if "train/loss" in r}


def reads(witness: Path, host: int) -> list[dict]:
    return [json.loads(line) for line in (witness / f"host-{host}.jsonl").open()]


@pytest.fixture(scope="module")
def reference(cache: Path, tmp_path_factory) -> dict[int, float]:
    """One process, one device, the same global batch."""
    out = tmp_path_factory.mktemp("one-process")
    train_lm(dataclasses.replace(training(cache), output_path=str(out)))
    return losses(out)


class Runs(NamedTuple):
    root: Path
    killed: RunResult
    killed_status: StatusRecord
    lease_left: bool
    resumed: RunResult
    resumed_alone: RunResult


@pytest.fixture(scope="module")
def runs(cache: Path, tmp_path_factory) -> Runs:
    """A 2-process run whose host 1 is killed after the step-4 checkpoint; the same step run
    again in 2 processes, and, from a copy of the prefix as the kill left it, in 1, both
    with gradient accumulation (the micro-batch, like the hosts, is where and how)."""
    root = tmp_path_factory.mktemp("gang")
    (root / "killed").mkdir()
    (root / "killed" / "kill-host-1").touch()
    killed = Executor(str(root / "prefix")).run([gang_step(cache, root / "killed", 2)])
    output = killed.steps[0].output_path
    status = StatusRecord.decode(Path(status_path(output)).read_bytes())
    lease_left = Path(lease_path(output)).exists()
    shutil.copytree(root / "prefix", root / "prefix-copy")
    # the resumed runs accumulate gradients too: 2 micro-steps of 2 sequences per device
    resumed = Executor(str(root / "prefix")).run([gang_step(cache, root / "resumed", 2,
                                                            microbatch_size=2)])
    alone = Executor(str(root / "prefix-copy")).run([gang_step(cache, root / "alone", 1,
                                                               microbatch_size=2)])
    return Runs(root, killed, status, lease_left, resumed, alone)


def test_two_processes_train_as_one_with_the_same_global_batch(reference, runs: Runs, cache):
    from marin.processing.tokenize.loader import DataLoader

    # the first 4 steps ran in the killed 2-process run, the next 4 in the resumed one
    out = Path(runs.resumed.steps[0].output_path)
    assert losses(out) == pytest.approx(reference, rel=1e-5)
    assert sorted(losses(out)) == list(range(1, STEPS + 1))
    whole = DataLoader(None, BATCH)  # the positions of one process reading whole batches
    for host in (0, 1):
        seen = reads(runs.root / "killed", host)
        assert {(r["index"], r["count"]) for r in seen} == {(host, 2)}
        assert [r["step"] for r in seen[:KILL_AFTER]] == list(range(KILL_AFTER))
        for r in seen:  # each host read its own half of every global batch, nothing else
            half = whole.positions(r["step"]).tolist()[host * 4:(host + 1) * 4]
            assert r["positions"] == half


def test_a_host_killed_mid_run_fails_the_step_in_one_line_and_frees_its_lease(runs: Runs):
    step = runs.killed.steps[0]
    assert step.state == "failed"
    assert "\n" not in step.error
    assert step.error.startswith("GangError: host 1 of 2 (pid ")
    assert "was killed by SIGKILL; the gang's other hosts were stopped" in step.error
    record = runs.killed_status
    assert record.status == "failed" and record.error == step.error
    assert not runs.lease_left
    killed_at = float((runs.root / "killed" / "killed").read_text())
    # The bound on detecting a dead host (not a speed measure): the supervisor
    # sees the exit at once; jax's heartbeat (30 s) bounds what it cannot see.
    assert record.time - killed_at < 60


def test_a_two_process_checkpoint_resumes_in_two_processes_and_in_one(reference, runs: Runs):
    later = {s: loss for s, loss in reference.items() if s > KILL_AFTER}
    for result, witness, count in ((runs.resumed, "resumed", 2), (runs.resumed_alone,
                                                                   "alone", 1)):
        step = result.steps[0]
        assert step.state == "succeeded", step.error
        for host in range(count):
            seen = reads(runs.root / witness, host)
            assert seen[0]["step"] == KILL_AFTER and seen[0]["count"] == count
        resumed = losses(Path(step.output_path))
        assert {s: resumed[s] for s in later} == pytest.approx(later, rel=1e-5)


def test_hosts_are_where_not_what_one_step_for_any_count(tmp_path: Path, cache: Path):
    plans = [Executor(str(tmp_path)).plan([gang_step(cache, tmp_path / "w", hosts, placement,
                                                     micro)])
             for hosts, placement, micro in ((1, "pack", None), (2, "strict_spread", 2),
                                             (8, "spread", 1))]
    assert len({plan.entries[0].output_path for plan in plans}) == 1


def test_a_global_batch_the_hosts_cannot_split_fails_the_step_in_one_line(cache: Path,
                                                                          tmp_path: Path):
    step = gang_step(cache, tmp_path / "witness", 2)
    odd = dataclasses.replace(step.config, train=dataclasses.replace(step.config.train,
                                                                     batch_size=7))
    result = Executor(str(tmp_path / "prefix")).run([step.with_config(odd)])
    assert result.steps[0].state == "failed"
    assert re.fullmatch(r"GangError: host 0 of 2 \(pid \d+ on this machine\) failed: "
                        r"TrainingConfigError: TrainLmConfig.batch_size=7 does not split over "
                        r"2 hosts x 1 devices: give a multiple of 2; the gang's other hosts "
                        r"were stopped", result.steps[0].error)


def test_bad_host_counts_and_placements_are_refused_in_one_line():
    with pytest.raises(StepDefinitionError, match=r"^StepResources.hosts must be a whole "
                       r"number of at least 1, got 0: use hosts=1 for a step that runs in "
                       r"one process$"):
        StepResources(hosts=0)
    with pytest.raises(StepDefinitionError, match=r"StepResources.placement must be one of "
                       r"pack, spread, strict_pack, strict_spread, got 'apart'"):
        StepResources(hosts=2, placement="apart")


@pytest.fixture(scope="module")
def ray_cluster():
    import ray

    with servers.ray_nodes(2) as address:
        ray.init(address=address)  # the runner uses this connection, and leaves it open
        try:
            while sum(node["Alive"] for node in ray.nodes()) < 2:  # the second node joins
                time.sleep(0.2)
            yield address
        finally:
            ray.shutdown()


def test_two_ray_tasks_on_two_nodes_train_as_one_process(reference, ray_cluster, cache,
                                                         tmp_path: Path):
    witness = tmp_path / "witness"
    env = {"PYTHONPATH": str(ROOT), "MARIN_CACHE_DIR": str(tmp_path / "cache")}
    executor = Executor(str(tmp_path / "prefix"), backend="ray", runner_options={
        "address": ray_cluster, "runtime_env": {"env_vars": env}})
    result = executor.run([gang_step(cache, witness, 2, placement="strict_spread")])
    step = result.steps[0]
    assert step.state == "succeeded", step.error
    assert losses(Path(step.output_path)) == pytest.approx(reference, rel=1e-5)
    seen = [reads(witness, host) for host in (0, 1)]
    assert [{(r["index"], r["count"]) for r in s} for s in seen] == [{(0, 2)}, {(1, 2)}]
    nodes = [{r["node"] for r in s} for s in seen]
    assert all(len(n) == 1 and None not in n for n in nodes) and nodes[0] != nodes[1]
    too_many = Executor(str(tmp_path / "other"), backend="ray", runner_options={
        "address": ray_cluster}).run([gang_step(cache, witness, 3)])
    assert too_many.steps[0].state == "failed"
    assert too_many.steps[0].error == (
        "GangError: step 'train/gang' asks for StepResources.hosts=3 but the Ray cluster has "
        "2 node(s): lower hosts to at most 2, or add nodes")


def test_a_ray_host_killed_fails_the_gang_cancels_the_other_and_frees_the_lease(
        ray_cluster, tmp_path: Path):
    from marin.execution.processes import descendants
    from tests.fixtures.gang_members import MemberConfig, give_up

    pids = tmp_path / "pids"
    pids.mkdir()
    step = ExecutorStep("gang/killed", give_up, MemberConfig(
        output_path=this_output_path(), pids=str(pids), failing=1, kill=True),
        resources=StepResources(hosts=2, placement="strict_spread"))
    result = Executor(str(tmp_path / "prefix"), backend="ray", runner_options={
        "address": ray_cluster, "runtime_env": {"env_vars": {"PYTHONPATH": str(ROOT)}}}
    ).run([step])
    error = result.steps[0].error
    assert result.steps[0].state == "failed" and "\n" not in error
    assert error.startswith("GangError: host 1 of 2 (node ")
    assert error.endswith("; the gang's other hosts were stopped")
    other = int((pids / "pid-0").read_text())
    deadline = time.monotonic() + 30  # a cancelled task's worker is killed asynchronously
    while descendants([other]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not descendants([other])
    output = result.steps[0].output_path
    assert StatusRecord.decode(Path(status_path(output)).read_bytes()).status == "failed"
    assert not Path(lease_path(output)).exists()
