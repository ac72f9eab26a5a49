"""Running one step under its lease: the part of the executor that a runner ships to a
thread, a process or a Ray worker.

    outcome = execute_step(job)     # StepOutcome(state=StepState.SUCCEEDED, seconds=12.3)

The protocol, the same for every runner and every storage backend:

1. take the lease (free, stale, or held by a dead process on this machine); while another
   executor holds it, wait, polling the status in case that executor settles the step;
2. with the lease, read the status again (another executor may have just finished), write
   ``.executor_info`` and RUNNING, start the heartbeat;
3. run ``fn(config)``: the config's own output path points at this attempt's folder,
   ``<output>/.attempts/<run id>``, so a paused or killed attempt never writes into the
   output itself; on an exception write FAILED with the traceback;
4. confirm the lease (``Lease.confirm``: a read, or a compare-and-swap renewal when the
   record is older than half its ttl): only a holder that still owns it commits
   (``marin.execution.commit``: exactly its attempt's files; a signal waits for it; one a
   killed process began is finished by the next holder) and writes SUCCESS. Folders that
   the attempts share (checkpoints, ``marin.execution.shared``) are already in place:
   neither the commit nor a resume copies them;
5. release the lease.

Design note: object stores offer no fencing, so an attempt cannot be stopped from writing
once its lease is lost. Giving each attempt its own folder moves the question from "who may
write" to "who may commit", which a compare-and-swap on the lease answers.
"""

from __future__ import annotations

import os
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from marin.execution._faults import fault_point
from marin.execution.commit import (
    CommitRecord,
    commit_attempt,
    drop_pending,
    finish_commit,
    misdirected_output,
    read_pending,
)
from marin.execution.errors import one_line
from marin.execution.exit_guard import exit_guard
from marin.execution.lease import Lease, takeover_note
from marin.execution.outcome import StepOutcome
from marin.execution.phases import Laps, recording
from marin.execution.processes import StepChildren, leave_if_forked
from marin.execution.shared import SharedFolder, adopted_attempt, published_by, shared_names
from marin.execution.states import StepState
from marin.execution.status import (
    StatusRecord,
    attempt_path,
    attempts_folder,
    commit_path,
    encode_info,
    info_path,
    lease_path,
    status_path,
)
from marin.execution.step import join_path
from marin.storage import Blob, Storage, get_storage
from marin.storage.files import resolve_under


@dataclass(frozen=True)
class StepJob:
    """Everything a worker needs to run one step; picklable when ``fn`` and config are."""

    key: str
    name: str
    output_path: str
    fn: Callable[[Any], Any]
    config: Any
    info: dict[str, Any]
    code_fingerprint: str
    run_id: str
    lease_ttl: float
    poll_interval: float
    planned_status: StatusRecord | None = None
    rerun: bool = False
    """Run even though the planned status is SUCCESS (forced, or its output is missing)."""
    resume: bool = False
    """Start from a copy of the latest unfinished attempt's files (see ExecutorStep)."""
    prefix: str | None = None
    """The executor's prefix: no record or output is written where a link leads out of it."""


@dataclass
class _Active:
    job: StepJob
    lease: Lease
    storage: Storage
    lock: threading.Lock = field(default_factory=threading.Lock)
    cancelled: bool = False
    owner: int = field(default_factory=os.getpid)
    """The process that runs the step; a forked copy of it never writes its records."""
    committed: bool = False
    """SUCCESS is written: a cancellation leaves the status alone."""


