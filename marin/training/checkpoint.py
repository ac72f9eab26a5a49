"""Asynchronous, sharded training checkpoints on local paths, gs:// and s3://.

    checkpoints = Checkpoints(join_url(out, "checkpoints"), keep_last=2, keep_every=1000)
    step = checkpoints.latest_step()                 # None, or the newest complete step
    state, meta = checkpoints.restore(step, like=(model, opt_state))
    state, meta = read_checkpoint(other_run_root, step, like=(model, opt_state))  # read only
    checkpoints.save(100, (model, opt_state), {"data_step": 100})  # returns at once
    checkpoints.close()                              # waits for the last save to commit

The trainer saves ``(model, opt_state)`` and the data position. No random state is saved:
training draws no random numbers after initialisation (no dropout), and the data order is
a function of the seed and the step, so these resume a run exactly.

Saving is orbax-checkpoint's ``CheckpointManager`` on tensorstore (uncompressed), the way
Levanter and MaxText checkpoint: ``save`` copies the arrays off the accelerators and
returns; a background thread writes them while training goes on (a second ``save`` first
waits for the one in flight). Each array is written per shard (OCDBT), every host writing
the shards it holds, and ``restore`` places each shard straight onto the devices of
``like``'s sharding.

A checkpoint is a folder ``step_00000100`` holding ``state`` (the arrays of the state, in
leaf order) and ``meta`` (JSON: data position and anything else). It counts only once
orbax has committed it: on a local disk the folder is written under a temporary name and
renamed when complete; on GCS it gets its commit marker last. A save cut short (a run killed
mid-write) leaves a temporary folder that is never read and is cleaned up by the next run.
Old checkpoints are deleted after each commit, except the ``keep_last`` newest, every
step that is a multiple of ``keep_every`` and the steps of ``keep_at``.

Multi-host (``jax.process_count() > 1``): every process calls ``save`` and ``restore``
alike (orbax's barriers pair the calls), each writing and reading its own devices' shards;
the first alone commits and publishes. A checkpoint restores onto any count of hosts or
devices. s3:// is refused there: its staging folder is local to each host.

Design note, s3://: orbax 0.12 builds tensorstore specs only for local paths and gs://
(an s3:// URL is normalised to ``s3:/...`` and refused), so an s3:// root is written by the
same asynchronous manager to a local staging folder, then uploaded with s3fs in the
background, the marker ``COMPLETE`` last; restore downloads one step. gs:// goes to
tensorstore's own GCS driver directly (emulators: ``TENSORSTORE_GCS_HTTP_URL`` and
``GOOGLE_AUTH_TOKEN_FOR_TESTING``, see docs/training.md).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

import equinox as eqx
import jax

from marin.execution.shared import SharedFolder
from marin.storage.files import join_url, normalize_url, url_to_fs
from marin.training.checkpoint_folders import (
    COMPLETE,
    PREFIX,
    complete_checkpoints,
    latest_checkpoint,
    step_folder,
)

__all__ = ["COMPLETE", "CheckpointError", "Checkpoints", "complete_checkpoints",
           "latest_checkpoint", "read_checkpoint", "step_folder"]


# Design note: orbax pairs the parts of one asynchronous save (the folder it creates, the
# writes that wait for that folder, the clean-up once committed) through one counter and
# one table of signals per process (``OperationIdGenerator``, ``AwaitableSignalsContract``),
# read while ``CheckpointManager.save`` runs. Two managers saving at once in one process (two
# training steps run in threads by the executor) read each other's operation id: a write
# then waits for a signal that is never sent (orbax's ``ChainedFuture ... timed out`` after
# 300 s), or writes into a folder the other save created or removed. The synchronous part of
# every save in the process goes through this lock; the background writes and commits, which
# only use the ids read under it, still overlap each other and training.
_SAVING = threading.Lock()


class CheckpointError(RuntimeError):
    """A checkpoint cannot be read or written; the message names it."""


class Checkpoints:
    """The checkpoints of one run under ``root`` (a local path, gs:// or s3:// URL).

    Args:
        root: the folder holding one sub-folder per checkpoint.
        keep_last: how many of the newest complete checkpoints to keep (>= 1).
        keep_every: also keep every checkpoint whose step is a multiple of this (0: none).
        asynchronous: write in the background (False: ``save`` returns once committed).
        keep_at: also keep the checkpoints of these steps (a stable run's branch points).
    """

    def __init__(self, root: str, keep_last: int = 2, keep_every: int = 0,
                 asynchronous: bool = True, keep_at: Collection[int] = ()):
        if keep_last < 1:
            raise CheckpointError(f"keep_last must be at least 1, got {keep_last}")
        root = normalize_url(root)  # one spelling: no trailing slash, no file://, gcs:// as gs://
        scheme = root.split("://", 1)[0] if "://" in root else None
        if scheme not in (None, "gs", "s3"):
            raise CheckpointError(f"checkpoints cannot go to {root}: use a local path, gs:// "
                                  "or s3://")
        self.root = os.path.abspath(root) if scheme is None else root
        self.asynchronous = asynchronous
        if scheme == "s3" and jax.process_count() > 1:
            raise CheckpointError(f"checkpoints cannot go to {root} from {jax.process_count()} "
                                  "hosts (each would stage its shards on its own disk): use "
                                  "gs:// or a folder every host shares for a multi-host run")
        self._primary = jax.process_index() == 0  # publishes and prunes; orbax commits there
        # Inside an executor's attempt folder the checkpoints go to the output's shared
        # folder (marin.execution.shared): no resume or commit copies them.
        self._shared = SharedFolder.of(self.root)
        if self._shared is not None:
            self.root = self._shared.folder
        self._own = self.root if self._shared is None else self._shared.own
        self._remote = _Staged(self._own) if self.root.startswith("s3://") else None
        self._after = _Background()  # publishes (and prunes) each step once committed
        self._keep = _Retention(keep_last, keep_every, frozenset(keep_at))
        if self._remote is not None:  # staging keeps only the step being uploaded
            self._manager = _manager(self._remote.staging, _Retention(1), asynchronous)
        elif self._shared is not None:  # deletes are the lease holder's (see _publish)
            self._manager = _manager(self._own, None, asynchronous)
        else:
            self._manager = _manager(self.root, self._keep, asynchronous)

    def latest_step(self) -> int | None:
        steps = self.steps()
        return steps[-1] if steps else None

    def steps(self) -> list[int]:
        """The steps of the complete checkpoints, oldest first."""
        return [step for step, _ in complete_checkpoints(self.root)]

    def save(self, step: int, state: Any, meta: dict[str, Any]) -> None:
        """Start saving ``state`` (any pytree of arrays, such as ``(model, opt_state)``) and
        ``meta`` as checkpoint ``step``; returns once the arrays are copied off the devices."""
        import orbax.checkpoint as ocp

        known = ([s for s, _ in complete_checkpoints(self._own)] if self._remote is not None
                 else self._manager.all_steps())
        if step in known:
            return  # already committed, by this run or a run it resumes
        if self._remote is not None:
            self._remote.wait()  # the staged copy of the previous step is uploaded
        self._after.wait()
        leaves = jax.tree.leaves(eqx.filter(state, eqx.is_array))
        args = ocp.args.Composite(state=ocp.args.PyTreeSave(leaves),
                                  meta=ocp.args.JsonSave({**meta, "step": step}))
        self._manager.wait_until_finished()  # this run's previous save: outside the lock
        with _SAVING:  # see _SAVING: one manager's save call at a time in this process
            self._manager.save(step, args=args)
        if self._remote is not None:  # uploads, then publishes or prunes, in one thread
            self._remote.upload_after(self._manager, step, self._publish
                                      if self._shared is not None else self._prune_remote)
        elif self._shared is not None and self._primary:
            self._after.start(self._publish, step)
        if not self.asynchronous:
            self.wait()

    def _publish(self, step: int) -> None:
        """Once ``step`` is committed in this attempt's folder: publish it, then delete the
        published steps that retention drops, both only while this attempt holds the lease."""
        assert self._shared is not None
        self._manager.wait_until_finished()
        entry = os.path.basename(step_folder("", step))
        if not self._shared.publish(entry, {"step": step}):
            return  # taken over: the holder's steps are the ones that count
        steps = sorted(s for s, _ in complete_checkpoints(self.root))
        for old in self._keep.dropped(steps):
            self._shared.prune(os.path.basename(step_folder("", old)))

    def _prune_remote(self, step: int) -> None:
        assert self._remote is not None
        self._remote.prune(self._keep)

    def restore(self, step: int, like: Any) -> tuple[Any, dict[str, Any]]:
        """Checkpoint ``step`` as a state shaped, typed and sharded like ``like``."""
        folder = _complete_folder(self.root, step)
        own = self._remote is None and folder.rsplit("/", 1)[0] == self._own
        return _restore(self.root, folder, step, like, self._manager if own else None)

    def wait(self) -> None:
        """Block until every save started so far is committed."""
        self._manager.wait_until_finished()
        if self._remote is not None:
            self._remote.wait()
        self._after.wait()

    def close(self) -> None:
        self.wait()
        self._manager.close()
        if self._remote is not None:
            self._remote.close()


def read_checkpoint(root: str, step: int, like: Any) -> tuple[Any, dict[str, Any]]:
    """Checkpoint ``step`` of another run's checkpoints ``root``, read only (nothing there
    is created, cleaned up or deleted), shaped like ``like``."""
    return _restore(root, _complete_folder(root, step), step, like, None)


def _complete_folder(root: str, step: int) -> str:
    found = dict(complete_checkpoints(root))
    if step not in found:
        raise CheckpointError(f"no complete checkpoint {step_folder(root, step)}; the "
                              f"complete ones are steps {sorted(found)}")
    return found[step]


def _restore(root: str, folder: str, step: int, like: Any, own) -> tuple[Any, dict]:
    """``folder`` (checkpoint ``step`` of ``root``) through the manager ``own``, else a
    read-only one of its parent folder, its temporary folders left alone (s3: a copy)."""
    import orbax.checkpoint as ocp

    downloaded = _download(folder) if folder.startswith("s3://") else None
    if own is not None:
        manager = own
    elif downloaded is not None:
        manager = _manager(downloaded, None, 0, False)
    else:
        manager = _manager(folder.rsplit("/", 1)[0], None, False, read_only=True)
    arrays, rest = eqx.partition(like, eqx.is_array)
    targets = [jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding)
               for x in jax.tree.leaves(arrays)]
    try:
        _refuse_other_shapes(manager, step, arrays, step_folder(root, step))
        restore_args = ocp.checkpoint_utils.construct_restore_args(targets)
        out = manager.restore(step, args=ocp.args.Composite(
            state=ocp.args.PyTreeRestore(targets, restore_args=restore_args),
            meta=ocp.args.JsonRestore()))
    except (FileNotFoundError, ValueError) as e:
        raise CheckpointError(f"cannot restore {step_folder(root, step)}: {e}. "
                              "Was it written for another model shape?") from e
    finally:
        if manager is not own:
            manager.close()
        if downloaded is not None:
            shutil.rmtree(downloaded, ignore_errors=True)
    state = jax.tree.unflatten(jax.tree.structure(arrays), list(out.state))
    return eqx.combine(state, rest), dict(out.meta)


def _refuse_other_shapes(manager, step: int, arrays: Any, folder: str) -> None:
    """Raise ``CheckpointError`` naming the first array whose shape differs from the one
    stored in checkpoint ``step`` (nothing when the checkpoint has no array metadata).

    Design note: orbax finds a shape mismatch only once the reads of the other arrays have
    started, and leaves those reads suspended; when the garbage collector closes them later,
    orbax's ``except BaseException`` turns each ``GeneratorExit`` into an exception that
    Python can only report as unraisable, with a TensorStore spec dump. Comparing with the
    stored metadata first refuses the restore before any read starts."""
    try:
        composite = manager.item_metadata(step)
    except FileNotFoundError:
        return  # no such step: the restore itself says so
    stored = getattr(composite["state"], "tree", None) if composite is not None and \
        "state" in composite else None
    if not isinstance(stored, list):
        return
    leaves = jax.tree_util.tree_flatten_with_path(arrays)[0]
    hint = "Was it written for another model shape?"
    if len(stored) != len(leaves):
        raise CheckpointError(f"cannot restore {folder}: it holds {len(stored)} arrays and "
                              f"the state to restore has {len(leaves)}. {hint}")
    for (path, leaf), meta in zip(leaves, stored, strict=True):
        if tuple(meta.shape) != tuple(leaf.shape):
            raise CheckpointError(
                f"cannot restore {folder}: state{jax.tree_util.keystr(path)} has shape "
                f"{tuple(leaf.shape)} here and {tuple(meta.shape)} in the checkpoint. {hint}")


def _download(folder: str) -> str:
    """A local copy of the s3:// checkpoint ``folder``, in a new temporary folder."""
    local = tempfile.mkdtemp(prefix="marin-restore-")
    fs, path = url_to_fs(folder)
    fs.get(path, os.path.join(local, folder.rstrip("/").rsplit("/", 1)[-1]), recursive=True)
    return local


@dataclass(frozen=True)
class _Retention:
    """Which checkpoints a run keeps: the ``last`` newest, every multiple of ``every`` (0:
    none) and the steps ``at``."""

    last: int
    every: int = 0
    at: frozenset[int] = frozenset()

    def dropped(self, steps: list[int]) -> list[int]:
        """The steps of ``steps`` (oldest first) that retention deletes."""
        return [s for s in steps[:-self.last]
                if not (self.every and s % self.every == 0) and s not in self.at]


def _manager(directory: str, keep: _Retention | None, asynchronous: bool,
             read_only: bool = False):
    """An orbax manager on ``directory``; ``keep`` None: it deletes nothing."""
    import orbax.checkpoint as ocp
    from orbax.checkpoint import checkpoint_managers as policies

    retention: dict[str, Any] = {}
    if keep is not None:
        kept: list[Any] = [policies.LatestN(n=keep.last)]
        if keep.every:
            kept.append(policies.EveryNSteps(keep.every))
        if keep.at:
            kept.append(policies.CustomSteps(sorted(keep.at)))
        retention["preservation_policy"] = policies.AnyPreservationPolicy(kept)
    options = ocp.CheckpointManagerOptions(
        step_prefix=PREFIX, step_format_fixed_length=8, create=not read_only,
        cleanup_tmp_directories=not read_only, enable_async_checkpointing=asynchronous,
        read_only=read_only, **retention)
    # No compression: zstd on float weights and moments saves little space and cut the
    # save throughput about fourfold, time taken from training when saves overlap it.
    handlers = {"state": ocp.PyTreeCheckpointHandler(use_compression=False),
                "meta": ocp.JsonCheckpointHandler()}
    return ocp.CheckpointManager(directory, options=options, item_handlers=handlers)


class _Background:
    """One background thread at a time; ``wait`` joins it and re-raises what it raised."""

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def start(self, fn, *args: Any) -> None:
        self.wait()
        self._thread = threading.Thread(target=self._run, args=(fn, *args), daemon=True,
                                        name=f"checkpoint-{fn.__name__}")
        self._thread.start()

    def _run(self, fn, *args: Any) -> None:
        try:
            fn(*args)
        except BaseException as e:  # re-raised by wait() in the training thread
            self._error = e

    def wait(self) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        error, self._error = self._error, None
        if error is not None:
            raise CheckpointError(f"writing a checkpoint failed: {error}") from error


class _Staged:
    """An s3:// root: orbax writes to a local staging folder; each committed step is then
    uploaded by one background thread (in order), ``COMPLETE`` last, and old steps pruned
    with the same policy, or published (``after``)."""

    def __init__(self, root: str):
        self.root = root
        self.staging = tempfile.mkdtemp(prefix="marin-ckpt-")
        self.fs, self.path = url_to_fs(root)
        self._thread = _Background()

    def upload_after(self, manager, step: int, after) -> None:
        self._thread.start(self._upload, manager, step, after)

    def _upload(self, manager, step: int, after) -> None:
        manager.wait_until_finished()
        name = os.path.basename(step_folder("", step))
        target = join_url(self.path, name)
        self.fs.put(os.path.join(self.staging, name), target, recursive=True)
        self.fs.pipe(join_url(target, COMPLETE), b"ok")
        after(step)

    def prune(self, keep: _Retention) -> None:
        steps = [s for s, _ in complete_checkpoints(self.root)]
        for step in keep.dropped(steps):
            folder = step_folder(self.path, step)
            self.fs.rm(join_url(folder, COMPLETE))  # no longer counts, then goes
            self.fs.rm(folder, recursive=True)

    def wait(self) -> None:
        try:
            self._thread.wait()
        except CheckpointError as e:
            raise CheckpointError(f"uploading a checkpoint to {self.root} failed: "
                                  f"{e.__cause__}") from e.__cause__

    def close(self) -> None:
        self.wait()
        shutil.rmtree(self.staging, ignore_errors=True)
