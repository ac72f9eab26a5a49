"""The commit: an attempt's files become the step's output, exactly, and a commit that a
stopped process began is finished by the next holder of the step's lease.

    record = commit_attempt(storage, output, run_id, fingerprint, still_ours, write_success)
    record.outputs                       # the names SUCCESS lists
    pending = read_pending(storage, output)
    if pending.record is not None:       # a process stopped during its commit
        finish_commit(storage, output, pending, still_ours, write_success)

The protocol, run by the lease holder with cancellation held off (``ActiveSteps``):

1. write ``.executor_commit`` (a ``CommitRecord``): the attempt, its top-level names and
   the shared folders in place;
2. ``Storage.commit_tree``: each name replaces the output's own whole, and every other name
   at the top of the output goes, except the executor's records and their temporary files,
   ``.attempts`` and the shared folders (``marin.execution.shared``);
3. write SUCCESS listing ``record.outputs``, then delete the record.

Design note: a process killed at any point of 2 or 3 leaves the record, and the status
is not SUCCESS (RUNNING was written when the attempt began). The next executor to hold the
lease reads the record before it runs anything and makes the same ``commit_tree`` call,
which is repeatable, then writes SUCCESS for the attempt: the step's function is not run
again, and the output is never a mixture of two attempts, nor an attempt and files an
earlier one left. A record whose attempt lost files meanwhile cannot be finished: it is
dropped and the step runs again, its commit removing what the stopped one moved.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from marin.execution._faults import fault_point
from marin.execution.lease import Lease
from marin.execution.shared import shared_names
from marin.execution.status import (
    EXECUTOR_NAMES,
    CorruptRecordError,
    attempt_path,
    commit_path,
)
from marin.storage import Blob, MissingSourceError, Storage, scheme_of

__all__ = ["COMMIT_FORMAT", "CommitRecord", "PendingCommit", "commit_attempt", "drop_pending",
           "finish_commit", "kept_in_output", "misdirected_output", "read_pending"]

COMMIT_FORMAT = 1


@dataclass(frozen=True)
class CommitRecord:
    """``.executor_commit``: what a commit under way puts in place."""

    run_id: str
    """The attempt committed: ``.attempts/<run id>``."""
    names: tuple[str, ...]
    """The attempt's top-level names when the commit began: what the output will hold."""
    shared: tuple[str, ...] = ()
    """Shared folders in place at the top of the output, kept as they are."""
    code_fingerprint: str = ""
    """The step function's fingerprint, for the SUCCESS a later executor may write."""
    format: int = COMMIT_FORMAT

    @property
    def outputs(self) -> list[str]:
        return sorted({*self.names, *self.shared})

    def encode(self) -> bytes:
        return json.dumps({"format": self.format, "run_id": self.run_id,
                           "names": list(self.names), "shared": list(self.shared),
                           "code_fingerprint": self.code_fingerprint}).encode()

    @classmethod
    def decode(cls, raw: bytes) -> CommitRecord:
        try:
            data = json.loads(raw)
            record = cls(str(data["run_id"]), _names(data["names"]), _names(data["shared"]),
                         str(data.get("code_fingerprint", "")), int(data["format"]))
        except (ValueError, KeyError, TypeError) as e:
            raise CorruptRecordError(f"not a valid commit record ({e})") from e
        if record.format != COMMIT_FORMAT:
            raise CorruptRecordError(f"commit record format {record.format}; this code "
                                     f"knows format {COMMIT_FORMAT}")
        if not record.run_id or "/" in record.run_id:
            raise CorruptRecordError(f"commit record names no attempt ({record.run_id!r})")
        return record


def _names(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v and "/" not in v
                                              for v in value):
        raise TypeError("names must be a list of top-level names")
    return tuple(value)


@dataclass(frozen=True)
class PendingCommit:
    """What ``.executor_commit`` holds: its record (None when unreadable) and its blob."""

    record: CommitRecord | None
    blob: Blob


def kept_in_output(name: str, shared: tuple[str, ...] = ()) -> bool:
    """A top-level name of an output that a commit leaves alone: the executor's records
    (and the temporary files a record is written through, ``.<record>.tmp-...``),
    ``.attempts`` and the shared folders."""
    return name in EXECUTOR_NAMES or name in shared or any(
        name.startswith(f".{record}.tmp-") for record in EXECUTOR_NAMES)


