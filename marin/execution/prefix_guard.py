"""Who may delete under a prefix: one ``marin gc`` at a time, never while an executor plans.

    with planning_guard(prefix, storage) as guard:   # waits while a gc holds the prefix
        plan = make_plan(...)                        # "skip" on an output gc must keep
        progress = guard.released_after_start(record_invocation(prefix, storage, progress))

    lease = take_prefix_for_gc(prefix, storage, owner="gc-1a2b")   # GcRefused if another
    ...                                                               # gc runs
    lease.release()

An executor plans "skip" on an output before its invocation record names that output; gc,
which keeps what invocation records name, could delete the output in between. So each
executor holds a planning lease (``.marin/planning/<id>``) from before it plans until its
record is written, and gc holds ``.marin/gc.lease`` while it decides and deletes. Each side
writes its own lease first and then reads the other's: whichever of the two writes second
sees the first and waits (the executor releases its planning lease and tries again once the
gc is done; gc waits for the planning leases to go, up to ``wait`` seconds). Both are leases
with a heartbeat, so a killed executor or gc holds nothing for longer than the ttl.
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any

from marin.execution.ids import time_ordered_id
from marin.execution.lease import Lease, LeaseRecord
from marin.storage import Storage, StorageError

__all__ = ["GcRefused", "gc_lease_path", "planning_guard", "take_prefix_for_gc"]

logger = logging.getLogger("marin.executor")
GC_LEASE = ".marin/gc.lease"
PLANNING = ".marin/planning"
TTL = 30.0


class GcRefused(RuntimeError):
    """Another gc holds the prefix, or an executor kept planning; the message names it."""


def gc_lease_path(prefix: str) -> str:
    return f"{prefix.rstrip('/')}/{GC_LEASE}"


def _live(storage: Storage, path: str) -> LeaseRecord | None:
    blob = storage.read(path)
    record = None if blob is None else LeaseRecord.decode(blob.data)
    return record if record is not None and not record.is_stale() else None


class _Guard:
    def __init__(self, prefix: str, storage: Storage, poll: float):
        self.prefix, self.storage, self.poll = prefix.rstrip("/"), storage, poll
        self.id = time_ordered_id()
        self.lease: Lease | None = None

    def __enter__(self) -> _Guard:
        try:
            while True:
                lease = Lease(self.storage, f"{self.prefix}/{PLANNING}/{self.id}", self.id, TTL)
                if lease.try_acquire():
                    lease.start_heartbeat()
                    holder = _live(self.storage, gc_lease_path(self.prefix))
                    if holder is None:
                        self.lease = lease
                        return self
                    lease.release()
                    self.storage.delete_files([lease.path], self.prefix)
                    logger.info("waiting for marin gc on %s (%s)", self.prefix,
                                holder.describe())
                time.sleep(self.poll)
        except StorageError as e:  # a read-only prefix: nothing can be deleted there either
            logger.debug("no planning lease on %s: %s", self.prefix, e)
            return self

    def release(self) -> None:
        if self.lease is not None:
            self.lease.release()
            with contextlib.suppress(StorageError):  # and the folders made for it, if empty
                self.storage.delete_files([self.lease.path], self.prefix)
            self.lease = None

    def __exit__(self, *exc: object) -> None:
        self.release()

    def released_after_start(self, progress: Any) -> Any:
        """``progress``, releasing this guard once its ``invocation_started`` has returned (the
        invocation record naming every planned step is written by then)."""
        return _ReleaseAfterStart(progress, self)


class _ReleaseAfterStart:
    def __init__(self, inner: Any, guard: _Guard):
        self._inner, self._guard = inner, guard

    def invocation_started(self, *args: Any) -> None:
        try:
            self._inner.invocation_started(*args)
        finally:
            self._guard.release()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def planning_guard(prefix: str, storage: Storage, poll: float = 0.5) -> _Guard:
    return _Guard(prefix, storage, poll)


def take_prefix_for_gc(prefix: str, storage: Storage, owner: str, wait: float = 60.0,
                       poll: float = 0.2) -> Lease:
    """The gc lease of ``prefix``, once no executor is planning there."""
    path = gc_lease_path(prefix)
    lease = Lease(storage, path, owner, TTL)
    if not lease.try_acquire():
        holder = _live(storage, path)
        who = holder.describe() if holder is not None else "a gc that is ending"
        raise GcRefused(f"another marin gc runs on {prefix}: {who}; wait for it to finish "
                        f"(its lease {path} expires {TTL:.0f}s after its last renewal)")
    lease.start_heartbeat()
    folder = f"{prefix.rstrip('/')}/{PLANNING}"
    deadline = time.monotonic() + wait
    while True:
        planning = [r for r in (_live(storage, f"{folder}/{n}") for n in storage.list_dir(folder))
                    if r is not None]
        if not planning:
            return lease
        if time.monotonic() > deadline:
            lease.release()
            raise GcRefused(f"an executor kept planning on {prefix} for {wait:.0f}s "
                            f"({planning[0].describe()}); run gc again once it has started")
        time.sleep(poll)
