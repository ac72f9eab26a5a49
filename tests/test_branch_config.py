"""Branches and cooldown shapes without JAX: what enters a step's key, the refusals made
when the config is built, and the wait for a parent's published step."""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from marin.execution import ExecutorStep, StepGraph, added_field, this_output_path
from marin.execution.lease import LeaseRecord, boot_id, host_name
from marin.execution.states import StepState
from marin.execution.status import StatusRecord, lease_path, status_path
from marin.models import TransformerConfig
from marin.training import BranchPoint, TrainingConfigError, TrainLmConfig, cooldown_config
from marin.training.branching import BranchError, kept_steps, wait_for_branch_point
from marin.training.hyperparameters import OptimizerHyperparameters

MODEL = TransformerConfig(hidden_dim=32, intermediate_dim=64, num_layers=1, num_heads=1,
                          num_kv_heads=1, vocab_size=64, seq_len=16)
STABLE = OptimizerHyperparameters(learning_rate=0.01, adam_learning_rate=0.01, epsilon=1e-8,
                                  beta1=0.9, beta2=0.98, warmup_fraction=0.1,
                                  decay_fraction=0.0)


def train(config):
    return None


def _stable(**changes) -> ExecutorStep:
    fields = {"cache_path": "/data/cache", "model": MODEL, "batch_size": 2,
              "train_steps": 100, "optimizer": STABLE, "output_path": this_output_path(),
              "checkpoint_every": 10, "checkpoint_keep": 2, "checkpoint_keep_every": 40,
              **changes}
    return ExecutorStep("train/stable", train, TrainLmConfig(**fields))


# --- the key: a field added with a default moves no existing key ---------------------------

@dataclass(frozen=True)
class Before:
    lr: float
    output_path: str


@dataclass(frozen=True)
class After:
    lr: float
    output_path: str
    shape: str = added_field(default="linear")
    parent: object = added_field(default=None)


def _key(config) -> str:
    step = ExecutorStep("s", train, config)
    return StepGraph.build([step], "/p").node_of(step).key


def test_an_added_field_at_its_default_leaves_the_key_as_it_was_without_the_field():
    before = _key(Before(0.1, this_output_path()))
    assert _key(After(0.1, this_output_path())) == before
    assert _key(After(0.1, this_output_path(), shape="cosine")) != before
    assert _key(After(0.1, this_output_path(), parent=0)) != before  # 0 is not None
    assert _key(After(0.2, this_output_path())) != before


def test_an_added_field_needs_an_immutable_default():
    with pytest.raises(TypeError, match="added_field needs an immutable default"):
        added_field(default=[])


def test_decay_shape_and_init_from_move_no_existing_key_and_enter_the_branch_key():
    stable = _stable()
    plain = dataclasses.replace(stable.config, optimizer=STABLE)
    # the config as it was before the two fields existed hashes the same: its canonical
    # form has neither (the golden keys of tests/test_hashing.py hold the same)
    assert _key(plain) == _key(dataclasses.replace(plain, init_from=None))
    shaped = dataclasses.replace(plain, optimizer=dataclasses.replace(STABLE,
                                                                      decay_shape="1-sqrt"))
    assert _key(shaped) != _key(plain)
    at_40, at_80 = (ExecutorStep(f"train/cool-{k}", train, cooldown_config(stable, k, 120))
                    for k in (40, 80))
    graph = StepGraph.build([at_40, at_80], "/p")
    node = graph.node_of(at_40)
    assert node.nonblocking == {graph.node_of(stable)}  # waits only for the step it reads
    assert node.dependencies == [graph.node_of(stable)]
    at_80_renamed = ExecutorStep("train/cool-40", train, at_80.config)
    assert StepGraph.build([at_80_renamed], "/p").node_of(at_80_renamed).key != node.key
    other_parent = _stable(seed=0, eval_batches=5)
    moved = ExecutorStep("train/cool-40", train, cooldown_config(other_parent, 40, 120))
    assert StepGraph.build([moved], "/p").node_of(moved).key != node.key


# --- refusals at planning time --------------------------------------------------------------

def test_the_steps_a_parent_keeps():
    assert kept_steps(_stable().config) == [40, 80, 90, 100]
    assert kept_steps(_stable(checkpoint_every=0).config) == [100]
    assert kept_steps(_stable(checkpoint_keep_every=0, checkpoint_keep=3).config) == \
        [80, 90, 100]


def _branch(stable: ExecutorStep, k: int, **changes) -> TrainLmConfig:
    config = dataclasses.replace(cooldown_config(stable, k, 120), init_from=None)
    return dataclasses.replace(config, **changes,
                               init_from=cooldown_config(stable, k, 120).init_from)


@pytest.mark.parametrize(("k", "changes", "message"), [
    (110, {"train_steps": 130}, r"^TrainLmConfig.init_from.step=110 is beyond the parent "
     r"'train/stable''s train_steps=100: give a step of at most 100$"),
    (30, {}, r"^TrainLmConfig.init_from.step=30 is no checkpoint the parent 'train/stable' "
     r"keeps \(it keeps steps 40, 80, 90, 100, of checkpoint_every=10, checkpoint_keep=2, "
     r"checkpoint_keep_every=40\): branch at one of them"),
    (40, {"train_steps": 40}, r"^TrainLmConfig.init_from.step=40 is not before "
     r"train_steps=40: .*give train_steps > 40$"),
    (40, {"batch_size": 4}, r"^TrainLmConfig.batch_size differs from the parent "
     r"'train/stable''s: .*give the parent's batch_size$"),
    (40, {"model": dataclasses.replace(MODEL, seq_len=32)},
     r"^TrainLmConfig.model differs from the parent"),
    (40, {"cache_path": "/data/other"}, r"^TrainLmConfig.cache_path differs from the parent"),
    (40, {"seed": 1}, r"^TrainLmConfig.seed differs from the parent"),
    (40, {"optimizer": dataclasses.replace(STABLE, learning_rate=0.02)},
     r"^TrainLmConfig.optimizer.learning_rate differs from the parent 'train/stable''s: .*"
     r"only its decay_shape may differ"),
])
def test_a_branch_the_parent_cannot_give_is_refused_in_one_line(k, changes, message):
    with pytest.raises(TrainingConfigError, match=message) as error:
        _branch(_stable(), k, **changes)
    assert "\n" not in str(error.value)


