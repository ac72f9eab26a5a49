"""Asynchronous, sharded training checkpoints on local paths, gs:// and s3://.

    checkpoints = Checkpoints(join_url(out, "checkpoints"), keep_last=2, keep_every=1000)
    step = checkpoints.latest_step()                 # None, or the newest complete step
    state, meta = checkpoints.restore(step, like=(model, opt_state))
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
Old checkpoints are deleted after each commit, except the ``keep_last`` newest and every
step that is a multiple of ``keep_every``.

Design note, s3://: orbax 0.12 builds tensorstore specs only for local paths and gs://
(an s3:// URL is normalised to ``s3:/...`` and refused), so an s3:// root is written by the
same asynchronous manager to a local staging folder, then uploaded with s3fs in the
background, the marker ``COMPLETE`` last; restore downloads one step. gs:// goes to
tensorstore's own GCS driver directly (emulators: ``TENSORSTORE_GCS_HTTP_URL`` and
``GOOGLE_AUTH_TOKEN_FOR_TESTING``, see docs/training.md).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import threading
from typing import Any

import equinox as eqx
import jax

from marin.storage.files import join_url, normalize_url, url_to_fs

PREFIX = "step"
COMPLETE = "COMPLETE"  # the commit marker of an s3:// checkpoint
_STEP = re.compile(rf"^{PREFIX}_(\d+)$")


class CheckpointError(RuntimeError):
    """A checkpoint cannot be read or written; the message names it."""


def step_folder(root: str, step: int) -> str:
    return join_url(root, f"{PREFIX}_{step:08d}")


class Checkpoints:
    """The checkpoints of one run under ``root`` (a local path, gs:// or s3:// URL).

    Args:
        root: the folder holding one sub-folder per checkpoint.
        keep_last: how many of the newest complete checkpoints to keep (>= 1).
        keep_every: also keep every checkpoint whose step is a multiple of this (0: none).
        asynchronous: write in the background (False: ``save`` returns once committed).
    """

    def __init__(self, root: str, keep_last: int = 2, keep_every: int = 0,
                 asynchronous: bool = True):
        if keep_last < 1:
            raise CheckpointError(f"keep_last must be at least 1, got {keep_last}")
        root = normalize_url(root)  # one spelling: no trailing slash, no file://, gcs:// as gs://
        scheme = root.split("://", 1)[0] if "://" in root else None
        if scheme not in (None, "gs", "s3"):
            raise CheckpointError(f"checkpoints cannot go to {root}: use a local path, gs:// "
                                  "or s3://")
        self.root = os.path.abspath(root) if scheme is None else root
        self.asynchronous = asynchronous
        self._remote = _Staged(self.root) if self.root.startswith("s3://") else None
        if self._remote is not None:  # staging keeps only the step being uploaded
            self._manager = _manager(self._remote.staging, 1, 0, asynchronous)
        else:
            self._manager = _manager(self.root, keep_last, keep_every, asynchronous)
        self._keep = (keep_last, keep_every)

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

        known = self.steps() if self._remote is not None else self._manager.all_steps()
        if step in known:
            return  # already committed, by this run or a run it resumes
        if self._remote is not None:
            self._remote.wait()  # the staged copy of the previous step is uploaded
        leaves = jax.tree.leaves(eqx.filter(state, eqx.is_array))
        args = ocp.args.Composite(state=ocp.args.PyTreeSave(leaves),
                                  meta=ocp.args.JsonSave({**meta, "step": step}))
        self._manager.save(step, args=args)
        if self._remote is not None:
            self._remote.upload_after(self._manager, step, self._keep)
        elif not self.asynchronous:
            self._manager.wait_until_finished()

    def restore(self, step: int, like: Any) -> tuple[Any, dict[str, Any]]:
        """Checkpoint ``step`` as a state shaped, typed and sharded like ``like``."""
        import orbax.checkpoint as ocp

        downloaded = self._remote.download(step) if self._remote is not None else None
        manager = self._manager if downloaded is None else _manager(downloaded, 1, 0, False)
        arrays, rest = eqx.partition(like, eqx.is_array)
        targets = [jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding)
                   for x in jax.tree.leaves(arrays)]
        try:
            _refuse_other_shapes(manager, step, arrays, step_folder(self.root, step))
            restore_args = ocp.checkpoint_utils.construct_restore_args(targets)
            out = manager.restore(step, args=ocp.args.Composite(
                state=ocp.args.PyTreeRestore(targets, restore_args=restore_args),
                meta=ocp.args.JsonRestore()))
        except (FileNotFoundError, ValueError) as e:
            raise CheckpointError(f"cannot restore {step_folder(self.root, step)}: {e}. "
                                  "Was it written for another model shape?") from e
        finally:
            if downloaded is not None:
                manager.close()
                shutil.rmtree(downloaded, ignore_errors=True)
        state = jax.tree.unflatten(jax.tree.structure(arrays), list(out.state))
        return eqx.combine(state, rest), dict(out.meta)

    def wait(self) -> None:
        """Block until every save started so far is committed."""
        self._manager.wait_until_finished()
        if self._remote is not None:
            self._remote.wait()

    def close(self) -> None:
        self.wait()
        self._manager.close()
        if self._remote is not None:
            self._remote.close()


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


def _manager(directory: str, keep_last: int, keep_every: int, asynchronous: bool):
    import orbax.checkpoint as ocp
    from orbax.checkpoint import checkpoint_managers as policies

    keep: list[Any] = [policies.LatestN(n=keep_last)]
    if keep_every:
        keep.append(policies.EveryNSteps(keep_every))
    options = ocp.CheckpointManagerOptions(
        step_prefix=PREFIX, step_format_fixed_length=8, create=True,
        cleanup_tmp_directories=True, enable_async_checkpointing=asynchronous,
        preservation_policy=policies.AnyPreservationPolicy(keep))
    # No compression: zstd on float weights and moments saves little space and cut the
    # save throughput about fourfold, time taken from training when saves overlap it.
    handlers = {"state": ocp.PyTreeCheckpointHandler(use_compression=False),
                "meta": ocp.JsonCheckpointHandler()}
    return ocp.CheckpointManager(directory, options=options, item_handlers=handlers)


def complete_checkpoints(root: str) -> list[tuple[int, str]]:
    """(step, folder) of every complete checkpoint under ``root``, oldest first. Reads the
    folder listing only: a temporary (unfinished) folder never matches."""
    root = normalize_url(root)
    fs, path = url_to_fs(root)
    try:
        entries = fs.ls(path, detail=False, refresh=True)  # never a cached listing
    except FileNotFoundError:
        return []
    found = []
    for entry in entries:
        name = entry.rstrip("/").rsplit("/", 1)[-1]
        match = _STEP.match(name)
        if match and _committed(fs, join_url(path, name), root):
            found.append((int(match.group(1)), join_url(root, name)))
    return sorted(found)


def _committed(fs, path: str, root: str) -> bool:
    if root.startswith("s3://"):
        marker = COMPLETE
    elif root.startswith("gs://"):  # no atomic rename on GCS: orbax writes a marker last
        marker = "commit_success.txt"
    else:
        return True  # a local folder gets its final name only once complete
    # The filesystem is shared with the rest of the process (marin.storage.files) and may
    # hold a listing of this folder from before another process changed it.
    fs.invalidate_cache(path)
    return fs.exists(join_url(path, marker))


def latest_checkpoint(root: str) -> str | None:
    found = complete_checkpoints(root)
    return found[-1][1] if found else None


class _Staged:
    """An s3:// root: orbax writes to a local staging folder; each committed step is then
    uploaded by one background thread (in order), ``COMPLETE`` last, and old steps pruned
    with the same policy."""

    def __init__(self, root: str):
        self.root = root
        self.staging = tempfile.mkdtemp(prefix="marin-ckpt-")
        self.fs, self.path = url_to_fs(root)
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def upload_after(self, manager, step: int, keep: tuple[int, int]) -> None:
        self.wait()
        self._thread = threading.Thread(target=self._upload, args=(manager, step, keep),
                                        name=f"upload-{PREFIX}-{step}", daemon=True)
        self._thread.start()

    def _upload(self, manager, step: int, keep: tuple[int, int]) -> None:
        try:
            manager.wait_until_finished()
            name = os.path.basename(step_folder("", step))
            target = join_url(self.path, name)
            self.fs.put(os.path.join(self.staging, name), target, recursive=True)
            self.fs.pipe(join_url(target, COMPLETE), b"ok")
            self._prune(keep)
        except BaseException as e:  # re-raised by wait() in the training thread
            self._error = e

    def _prune(self, keep: tuple[int, int]) -> None:
        keep_last, keep_every = keep
        steps = [s for s, _ in complete_checkpoints(self.root)]
        for step in steps[:-keep_last]:
            if not (keep_every and step % keep_every == 0):
                folder = step_folder(self.path, step)
                self.fs.rm(join_url(folder, COMPLETE))  # no longer counts, then goes
                self.fs.rm(folder, recursive=True)

    def download(self, step: int) -> str:
        folder = tempfile.mkdtemp(prefix="marin-restore-")
        name = os.path.basename(step_folder("", step))
        self.fs.get(join_url(self.path, name), os.path.join(folder, name), recursive=True)
        return folder

    def wait(self) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._error is not None:
            error, self._error = self._error, None
            raise CheckpointError(f"uploading a checkpoint to {self.root} failed: {error}"
                                  ) from error

    def close(self) -> None:
        self.wait()
        shutil.rmtree(self.staging, ignore_errors=True)
