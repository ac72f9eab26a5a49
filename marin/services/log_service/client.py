"""Write logs to marin's log service without waiting on the network.

    from marin.services.log_service.client import LogClient
    log = LogClient.connect("iris://marin?endpoint=/system/logger")
    log.write_batch([{"level": "INFO", "msg": "training started"},
                     {"level": "INFO", "msg": "step 0 completed", "step": 0, "loss": 3.2}])
    log.push_batch([{"level": "ERROR", "msg": "diverged"}])   # returns once committed
    log.close()                                               # flushes first

``write_batch`` validates each entry (a ``LogEntry``: level, msg, timestamp defaulting to
now, run, step, source, and any extra fields) and appends it to a bounded buffer; a
background thread batches, compresses and sends. While the service is unreachable the
thread retries with backoff, re-resolving the URL so a service restarted elsewhere is found.
When the buffer is full, ``when_full="drop_oldest"`` (the default: a training job never
stalls on logging) drops the oldest entries, counts them and reports the count to the
service once it is back; ``when_full="block"`` makes ``write_batch`` wait for room.

Design note: every batch carries this client's id and a sequence number, and the service
stores them in the same transaction as the entries, so a batch resent after a lost
acknowledgement is stored once: delivery is exactly once while the client lives.
"""

from __future__ import annotations

import itertools
import logging
import random
import sys
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import grpc

from marin.services import codec
from marin.services.channel import ServiceChannel, ServiceError
from marin.services.log_service.entries import (
    Columns,
    InvalidLogEntryError,
    LogEntry,
    check_shape,
    to_columns,
    validate,
)
from marin.services.proto import services_pb2 as pb
from marin.services.proto import services_pb2_grpc as pb_grpc

__all__ = ["InvalidLogEntryError", "LogClient", "LogEntry", "ServiceError", "WriteResult",
           "validate"]

_log = logging.getLogger("marin.services.client")
_BATCH_BYTES = 4 << 20
# Failures worth retrying: the service is down, moving, overloaded or hit a disk error.
_RETRY = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
          grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.UNKNOWN,
          grpc.StatusCode.INTERNAL, grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.ABORTED}


@dataclass(frozen=True)
class WriteResult:
    """What the service stored: ``accepted`` entries, and ``errors`` as
    (index, field, message) for entries it refused."""

    accepted: int
    errors: list[tuple[int, str, str]] = field(default_factory=list)


