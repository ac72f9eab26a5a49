"""Leases: which executor is running a step right now.

    lease = Lease(storage, lease_path(output), owner="run-1a2b", ttl=60)
    if lease.try_acquire():          # exclusive create, or take-over of a stale lease
        lease.start_heartbeat()      # renews every ttl/3 with compare-and-swap
        ...
        if lease.renew():            # still ours: safe to write SUCCESS
            ...
        lease.release()

A lease is stale when its holder has not renewed it for ``ttl`` seconds (by the reader's
clock, so clocks must agree to well within ``ttl``). Whoever swaps a stale lease first owns
it; the old holder's next renewal fails, and a holder that lost its lease never writes
SUCCESS.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any

from marin.storage import Storage


@dataclass(frozen=True)
class LeaseRecord:
    owner: str
    host: str
    pid: int
    renewed_at: float
    ttl: float
    renewals: int = 0

    def encode(self) -> bytes:
        return json.dumps(asdict(self)).encode()

    @classmethod
    def decode(cls, raw: bytes) -> LeaseRecord | None:
        """The record, or None when ``raw`` is not a lease (treated as stale)."""
        try:
            data = json.loads(raw)
            return cls(str(data["owner"]), str(data["host"]), int(data["pid"]),
                       float(data["renewed_at"]), float(data["ttl"]), int(data["renewals"]))
        except (ValueError, KeyError, TypeError):
            return None

    def is_stale(self, now: float | None = None) -> bool:
        return (time.time() if now is None else now) > self.renewed_at + self.ttl

    def describe(self) -> str:
        age = max(0.0, time.time() - self.renewed_at)
        return f"{self.owner} on {self.host} (pid {self.pid}), renewed {age:.0f}s ago"


def lease_is_live(raw: bytes | None) -> LeaseRecord | None:
    """The holder's record when ``raw`` is a lease that is not stale."""
    if raw is None:
        return None
    record = LeaseRecord.decode(raw)
    return record if record is not None and not record.is_stale() else None


class Lease:
    def __init__(self, storage: Storage, path: str, owner: str, ttl: float):
        if ttl <= 0:
            raise ValueError(f"lease ttl must be positive, got {ttl}")
        self.storage = storage
        self.path = path
        self.owner = owner
        self.ttl = ttl
        self.took_over_from: LeaseRecord | None = None
        self.holder: LeaseRecord | None = None
        self._token: Any = None
        self._renewals = 0
        self._lock = threading.Lock()
        self._lost = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def held(self) -> bool:
        return self._token is not None and not self._lost.is_set()

    @property
    def lost(self) -> bool:
        return self._lost.is_set()

    def try_acquire(self) -> bool:
        """Take the lease if it is free or stale; False while another holder keeps it."""
        token = self.storage.create_if_absent(self.path, self._record())
        if token is not None:
            self._token = token
            return True
        current = self.storage.read(self.path)
        if current is None:  # released between our create and our read
            return self.try_acquire()
        record = LeaseRecord.decode(current.data)
        if record is not None and not record.is_stale():
            self.holder = record
            return False
        token = self.storage.compare_and_swap(self.path, current.token, self._record())
        if token is None:
            return False
        self._token = token
        self.took_over_from = record
        return True

    def renew(self) -> bool:
        """Extend the lease; False (and the lease counts as lost) if someone took it."""
        with self._lock:
            if self._token is None or self._lost.is_set():
                return False
            self._renewals += 1
            token = self.storage.compare_and_swap(self.path, self._token, self._record())
            if token is None:
                self._lost.set()
                return False
            self._token = token
            return True

    def start_heartbeat(self) -> None:
        self._thread = threading.Thread(target=self._beat, name=f"lease:{self.path}",
                                        daemon=True)
        self._thread.start()

    def release(self) -> None:
        """Stop renewing and delete the lease if it is still ours."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=self.ttl)
        with self._lock:
            if self._token is not None and not self._lost.is_set():
                try:
                    self.storage.delete_if_unchanged(self.path, self._token)
                finally:
                    self._token = None
            self._lost.set()  # a released lease can never write SUCCESS

    def _beat(self) -> None:
        interval = self.ttl / 3
        while not self._stop.wait(interval):
            try:
                if not self.renew():
                    return
            except OSError:
                continue  # a transient storage error; the next beat retries

    def _record(self) -> bytes:
        return LeaseRecord(self.owner, socket.gethostname(), os.getpid(), time.time(),
                           self.ttl, self._renewals).encode()