def test_a_branch_point_outside_the_parents_plateau_is_refused():
    decaying = _stable(optimizer=dataclasses.replace(STABLE, decay_fraction=0.2))
    with pytest.raises(TrainingConfigError, match=r"step=90 is in the parent 'train/stable''s "
                       r"decay: .*give a step from 10 to 80$"):
        _branch(decaying, 90)
    early = _stable(optimizer=dataclasses.replace(STABLE, warmup_fraction=0.5))
    with pytest.raises(TrainingConfigError, match=r"step=40 is in the parent .*warmup"):
        _branch(early, 40)
    _branch(decaying, 80)  # the last step of the plateau is a branch point


def test_bad_branch_points_and_decay_shapes_are_refused():
    config = _stable().config
    with pytest.raises(TrainingConfigError, match=r"init_from must be a BranchPoint"):
        dataclasses.replace(config, init_from="/runs/stable")
    with pytest.raises(TrainingConfigError, match=r"init_from.step must be a positive step"):
        dataclasses.replace(config, init_from=BranchPoint("/runs/stable", 0))
    with pytest.raises(TrainingConfigError, match=r"decay_shape must be one of 'linear', "
                       r"'1-sqrt', 'cosine', got 'sqrt'"):
        dataclasses.replace(config, optimizer=dataclasses.replace(STABLE, decay_shape="sqrt"))
    # a plain path names a run outside the pipeline: its checkpoint is checked on restore
    dataclasses.replace(config, init_from=BranchPoint("/runs/stable", 30))


# --- the wait for the parent's published step ----------------------------------------------

def _status(run: Path, state: StepState, error: str | None = None) -> None:
    record = StatusRecord(state, run_id="r1", time=time.time(), error=error)
    Path(status_path(str(run))).write_bytes(record.encode())


def _publish(run: Path, step: int) -> None:
    (run / "checkpoints" / f"step_{step:08d}").mkdir(parents=True)


def test_a_branch_waits_for_its_step_and_not_for_the_parent_to_finish(tmp_path: Path):
    run = tmp_path / "stable"
    run.mkdir()
    _status(run, StepState.RUNNING)
    _publish(run, 10)
    found: list[str] = []
    waiter = threading.Thread(target=lambda: found.append(
        wait_for_branch_point(BranchPoint(str(run), 20), poll=0.01)))
    waiter.start()
    waiter.join(0.3)
    assert waiter.is_alive() and not found  # step 20 is not there yet
    _publish(run, 20)
    waiter.join(30)
    assert found == [str(run / "checkpoints")]


def test_a_branch_whose_parent_failed_or_ended_without_its_step_fails_naming_it(
        tmp_path: Path):
    run = tmp_path / "stable"
    run.mkdir()
    _publish(run, 10)
    _status(run, StepState.FAILED, "RuntimeError: out of disk\nTraceback ...")
    with pytest.raises(BranchError, match=rf"^TrainLmConfig.init_from: the parent run {run} "
                       r"failed before publishing step 20 \(RuntimeError: out of disk\): "
                       r"rerun it, then this branch$"):
        wait_for_branch_point(BranchPoint(str(run), 20), poll=0.01)
    _status(run, StepState.SUCCEEDED)
    with pytest.raises(BranchError, match=r"finished without a checkpoint of step 20 \(it "
                       r"keeps steps \[10\]\): branch at one of them$"):
        wait_for_branch_point(BranchPoint(str(run), 20), poll=0.01)
    assert wait_for_branch_point(BranchPoint(str(run), 10)) == str(run / "checkpoints")


def test_a_failed_parent_that_is_being_run_again_keeps_the_branch_waiting(tmp_path: Path):
    run = tmp_path / "stable"
    run.mkdir()
    _status(run, StepState.FAILED, "RuntimeError: the first attempt broke")
    # a new attempt holds the lease (live: this process, renewed now) before its RUNNING
    lease = LeaseRecord("r2", host_name(), os.getpid(), time.time(), 600.0, boot_id=boot_id())
    Path(lease_path(str(run))).write_bytes(lease.encode())
    found: list[str] = []
    waiter = threading.Thread(target=lambda: found.append(
        wait_for_branch_point(BranchPoint(str(run), 20), poll=0.01)))
    waiter.start()
    waiter.join(0.3)
    assert waiter.is_alive() and not found
    _publish(run, 20)
    waiter.join(30)
    assert found == [str(run / "checkpoints")]


def test_checkpoint_at_keeps_exactly_those_steps_and_the_last():
    assert kept_steps(_stable(checkpoint_every=0, checkpoint_keep_every=0,
                              checkpoint_at=(37, 61)).config) == [37, 61, 100]
    assert kept_steps(_stable(checkpoint_at=[45, 45]).config) == [40, 45, 80, 90, 100]
    for bad in (0, 101, 2.5):
        with pytest.raises(TrainingConfigError, match=r"^TrainLmConfig.checkpoint_at holds "
                           rf"{bad!r}: give steps of the run, from 1 to train_steps=100$"):
            _stable(checkpoint_at=(bad,))