class LogClient:
    """A buffered, batching client of the log service. Options: ``buffer_entries`` (the
    bound), ``when_full`` ("drop_oldest" or "block"), ``batch_entries`` (most entries per
    request), ``linger`` (seconds to wait for a batch to fill), ``run`` and ``source``
    (defaults for entries that name none)."""

    def __init__(self, url: str, *, buffer_entries: int = 100_000,
                 when_full: Literal["drop_oldest", "block"] = "drop_oldest",
                 batch_entries: int = 10_000, linger: float = 0.01, run: str = "",
                 source: str = "", request_timeout: float = 10.0):
        if when_full not in ("drop_oldest", "block"):
            raise ValueError(f"when_full={when_full!r}: use 'drop_oldest' or 'block'")
        if buffer_entries < 1 or batch_entries < 1:
            raise ValueError("buffer_entries and batch_entries must be at least 1")
        self.url = url
        self._channel = ServiceChannel(url, pb_grpc.LogServiceStub)
        self.buffer_entries, self.when_full = buffer_entries, when_full
        self.batch_entries, self.linger = batch_entries, linger
        self.run, self.source, self.request_timeout = run, source, request_timeout
        self.client_id = uuid.uuid4().hex
        self._seq = 0
        self._seq_lock = threading.Lock()
        # Chunks of (the caller's entries, time of its call); _queued counts their entries.
        self._buffer: deque[tuple[list, float]] = deque()
        self._queued = 0
        self._cond = threading.Condition(threading.Lock())
        self._enqueued = self._settled = 0
        self._urgent = 0
        self._closing = self._closed = False
        self._close_deadline: float | None = None
        self.sent = self.dropped = self.rejected = self.invalid = self.retries = 0
        self._unreported_drops = 0
        self._sender = threading.Thread(target=self._send_loop, daemon=True,
                                        name="marin-log-sender")
        self._sender.start()

    @classmethod
    def connect(cls, url: str, **options: Any) -> LogClient:
        """A client of the service at ``url`` (iris://, http://host:port or host:port).
        Nothing is sent yet: a service that is down now gets the entries when it is up."""
        return cls(url, **options)

    # -- writing -------------------------------------------------------------------------
    def write_batch(self, entries: Iterable[Mapping[str, Any] | LogEntry]) -> None:
        """Buffer ``entries`` (dicts or ``LogEntry``); never waits on the network.

        Raises ``InvalidLogEntryError`` at once only when ``entries`` is not a list of
        entries; each entry is validated later by the background thread, and one that fails
        is counted (``stats()["invalid"]``), logged, and reported to the service as a
        WARNING entry. Entries without a timestamp get this call's time. The dicts are read
        later: do not change them after the call."""
        items = check_shape(entries)
        if not items:
            return
        now = time.time()
        with self._cond:
            if self._closing:
                raise RuntimeError("write_batch on a closed LogClient")
            was_idle = not self._buffer
            if self.when_full == "block":
                self._append_blocking(items, now)
            else:
                overflow = self._queued + len(items) - self.buffer_entries
                if overflow > 0:
                    items = self._drop_oldest(overflow, items)
                self._buffer.append((items, now))
                self._queued += len(items)
            self._enqueued += len(items)
            if was_idle or self._queued >= self.batch_entries:
                self._cond.notify_all()

    def _append_blocking(self, items: list, now: float) -> None:
        while items:
            while self._queued >= self.buffer_entries:
                self._cond.notify_all()
                self._cond.wait()
            room = self.buffer_entries - self._queued
            piece, items = items[:room], items[room:]
            self._buffer.append((piece, now))
            self._queued += len(piece)

    def _drop_oldest(self, overflow: int, items: list) -> list:
        """Make room for ``items`` by dropping the oldest entries (the call's own first,
        when it alone exceeds the buffer); returns what of ``items`` is kept."""
        dropped = 0
        if len(items) > self.buffer_entries:
            dropped, items = len(items) - self.buffer_entries, items[-self.buffer_entries:]
            overflow -= dropped
        while overflow > 0 and self._buffer:
            chunk, when = self._buffer[0]
            if len(chunk) <= overflow:
                self._buffer.popleft()
                n = len(chunk)
            else:
                self._buffer[0] = (chunk[overflow:], when)
                n = overflow
            overflow -= n
            self._queued -= n
            dropped += n
        if self.dropped == 0:
            _log.warning("log buffer of %d entries is full (service %s unreachable?); "
                         "dropping the oldest entries", self.buffer_entries, self.url)
        self.dropped += dropped
        self._unreported_drops += dropped
        self._settled += dropped
        return items

    def push_batch(self, entries: Iterable[Mapping[str, Any] | LogEntry],
                   timeout: float = 30.0) -> WriteResult:
        """Validate ``entries`` (``InvalidLogEntryError`` on the first bad one, nothing
        sent), send them now and return once the service has committed them."""
        rows = validate(entries, self.run, self.source)
        request = pb.WriteRequest(client_id=self.client_id, seq=self._next_seq(),
                                  payload=codec.encode(rows), count=len(rows))
        until = time.monotonic() + timeout
        reply = self._send(request, lambda: until)
        if reply is None:
            raise ServiceError(f"{self.url}: {len(rows)} entries not acknowledged within "
                               f"{timeout:g}s; is the service running? see "
                               "`marin services status`")
        return _result(reply)

    def _next_seq(self) -> int:
        with self._seq_lock:
            self._seq += 1
            return self._seq

    # -- the sender thread ---------------------------------------------------------------
    def _send_loop(self) -> None:
        while True:
            taken = self._take_batch()
            if taken is None:
                return
            chunks, count, drops = taken
            cols, invalid = to_columns(chunks, self.run, self.source)
            for part in _parts(cols):
                self._deliver(part, count=True)
            notes = self._notes(drops, invalid)
            if notes:  # reported in the stream itself, once the service is reachable
                self._deliver(Columns(*map(list, zip(*notes, strict=True))), count=False)
            with self._cond:
                self.invalid += len(invalid)
                self._settled += count
                self._cond.notify_all()

    def _deliver(self, part: Columns, count: bool) -> None:
        request = pb.WriteRequest(client_id=self.client_id, seq=self._next_seq(),
                                  payload=codec.encode_columns(*part), count=len(part.msg))
        reply = self._send(request, lambda: self._close_deadline)
        if reply is not None:
            for err in reply.errors[:3]:
                _log.warning("log service refused an entry: %s: %s", err.field, err.message)
        if count:
            with self._cond:
                if reply is None:
                    self.dropped += request.count
                else:
                    self.sent += reply.accepted
                    self.rejected += len(reply.errors)

    def _notes(self, drops: int, invalid: list[str]) -> list[codec.WireRow]:
        notes: list[codec.WireRow] = []
        if drops:
            notes.append((time.time(), "WARNING", f"log client {self.client_id} dropped "
                          f"{drops} entries: its buffer of {self.buffer_entries} was full",
                          self.run, None, "marin.services.client", ""))
        if invalid:
            if self.invalid < 3:
                _log.warning("log entry refused: %s", invalid[0])
            notes.append((time.time(), "WARNING", f"log client {self.client_id} refused "
                          f"{len(invalid)} invalid entries; first: {invalid[0]}"[:4096],
                          self.run, None, "marin.services.client", ""))
        return notes

    def _take_batch(self) -> tuple[list[tuple[list, float]], int, int] | None:
        with self._cond:
            while not self._buffer:
                if self._closing:
                    return None
                self._cond.wait()
            if self._queued < self.batch_entries and not (self._closing or self._urgent):
                self._cond.wait(self.linger)
            chunks: list[tuple[list, float]] = []
            count, buf = 0, self._buffer
            while buf and count < self.batch_entries:
                chunk, when = buf.popleft()
                room = self.batch_entries - count
                if len(chunk) > room:
                    buf.appendleft((chunk[room:], when))
                    chunk = chunk[:room]
                chunks.append((chunk, when))
                count += len(chunk)
            self._queued -= count
            drops, self._unreported_drops = self._unreported_drops, 0
            self._cond.notify_all()
            return chunks, count, drops

    def _send(self, request: pb.WriteRequest, deadline: Callable[[], float | None]
              ) -> pb.WriteResponse | None:
        """Send until acknowledged (the reply), or None once ``deadline()`` passes."""
        delay = 0.05
        while True:
            try:
                return self._channel.call("Write", request, timeout=self.request_timeout,
                                          attempts=1)
            except ServiceError as e:
                if e.code not in _RETRY:
                    # The whole batch was refused (malformed or over a cap): retrying
                    # cannot help. Report it; the entries are counted as rejected.
                    _log.error("log service refused a batch of %d entries: %s",
                               request.count, e)
                    return pb.WriteResponse(accepted=0, errors=[
                        pb.EntryError(index=i, field="batch", message=str(e))
                        for i in range(request.count)])
            self.retries += 1
            until = deadline()
            if until is not None and time.monotonic() + delay > until:
                return None
            time.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 2.0)

    # -- flushing and closing ------------------------------------------------------------
    def flush(self, timeout: float | None = None) -> bool:
        """Wait until everything written so far is acknowledged (or dropped); False on
        timeout."""
        with self._cond:
            target = self._enqueued
            self._urgent += 1
            self._cond.notify_all()
            try:
                return self._cond.wait_for(lambda: self._settled >= target, timeout)
            finally:
                self._urgent -= 1

    @property
    def buffered(self) -> int:
        with self._cond:
            return self._enqueued - self._settled

    def close(self, timeout: float = 10.0) -> None:
        """Flush for up to ``timeout`` seconds, then stop; reports entries it could not
        deliver on stderr."""
        if self._closed:
            return
        self._closed = True
        flushed = self.flush(timeout)
        with self._cond:
            self._closing = True
            self._close_deadline = time.monotonic() + (0 if not flushed else 1.0)
            self._cond.notify_all()
        self._sender.join(timeout=max(1.0, timeout))
        self._channel.close()
        lost = self.dropped + (self._enqueued - self._settled)
        if lost:
            print(f"marin: log client for {self.url} could not deliver {lost} entries "
                  f"(dropped when the buffer was full or the service stayed unreachable)",
                  file=sys.stderr)

    def __enter__(self) -> LogClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def stats(self) -> dict[str, int]:
        """``sent`` (acknowledged), ``buffered``, ``dropped`` (buffer full, or undeliverable
        at close), ``invalid`` (failed validation in this client), ``rejected`` (refused by
        the service), ``retries``."""
        return {"sent": self.sent, "buffered": self.buffered, "dropped": self.dropped,
                "invalid": self.invalid, "rejected": self.rejected, "retries": self.retries}


def _parts(cols: Columns) -> list[Columns]:
    """``cols`` cut into requests of at most about ``_BATCH_BYTES`` uncompressed."""
    sizes = list(itertools.accumulate(map(len, cols.msg), initial=0))
    extra = sum(map(len, cols.extra))
    if sizes[-1] + extra + 64 * len(cols.msg) <= _BATCH_BYTES:
        return [cols]
    parts, start, total = [], 0, 0
    for i, e in enumerate(cols.extra):
        total += sizes[i + 1] - sizes[i] + len(e) + 64
        if total > _BATCH_BYTES and i > start:
            parts.append(Columns(*(c[start:i] for c in cols)))
            start, total = i, sizes[i + 1] - sizes[i] + len(e) + 64
    parts.append(Columns(*(c[start:] for c in cols)))
    return parts


def _result(reply: pb.WriteResponse) -> WriteResult:
    return WriteResult(reply.accepted, [(e.index, e.field, e.message) for e in reply.errors])
