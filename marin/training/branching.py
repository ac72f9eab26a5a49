"""Runs that branch from another run's checkpoint: the cooldowns of a stable run.

    stable = ExecutorStep("train/stable", train_lm, TrainLmConfig(
        ..., train_steps=1000, checkpoint_every=100, checkpoint_keep_every=200,
        optimizer=OptimizerHyperparameters(..., decay_fraction=0.0)))   # constant after warmup
    cooldown = ExecutorStep("train/cooldown-600", train_lm,
                            cooldown_config(stable, step=400, train_steps=600))
    # = the stable run's config with train_steps=600, decay_shape="1-sqrt" and
    #   init_from=BranchPoint(run=output_path_of(stable, blocking=False), step=400)

A branch at step ``k`` restores the parent's published checkpoint of step ``k`` (its
parameters, its whole optimizer state, moments included, and its data position), then
trains steps ``k .. train_steps`` under its own schedule: it is the decay alone, from the
parent's learning rate at ``k`` to zero over its own steps, of ``optimizer.decay_shape``
(Hägele et al. 2024: a short cooldown of a warmup-stable-decay run matches a run of that
length). Its data are the batches ``k, k+1, ...`` the parent would read (the loader is a
function of the seed and the step), so it optimizes exactly as a from-scratch run of
``train_steps`` steps whose decay starts at ``k``.

* **Identity:** ``run`` is a dependency on the parent step, so a branch's key holds the
  parent's key and ``k``. ``TrainLmConfig.init_from`` is an ``added_field``: the keys of
  runs that branch from nothing do not move.
* **When it runs:** with ``blocking=False`` the branch starts once the parent has started,
  and waits (``wait_for_branch_point``) only until step ``k`` is published, so cooldowns
  run while the stable run goes on. A parent that fails (or ends without step ``k``) fails
  the waiting branch in one line naming it.
* **Resuming:** a branch resumes from its own checkpoints like any run; the parent's
  checkpoint is read only when the branch has none, and never written.
* **Bad input** is refused when the config is built (at planning time in a dry run), in
  one line naming the field and the fix (``check_branch``): ``k`` past the parent's
  ``train_steps``, a ``k`` the parent does not keep, a ``k`` outside the parent's plateau,
  another model, batch size, data, seed or optimizer than the parent's (only
  ``optimizer.decay_shape`` may differ).
* **Accounting:** the branch's ``summary.json`` counts only its own steps' FLOPs and names
  the parent run and ``k`` (``RunSummary.parent_run``, ``branch_step``), so a study counts
  the shared prefix once.

This module imports no JAX.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass
from typing import Any

from marin.execution.lease import LeaseRecord
from marin.execution.states import StepState
from marin.execution.status import CorruptRecordError, StatusRecord, lease_path, status_path
from marin.execution.step import ExecutorStep, OutputPathOf, output_path_of
from marin.storage import get_storage
from marin.storage.files import join_url
from marin.training.hyperparameters import schedule_steps

__all__ = ["BranchError", "BranchPoint", "check_branch", "cooldown_config", "kept_steps",
           "wait_for_branch_point"]

logger = logging.getLogger("marin.training")

#: seconds between two looks at the parent's published checkpoints
POLL_SECONDS = 0.5

#: the config fields a branch shares with its parent: what the restored state was trained on
SHARED_FIELDS = ("model", "batch_size", "seed", "cache_path", "mixture", "tokenizer")


class BranchError(ValueError):
    """A branch cannot start from its parent's checkpoint; the message names the field or
    the parent, and the fix."""


@dataclass(frozen=True)
class BranchPoint:
    """Where a branch starts: step ``step`` of the run ``run``.

    Attributes:
        run: the parent run's output: ``output_path_of(parent_step, blocking=False)`` (a
            path once resolved; a plain path names a run outside the pipeline).
        step: the parent's step ``k`` to start from: one of the checkpoints it keeps
            (``kept_steps``), in its plateau (after warmup, before any decay).
    """

    run: Any  # a placeholder until the executor resolves it
    step: int


def cooldown_config(parent: ExecutorStep, step: int, train_steps: int,
                    decay_shape: str = "1-sqrt") -> Any:
    """The config of a cooldown of the training step ``parent``: its config, branched at
    ``step`` to train to ``train_steps`` with a decay of ``decay_shape`` (the parent's
    ``checkpoint_at``, its branch points, are not the branch's)."""
    config = parent.config
    return dataclasses.replace(
        config, train_steps=train_steps, checkpoint_at=(),
        optimizer=dataclasses.replace(config.optimizer, decay_shape=decay_shape),
        init_from=BranchPoint(output_path_of(parent, blocking=False), step))


def kept_steps(config: Any) -> list[int]:
    """The steps of the checkpoints a run of ``config`` keeps once it is done: the last
    ``checkpoint_keep`` it saves, every multiple of ``checkpoint_keep_every`` among them and
    the steps of ``checkpoint_at``. A kept step is never deleted while the run goes on, so a
    branch can wait for it."""
    end, every = config.train_steps, config.checkpoint_every
    at = set(config.checkpoint_at)
    saved = sorted({*(range(every, end, every) if every else ()), *at, end})
    keep_every = config.checkpoint_keep_every
    return sorted(set(saved[-config.checkpoint_keep:]) | at
                  | {s for s in saved if keep_every and s % keep_every == 0})


def check_branch(config: Any) -> None:
    """Refuse ``config.init_from`` (a ``TrainLmConfig``'s) when it cannot branch; the
    parent is checked when ``run`` is a placeholder of a training step (at planning time)."""
    point = config.init_from
    if point is None:
        return
    if not isinstance(point, BranchPoint):
        raise BranchError(f"TrainLmConfig.init_from must be a BranchPoint(run=output_path_of("
                          f"parent, blocking=False), step=k) or None, got "
                          f"{type(point).__name__}")
    k = point.step
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise BranchError(f"TrainLmConfig.init_from.step must be a positive step of the "
                          f"parent, got {k!r}")
    if k >= config.train_steps:
        raise BranchError(f"TrainLmConfig.init_from.step={k} is not before train_steps="
                          f"{config.train_steps}: a branch trains steps k..train_steps; give "
                          f"train_steps > {k}")
    run = point.run
    if not isinstance(run, OutputPathOf):
        return  # a path: the restore checks what it holds
    name = run.step.name
    parent = run.step.config
    if run.sub or not isinstance(parent, type(config)):
        raise BranchError(f"TrainLmConfig.init_from.run must be the output of a training "
                          f"step (output_path_of(parent, blocking=False)), got "
                          f"output_path_of({name!r}, {run.sub!r})")
    _check_against(config, parent, k, name)


def _check_against(config: Any, parent: Any, k: int, name: str) -> None:
    if k > parent.train_steps:
        raise BranchError(f"TrainLmConfig.init_from.step={k} is beyond the parent {name!r}'s "
                          f"train_steps={parent.train_steps}: give a step of at most "
                          f"{parent.train_steps}")
    kept = kept_steps(parent)
    if k not in kept:
        shown = ", ".join(map(str, kept[:12])) + (", ..." if len(kept) > 12 else "")
        raise BranchError(
            f"TrainLmConfig.init_from.step={k} is no checkpoint the parent {name!r} keeps "
            f"(it keeps steps {shown}, of checkpoint_every={parent.checkpoint_every}, "
            f"checkpoint_keep={parent.checkpoint_keep}, checkpoint_keep_every="
            f"{parent.checkpoint_keep_every}): branch at one of them, or give the parent a "
            f"checkpoint_every and checkpoint_keep_every that divide {k}, or checkpoint_at="
            f"({k},)")
    for field in SHARED_FIELDS:
        if getattr(config, field) != getattr(parent, field):
            raise BranchError(f"TrainLmConfig.{field} differs from the parent {name!r}'s: a "
                              f"branch continues the parent's training; give the parent's "
                              f"{field}")
    mine, theirs = config.optimizer, parent.optimizer
    if dataclasses.replace(theirs, decay_shape=mine.decay_shape) != mine:
        differ = [f.name for f in dataclasses.fields(mine)
                  if getattr(mine, f.name) != getattr(theirs, f.name)]
        raise BranchError(f"TrainLmConfig.optimizer.{differ[0]} differs from the parent "
                          f"{name!r}'s: a branch has the parent's optimizer, and only its "
                          f"decay_shape may differ (its decay runs from step {k} to its "
                          f"train_steps)")
    warmup, decay_start, _ = schedule_steps(parent.train_steps, theirs.warmup_fraction,
                                            theirs.decay_fraction)
    if not warmup <= k <= decay_start:
        where = "warmup" if k < warmup else "decay"
        raise BranchError(f"TrainLmConfig.init_from.step={k} is in the parent {name!r}'s "
                          f"{where}: a branch decays from the parent's plateau; give a step "
                          f"from {warmup} to {decay_start}")


def wait_for_branch_point(point: BranchPoint, poll: float = POLL_SECONDS) -> str:
    """The parent's checkpoints folder, once its step ``point.step`` is published there;
    a ``BranchError`` naming the parent when it failed, or finished without that step."""
    run, k = point.run, point.step
    root = join_url(run, "checkpoints")
    from marin.training.checkpoint_folders import complete_checkpoints

    waiting = False
    while True:
        state, error = _parent_state(run)  # before the listing: a step published at the
        steps = [s for s, _ in complete_checkpoints(root)]  # end is listed then
        if k in steps:
            return root
        if state in (StepState.FAILED, StepState.CANCELLED):
            raise BranchError(f"TrainLmConfig.init_from: the parent run {run} "
                              f"{state.value} before publishing step {k}"
                              f"{f' ({error})' if error else ''}: rerun it, then this branch")
        if state is StepState.SUCCEEDED:
            raise BranchError(f"TrainLmConfig.init_from: the parent run {run} finished "
                              f"without a checkpoint of step {k} (it keeps steps {steps}): "
                              "branch at one of them")
        if not waiting:
            logger.info("waiting for step %d of %s to be published", k, run)
            waiting = True
        time.sleep(poll)


def _parent_state(run: str) -> tuple[StepState | None, str | None]:
    """The state the parent's ``.executor_status`` names and its error's first line (None:
    no status, a run outside the executor or not started yet, or a failed one that a live
    lease says is being run again)."""
    storage = get_storage(run)
    blob = storage.read(status_path(run))
    if blob is None:
        return None, None
    try:
        record = StatusRecord.decode(blob.data)
    except CorruptRecordError:
        return None, None  # being written, or unreadable: look again
    if record.status in (StepState.FAILED, StepState.CANCELLED):
        lease = storage.read(lease_path(run))
        held = None if lease is None else LeaseRecord.decode(lease.data)
        if held is not None and held.takeover_reason() is None:
            return None, None  # an attempt holds the lease: a rerun, not yet RUNNING
    first = (record.error or "").strip().splitlines()
    return record.status, first[0][:200] if first else None