class ActiveSteps:
    """The steps this process is running, so an interrupt can release their leases.

    Design note: the workers are daemon threads that may still be running when the process
    exits after Ctrl-C, so every lease they take and every status they write passes through
    here. Once ``cancel_all`` returns, each lease held by a worker is released with a
    CANCELLED status, and no worker can take a lease or write a status again.
    """

    def __init__(self) -> None:
        self._steps: dict[str, _Active] = {}
        self._changed = threading.Condition()
        self._acquiring = 0
        self.cancelled = threading.Event()

    def acquire(self, item: _Active) -> bool:
        """Take ``item``'s lease and register the step; False if cancelled or still held."""
        with self._changed:
            if self.cancelled.is_set():
                return False
            self._acquiring += 1
        taken = False
        try:
            taken = item.lease.try_acquire()
        finally:
            with self._changed:
                self._acquiring -= 1
                if taken and not self.cancelled.is_set():
                    self._steps[item.job.key] = item
                self._changed.notify_all()
        if taken and item.job.key not in self._steps:
            item.lease.release()  # cancelled while it was being taken
            return False
        return taken

    def remove(self, key: str) -> None:
        with self._changed:
            self._steps.pop(key, None)

    def write_status(self, item: _Active, status: StepState, **fields: Any) -> bool:
        """Write ``item``'s status unless the step was cancelled; False if it was."""
        with item.lock:
            if item.cancelled:
                return False
            _write_status(item, status, **fields)
            return True

    def cancel_all(self, reason: str, wait: float = 30.0) -> list[str]:
        """Mark every running step CANCELLED and release its lease; returns their keys."""
        with self._changed:
            self.cancelled.set()
            self._changed.wait_for(lambda: self._acquiring == 0, timeout=wait)
            active = list(self._steps.values())
        for item in active:
            with item.lock:  # held by a commit under way: it ends before this goes on
                item.cancelled = True
                if not item.committed and item.lease.held and item.lease.confirm():
                    _write_status(item, StepState.CANCELLED, error=reason)
                item.lease.release()
        return [a.job.key for a in active]


def execute_step(job: StepJob, active: ActiveSteps | None = None) -> StepOutcome:
    """The protocol above; the outcome carries where its time went (lease, start, the step
    function's own phases, run, commit, release: ``marin.execution.phases``)."""
    with recording() as clock:
        laps = Laps()
        try:
            outcome = _execute_step(job, active, laps)
        finally:
            laps.end("release")
    return replace(outcome, phases=clock.times())


