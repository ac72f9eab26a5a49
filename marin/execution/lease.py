"""Leases: which executor is running a step right now.

    lease = Lease(storage, lease_path(output), owner="run-1a2b", ttl=60)
    if lease.try_acquire():          # exclusive create, or take-over of a stale lease
        lease.start_heartbeat()      # renews every ttl/10 with compare-and-swap
        ...
        if lease.renew():            # still ours: safe to commit and write SUCCESS
            ...
        lease.release()

A lease may be taken over when its holder has not renewed it for ``ttl`` seconds (by the
reader's clock, so clocks must agree to well within ``ttl``), at once when its holder ran on
this machine (same host name and boot id) and that process is gone, and when its renewal
lies more than ``ttl`` in the future (clock skew or a hand edit). Whoever swaps it first
owns it; the old holder's next renewal fails, and a holder that lost its lease never
commits. Only the process that created a ``Lease`` takes, renews or releases it: in a
forked copy of that process every operation refuses (``marin.execution.processes``).
Renewing ten times per ttl lets a step hold the GIL in one long C call for up to nine
tenths of the ttl before it risks a take-over.

``clock`` (default ``time.time``) is the wall clock that stamps renewals and judges
staleness; tests pass a fake one and advance it instead of sleeping. Staleness compares
stamps written by different machines, so it is wall-clock time, while the heartbeat's
cadence is measured with ``time.monotonic``.

Design note: the heartbeat starts lazily. ``start_heartbeat`` only books the first renewal,
due one tenth of the ttl later, with one scheduler thread per process; the lease's own
renewal thread starts when that time comes. The renewals happen when they always did, but a
step that finishes sooner (most steps of a large sweep) never starts a thread.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import json
import math
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from marin.execution.processes import is_owner, process_alive
from marin.storage import Storage

HEARTBEATS_PER_TTL = 10


@dataclass(frozen=True)
class LeaseRecord:
    owner: str
    host: str
    pid: int
    renewed_at: float
    ttl: float
    renewals: int = 0
    boot_id: str = ""

    def encode(self) -> bytes:
        return json.dumps({f.name: getattr(self, f.name) for f in fields(self)}).encode()

    @classmethod
    def decode(cls, raw: bytes) -> LeaseRecord | None:
        """The record, or None when ``raw`` is not a lease (treated as stale)."""
        try:
            data = json.loads(raw)
            record = cls(str(data["owner"]), str(data["host"]), int(data["pid"]),
                         float(data["renewed_at"]), float(data["ttl"]), int(data["renewals"]),
                         str(data.get("boot_id", "")))
        except (ValueError, KeyError, TypeError):
            return None
        if not (math.isfinite(record.renewed_at) and math.isfinite(record.ttl)):
            return None  # a lease that could never expire is no lease
        return record

    def takeover_reason(self, now: float | None = None) -> str | None:
        """Why another executor may take this lease now (None while it is live): "stale"
        (not renewed for ttl), "future" (renewed more than ttl ahead of this clock), or
        "dead" (its holder's process on this machine is gone)."""
        now = time.time() if now is None else now
        if now > self.renewed_at + self.ttl:
            return "stale"
        if self.renewed_at > now + self.ttl:
            return "future"
        if self.holder_is_dead():
            return "dead"
        return None

    def is_stale(self, now: float | None = None) -> bool:
        return self.takeover_reason(now) is not None

    def holder_is_dead(self) -> bool:
        """True only when the holder ran on this very boot of this machine and its process
        no longer exists; False whenever that cannot be known."""
        return (bool(self.boot_id) and self.boot_id == boot_id()
                and self.host == host_name() and self.pid != os.getpid()
                and not process_alive(self.pid))

    def describe(self, now: float | None = None) -> str:
        age = (time.time() if now is None else now) - self.renewed_at
        when = f"{age:.0f}s ago" if age >= 0 else f"{-age:.0f}s in the future"
        return f"{self.owner} on {self.host} (pid {self.pid}), renewed {when}"


def takeover_note(record: LeaseRecord, reason: str | None) -> str:
    """How a take-over is reported, in the dry run and after the run."""
    if reason == "dead":
        return f"took over at once the lease of {record.describe()}: that process is gone"
    if reason == "future":
        return (f"took over the lease of {record.describe()}: a renewal more than its ttl "
                "ahead of this clock (clock skew or a hand edit)")
    return f"took over the stale lease of {record.describe()}"


@functools.lru_cache(maxsize=1)
def host_name() -> str:
    """This machine's host name, read once per process (records are written by the
    thousand)."""
    return socket.gethostname()


@functools.lru_cache(maxsize=1)
def boot_id() -> str:
    """This machine's boot id (Linux), or "" where there is none."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return ""


class Lease:
    def __init__(self, storage: Storage, path: str, owner: str, ttl: float,
                 clock: Callable[[], float] = time.time):
        if not (math.isfinite(ttl) and ttl > 0):
            raise ValueError(f"lease ttl must be a positive, finite number of seconds, got {ttl}")
        self.storage = storage
        self.path = path
        self.owner = owner
        self.ttl = ttl
        self.clock = clock
        self.took_over_from: LeaseRecord | None = None
        self.took_over_reason: str | None = None
        self.holder: LeaseRecord | None = None
        self._token: Any = None
        self._written = 0.0  # time.monotonic() just before the record in force was written
        self._renewals = 0
        self._lock = threading.Lock()
        self._lost = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._owner = os.getpid()  # a forked copy of this process holds no lease

    @property
    def held(self) -> bool:
        return self._token is not None and not self._lost.is_set()

    @property
    def lost(self) -> bool:
        return self._lost.is_set()

    def try_acquire(self) -> bool:
        """Take the lease if it is free or stale; False while another holder keeps it."""
        if not is_owner(self._owner):
            return False
        written = time.monotonic()
        token = self.storage.create_if_absent(self.path, self._record())
        if token is not None:
            self._token, self._written = token, written
            return True
        current = self.storage.read(self.path)
        if current is None:  # released between our create and our read
            return self.try_acquire()
        record = LeaseRecord.decode(current.data)
        reason = None if record is None else record.takeover_reason(self.clock())
        if record is not None and reason is None:
            self.holder = record
            return False
        written = time.monotonic()
        token = self.storage.compare_and_swap(self.path, current.token, self._record())
        if token is None:
            return False
        self._token, self._written = token, written
        self.took_over_from = record
        self.took_over_reason = reason
        return True

    def renew(self) -> bool:
        """Extend the lease; False (and the lease counts as lost) if someone took it."""
        with self._lock:
            if self._token is None or self._lost.is_set() or not is_owner(self._owner):
                return False
            self._renewals += 1
            written = time.monotonic()
            token = self.storage.compare_and_swap(self.path, self._token, self._record())
            if token is None:
                self._lost.set()
                return False
            self._token, self._written = token, written
            return True

    def confirm(self) -> bool:
        """True if the lease is still ours with at least half its ttl ahead, as a commit
        needs; False (and the lease counts as lost) if someone took it.

        A lease written less than ttl/2 ago is checked by reading it (its token unchanged
        means nobody took it over, and nobody may for ttl/2 more); an older one is renewed.
        Design note: reading rather than rewriting keeps a short step's lease file as it
        was created, and on ext4 deleting a file that was just replaced by a rename waits
        for its data to be written back (milliseconds, most of a trivial step's cost)."""
        with self._lock:
            if self._token is None or self._lost.is_set() or not is_owner(self._owner):
                return False
            if time.monotonic() - self._written < self.ttl / 2:
                current = self.storage.read(self.path)
                if current is None or current.token != self._token:
                    self._lost.set()
                    return False
                return True
        return self.renew()

    def start_heartbeat(self) -> None:
        """Renew every ttl/10 from now on, in a thread started when the first renewal is
        due."""
        _SCHEDULER.book(self, time.monotonic() + self.ttl / HEARTBEATS_PER_TTL)

    def release(self) -> None:
        """Stop renewing and delete the lease if it is still ours."""
        if not is_owner(self._owner):
            return  # a forked copy: the lease is its parent's to release
        self._stop.set()
        with self._lock:
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=self.ttl)
        with self._lock:
            if self._token is not None and not self._lost.is_set():
                try:
                    self.storage.delete_if_unchanged(self.path, self._token)
                finally:
                    self._token = None
            self._lost.set()  # a released lease can never write SUCCESS

    def _start_beating(self) -> None:
        """Called when the first renewal is due: start the renewal thread, unless the lease
        was released or lost in the meantime."""
        with self._lock:
            if self._stop.is_set() or self._lost.is_set() or self._thread is not None:
                return
            self._thread = threading.Thread(target=self._beat, name=f"lease:{self.path}",
                                            daemon=True)
            self._thread.start()

    def _beat(self) -> None:
        interval = self.ttl / HEARTBEATS_PER_TTL
        while True:  # the first renewal is due on entry
            try:
                if not self.renew():
                    return
            except OSError:
                pass  # a transient storage error; the next beat retries
            if self._stop.wait(interval):
                return

    def _record(self) -> bytes:
        return LeaseRecord(self.owner, host_name(), os.getpid(), self.clock(),
                           self.ttl, self._renewals, boot_id()).encode()


class _HeartbeatScheduler:
    """One daemon thread per process that starts each lease's renewal thread when its first
    renewal is due. After a fork the child starts its own thread on first use."""

    def __init__(self) -> None:
        self._reset()
        os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        self._cond = threading.Condition()
        self._due: list[tuple[float, int, Lease]] = []
        self._order = itertools.count()
        self._thread: threading.Thread | None = None

    def book(self, lease: Lease, due: float) -> None:
        with self._cond:
            heapq.heappush(self._due, (due, next(self._order), lease))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="lease-heartbeats",
                                                daemon=True)
                self._thread.start()
            elif self._due[0][2] is lease:  # due before all others: wake the thread
                self._cond.notify()

    def _run(self) -> None:
        cond = self._cond
        while True:
            with cond:
                while not self._due or self._due[0][0] > time.monotonic():
                    cond.wait(None if not self._due else self._due[0][0] - time.monotonic())
                lease = heapq.heappop(self._due)[2]
            lease._start_beating()


_SCHEDULER = _HeartbeatScheduler()