def read_pending(storage: Storage, output: str, blob: Blob | None = None
                 ) -> PendingCommit | None:
    """The commit record under ``output`` (``blob``: already read), or None."""
    blob = storage.read(commit_path(output)) if blob is None else blob
    if blob is None:
        return None
    try:
        return PendingCommit(CommitRecord.decode(blob.data), blob)
    except CorruptRecordError:
        return PendingCommit(None, blob)


def drop_pending(storage: Storage, output: str, pending: PendingCommit) -> None:
    """Delete a record that is left over (its SUCCESS written) or cannot be finished."""
    storage.delete_if_unchanged(commit_path(output), pending.blob.token)


def commit_attempt(storage: Storage, output: str, run_id: str, code_fingerprint: str,
                   lease: Lease, write_success: Callable[[CommitRecord], None]
                   ) -> CommitRecord | None:
    """Commit the attempt ``run_id``: record, move, SUCCESS (``write_success``), record
    deleted; None when the lease was lost meanwhile (the record stays, for the new holder
    to finish: the attempt's folder must stay too)."""
    attempt = attempt_path(output, run_id)
    record = CommitRecord(run_id, tuple(sorted(storage.list_dir(attempt))),
                          tuple(shared_names(storage, output)), code_fingerprint)
    path = commit_path(output)
    token = storage.create_if_absent(path, record.encode())
    if token is None:  # one a stopped attempt left after this one took the lease
        current = storage.read(path)
        token = (storage.create_if_absent(path, record.encode()) if current is None else
                 storage.compare_and_swap(path, current.token, record.encode()))
        if token is None:
            return None
    if not _apply(storage, output, record, lease, write_success):
        return None
    storage.delete_if_unchanged(path, token)
    return record


def finish_commit(storage: Storage, output: str, pending: PendingCommit, lease: Lease,
                  write_success: Callable[[CommitRecord], None]) -> CommitRecord | bool | None:
    """Finish the commit ``pending`` describes: its record when done; False (the record
    dropped, nothing written) when its attempt no longer holds what it names; None when
    the lease was lost meanwhile."""
    record = pending.record
    try:
        if record is None or not _apply(storage, output, record, lease, write_success):
            if record is None:
                drop_pending(storage, output, pending)
                return False
            return None
    except MissingSourceError:
        drop_pending(storage, output, pending)
        return False
    drop_pending(storage, output, pending)
    return record


def _apply(storage: Storage, output: str, record: CommitRecord, lease: Lease,
           write_success: Callable[[CommitRecord], None]) -> bool:
    """``commit_tree`` and SUCCESS; False when the lease was lost before SUCCESS."""
    check = _still_ours(lease)
    try:
        storage.commit_tree(attempt_path(output, record.run_id), output, record.names,
                            keep=lambda name: kept_in_output(name, record.shared),
                            after_each=lambda name: check())
        fault_point("status")
        check()
    except _LeaseLost:
        return False
    except OSError:
        # Paused in the middle of the commit past the ttl: the executor that took the step
        # over finished it and removed this attempt's folder under it.
        if not lease.confirm():
            return False
        raise
    write_success(record)
    return True


class _LeaseLost(Exception):
    pass


def _still_ours(lease: Lease) -> Callable[[], None]:
    """The check a commit makes after each name it puts in place and before SUCCESS: one
    that took long (a pause, a slow store) confirms the lease again, so a holder that lost
    it stops before it moves more over what the new holder puts in place."""
    checked = [time.monotonic()]

    def check() -> None:
        fault_point("commit")
        if lease.lost:
            raise _LeaseLost
        if time.monotonic() - checked[0] > lease.ttl / 4:
            if not lease.confirm():
                raise _LeaseLost
            checked[0] = time.monotonic()

    return check


def misdirected_output(attempt: str) -> str | None:
    """Why an attempt may not be committed although its function returned: on a remote
    prefix, ``open()`` and ``os.makedirs`` on the step's output path write into a local
    folder named after the URL (``gs:/bucket/...``) and nothing reaches the bucket, a data
    loss that would otherwise be recorded as SUCCESS."""
    if scheme_of(attempt) == "file":
        return None
    local = os.path.normpath(attempt)  # what open() makes of "gs://bucket/x": "gs:/bucket/x"
    if not os.path.exists(local):
        return None
    return (f"the step wrote its files to the local folder {os.path.abspath(local)!r}, not to "
            f"{attempt}: open() and os.makedirs do not understand URLs; write through "
            "marin.storage.files.open_url (or fsspec) instead")