def _execute_step(job: StepJob, active: ActiveSteps | None, laps: Laps) -> StepOutcome:
    active = active if active is not None else ActiveSteps()
    storage = get_storage(job.output_path)
    if job.prefix is not None:  # before anything is written: a link may lead elsewhere
        for path in (job.output_path, lease_path(job.output_path), status_path(job.output_path),
                     info_path(job.output_path), attempt_path(job.output_path, job.run_id)):
            resolve_under(job.prefix, path)
    item = _Active(job, Lease(storage, lease_path(job.output_path), job.run_id, job.lease_ttl),
                   storage)
    lease = item.lease
    started = time.monotonic()
    waiting = _acquire_or_finish(item, active)
    laps.lap("lease")
    if waiting is not None:
        return waiting
    cancelled = StepOutcome(job.key, StepState.CANCELLED)
    try:
        fault_point("lease")
        blob, record = storage.read_many([status_path(job.output_path),
                                          commit_path(job.output_path)])
        done = _finished_elsewhere(job, blob)
        if done is not None:
            return done
        pending = read_pending(storage, job.output_path, record) if record else None
        if pending is not None and (_succeeded(blob) or job.rerun):
            drop_pending(storage, job.output_path, pending)  # done, or forced to start afresh
        elif pending is not None:  # a stopped process's commit: finish it, run nothing
            done = _commit(item, started, lambda success: finish_commit(
                storage, job.output_path, pending, lease, success))
            if isinstance(done, CommitRecord):
                storage.delete_tree(attempts_folder(job.output_path))
                return StepOutcome(job.key, StepState.SUCCEEDED, time.monotonic() - started,
                                   note=f"finished the commit of attempt {done.run_id}, "
                                        "whose process stopped during it")
            if done is not None:
                return done
        # No status and a lease created afresh: no earlier attempt can have left a folder.
        fresh = blob is None and lease.took_over_from is None
        # "resumes": whether a rerun adopts an attempt, so gc keeps the one it would adopt
        storage.write(info_path(job.output_path), encode_info({**job.info,
                                                               "resumes": job.resume}))
        if not active.write_status(item, StepState.RUNNING):
            return cancelled
        lease.start_heartbeat()
        fault_point("running")
        attempt = attempt_path(job.output_path, job.run_id)
        resumed = None
        if job.resume and not _succeeded(blob):  # a rerun of a success starts afresh
            resumed = _adopt_latest_attempt(storage, job)
        elif not fresh:  # an attempt started afresh does not resume from shared folders either
            for name in shared_names(storage, job.output_path):
                storage.delete_tree(join_path(job.output_path, name))
        children = StepChildren.start()
        laps.lap("start")
        try:
            with exit_guard():
                job.fn(job.config)
            laps.lap("run")  # what the step's own phases leave out
        except BaseException as e:  # the step's own failure, whatever its type
            leave_if_forked(item.owner, _exit_code(e))
            tb, error = traceback.format_exc(), one_line(e, with_type=True)
            children.end()
            if not lease.confirm():  # never overwrite the status of a step someone took over
                return cancelled if item.cancelled else _lost(job, storage, started)
            if not active.write_status(item, StepState.FAILED, error=error, tb=tb):
                return cancelled
            return StepOutcome(job.key, StepState.FAILED, time.monotonic() - started, error, tb)
        leave_if_forked(item.owner)
        ended, survivors = children.end()  # no process of the step may outlive its commit
        if item.cancelled:
            return cancelled
        if not lease.confirm():
            return _lost(job, storage, started)
        if survivors:
            error = (f"the step left processes running that did not end on SIGKILL (pids "
                     f"{', '.join(map(str, survivors))}); its output is not committed")
            if not active.write_status(item, StepState.FAILED, error=error):
                return cancelled
            return StepOutcome(job.key, StepState.FAILED, time.monotonic() - started, error)
        misdirected = misdirected_output(attempt)
        if misdirected is not None:
            if not active.write_status(item, StepState.FAILED, error=misdirected):
                return cancelled
            return StepOutcome(job.key, StepState.FAILED, time.monotonic() - started, misdirected)
        committed = _commit(item, started, lambda success: commit_attempt(
            storage, job.output_path, job.run_id, job.code_fingerprint, lease, success))
        if not isinstance(committed, CommitRecord):
            return committed or cancelled
        outputs = committed.outputs
        if outputs or not fresh or job.resume or storage.has_folders:
            storage.delete_tree(attempts_folder(job.output_path))
        laps.lap("commit")
        notes = [] if outputs else [f"wrote no files under {job.output_path}"]
        notes += [resumed] if resumed else []
        if ended:
            notes.append(f"ended {len(ended)} process(es) the step left running (pids "
                         f"{', '.join(map(str, ended[:5]))}{' ...' if len(ended) > 5 else ''})")
        if lease.took_over_from is not None:
            notes.append(takeover_note(lease.took_over_from, lease.took_over_reason))
        return StepOutcome(job.key, StepState.SUCCEEDED, time.monotonic() - started,
                           note="; ".join(notes) or None)
    finally:
        fault_point("release")
        lease.release()
        active.remove(job.key)


def _commit(item: _Active, started: float,
            commit: Callable[[Callable[[CommitRecord], None]], CommitRecord | bool | None]
            ) -> CommitRecord | StepOutcome | None:
    """Run ``commit`` (given how to write SUCCESS) with cancellation held off: cancel_all
    waits, so a signal never leaves half a commit. Its record when done; the outcome when
    cancelled first or the lease was lost (the attempt stays: the new holder finishes its
    commit); None when a stopped commit cannot be finished."""
    job, storage = item.job, item.storage
    with item.lock:
        if item.cancelled:
            return StepOutcome(job.key, StepState.CANCELLED)
        done = commit(lambda r: _write_success(item, r))
        if done is None:
            return _lost(job, storage, started, discard=False)
        if done is False:
            return None
        item.committed = True
        return done


def _write_success(item: _Active, record: CommitRecord) -> None:
    _write_status(item, StepState.SUCCEEDED, outputs=record.outputs, run_id=record.run_id,
                  fingerprint=record.code_fingerprint)


def _succeeded(blob: Blob | None) -> bool:
    try:
        return blob is not None and StatusRecord.decode(blob.data).status is StepState.SUCCEEDED
    except ValueError:
        return False


def _lost(job: StepJob, storage: Storage, started: float, discard: bool = True
          ) -> StepOutcome:
    """Lost during its commit (not ``discard``), the attempt stays for its record: the new
    holder finishes that commit."""
    if discard:
        storage.delete_tree(attempt_path(job.output_path, job.run_id))
    return StepOutcome(job.key, StepState.LOST_LEASE, time.monotonic() - started,
                       "the step's lease was taken over by another executor while it ran; "
                       "this attempt's files were discarded, never committed")


def _adopt_latest_attempt(storage: Storage, job: StepJob) -> str | None:
    """Copy an earlier attempt's own files into this one, so a resumable step resumes: the
    attempt that published last to a shared folder (its metrics go with its checkpoints),
    else the newest. A copy, not a move: the earlier attempt may belong to a paused executor
    that still writes. What the attempts share (``marin.execution.shared``) is not copied.
    Returns what the step resumes from, for its outcome's note (None: nothing)."""
    folder = attempts_folder(job.output_path)
    earlier = sorted(n for n in storage.list_dir(folder) if n != job.run_id)
    chosen = adopted_attempt(earlier, published_by(storage, job.output_path))
    if chosen is not None:
        storage.copy_tree(f"{folder}/{chosen}", attempt_path(job.output_path, job.run_id))
    kept = [f"{name}/{max(entries)}" for name in shared_names(storage, job.output_path)
            if (entries := SharedFolder(job.output_path, name, job.run_id).published())]
    found = kept + ([f"the files of attempt {chosen}"] if chosen is not None else [])
    return f"resumed from {' and '.join(found)}" if found else None


def _acquire_or_finish(item: _Active, active: ActiveSteps) -> StepOutcome | None:
    """Take the lease (None), or the outcome when another executor settles the step first."""
    job, storage = item.job, item.storage
    started = time.monotonic()
    if active.acquire(item):
        return None  # the status is read again under the lease; no read before is needed
    while True:
        if active.cancelled.is_set():
            return StepOutcome(job.key, StepState.CANCELLED)
        done = _finished_elsewhere(job, storage.read(status_path(job.output_path)))
        if done is not None:
            return done
        if active.acquire(item):
            return None
        time.sleep(min(job.poll_interval, max(0.05, time.monotonic() - started)))


def _finished_elsewhere(job: StepJob, blob: Blob | None) -> StepOutcome | None:
    """The outcome when the status ``blob`` shows the step settled by another executor."""
    if blob is None:
        return None
    try:
        record = StatusRecord.decode(blob.data)
    except ValueError:
        return None
    planned = job.planned_status is not None and record.same_as(job.planned_status)
    if record.status is StepState.SUCCEEDED:
        return None if planned and job.rerun else StepOutcome(job.key, StepState.REUSED)
    if record.status is StepState.FAILED and not planned and not job.rerun:
        # It failed after this run was planned, so during this invocation: report it once.
        return StepOutcome(job.key, StepState.FAILED, 0.0,
                           f"failed in another executor ({record.run_id} on {record.host}): "
                           f"{record.error}", record.traceback)
    return None


def _write_status(item: _Active, status: StepState, error: str | None = None,
                  tb: str | None = None, outputs: list[str] | None = None,
                  run_id: str | None = None, fingerprint: str | None = None) -> None:
    leave_if_forked(item.owner)
    record = StatusRecord.now(status, run_id or item.job.run_id,
                              fingerprint if fingerprint is not None
                              else item.job.code_fingerprint, error, tb, outputs)
    item.storage.write(status_path(item.job.output_path), record.encode())


def _exit_code(e: BaseException) -> int:
    """The status a forked child leaves with when it raised ``e`` into the worker."""
    if isinstance(e, SystemExit):
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return 1
