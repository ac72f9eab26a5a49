"""Write logs to marin's log service without waiting on the network.

    from marin.inference.client import LogClient
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

import json
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
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

from marin.services import codec
from marin.services.channel import ServiceChannel, ServiceError
from marin.services.proto import services_pb2 as pb
from marin.services.proto import services_pb2_grpc as pb_grpc

__all__ = ["InvalidLogEntryError", "LogClient", "LogEntry", "ServiceError", "WriteResult"]

_log = logging.getLogger("marin.services.client")
_LEVEL_ALIASES = {"WARN": "WARNING", "FATAL": "CRITICAL"}
_BATCH_BYTES = 4 << 20
# Failures worth retrying: the service is down, moving, overloaded or hit a disk error.
_RETRY = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
          grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.UNKNOWN,
          grpc.StatusCode.INTERNAL, grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.ABORTED}


class LogEntry(BaseModel):
    """One log entry. Extra fields (``loss=3.2``) are kept as a JSON object."""

    model_config = ConfigDict(extra="allow", frozen=True)

    level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = "INFO"
    msg: str = Field(max_length=64 << 10)
    timestamp: float = Field(default_factory=time.time, gt=0)
    run: str | None = Field(default=None, max_length=256)
    step: int | None = None
    source: str | None = Field(default=None, max_length=256)

    @field_validator("level", mode="before")
    @classmethod
    def _level(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            value = logging.getLevelName(value)
        if isinstance(value, str):
            value = value.upper()
            return _LEVEL_ALIASES.get(value, value)
        return value

    def wire(self, run: str = "", source: str = "") -> codec.WireRow:
        extra = self.model_extra
        return (self.timestamp, self.level, self.msg, self.run or run, self.step,
                self.source or source,
                json.dumps(extra, default=str, separators=(",", ":")) if extra else "")


_ENTRIES = TypeAdapter(list[LogEntry])


class InvalidLogEntryError(ValueError):
    """An entry failed validation; nothing of its call was buffered."""


@dataclass(frozen=True)
class WriteResult:
    """What the service stored: ``accepted`` entries, and ``errors`` as
    (index, field, message) for entries it refused."""

    accepted: int
    errors: list[tuple[int, str, str]] = field(default_factory=list)


def validate(entries: Iterable[Mapping[str, Any] | LogEntry], run: str = "", source: str = ""
             ) -> list[codec.WireRow]:
    items = entries if isinstance(entries, list) else list(entries)
    try:
        models = _ENTRIES.validate_python(items)
    except ValidationError as e:
        first = e.errors()[0]
        loc = first["loc"]
        where = f"entry {loc[0]}" + (f", field {'.'.join(map(str, loc[1:]))!r}"
                                     if len(loc) > 1 else "")
        raise InvalidLogEntryError(f"{where}: {first['msg']} (got {first.get('input')!r:.60})"
                                   f"; {e.error_count()} error(s) in the call, nothing "
                                   "was written") from None
    return [m.wire(run, source) for m in models]


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
        self._buffer: deque[codec.WireRow] = deque()
        self._cond = threading.Condition()
        self._enqueued = self._settled = 0
        self._urgent = 0
        self._closing = self._closed = False
        self._close_deadline: float | None = None
        self.sent = self.dropped = self.rejected = self.retries = 0
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
        """Validate and buffer ``entries``; never waits on the network."""
        rows = validate(entries, self.run, self.source)
        with self._cond:
            if self._closing:
                raise RuntimeError("write_batch on a closed LogClient")
            if self.when_full == "block":
                for row in rows:
                    while len(self._buffer) >= self.buffer_entries:
                        self._cond.wait()
                    self._buffer.append(row)
            else:
                overflow = len(self._buffer) + len(rows) - self.buffer_entries
                if overflow > 0:
                    self._drop_oldest(overflow, len(rows))
                self._buffer.extend(rows[-self.buffer_entries:])
            self._enqueued += len(rows)
            self._cond.notify_all()

    def _drop_oldest(self, overflow: int, incoming: int) -> None:
        from_buffer = min(overflow, len(self._buffer))
        for _ in range(from_buffer):
            self._buffer.popleft()
        dropped = from_buffer + max(0, incoming - self.buffer_entries)
        if self.dropped == 0:
            _log.warning("log buffer of %d entries is full (service %s unreachable?); "
                         "dropping the oldest entries", self.buffer_entries, self.url)
        self.dropped += dropped
        self._unreported_drops += dropped
        self._settled += dropped

    def push_batch(self, entries: Iterable[Mapping[str, Any] | LogEntry],
                   timeout: float = 30.0) -> WriteResult:
        """Send ``entries`` now and return once the service has committed them."""
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
            batch, drops = taken
            if drops:  # reported in the stream itself, once the service is reachable
                batch.append((time.time(), "WARNING", f"log client {self.client_id} dropped "
                              f"{drops} entries: its buffer of {self.buffer_entries} was full",
                              self.run, None, "marin.services.client", ""))
            request = pb.WriteRequest(client_id=self.client_id, seq=self._next_seq(),
                                      payload=codec.encode(batch), count=len(batch))
            reply = self._send(request, lambda: self._close_deadline)
            own = len(batch) - (1 if drops else 0)
            with self._cond:
                if reply is None:
                    self.dropped += own
                else:
                    self.sent += min(own, reply.accepted)
                    self.rejected += len(reply.errors)
                    for err in reply.errors[:3]:
                        _log.warning("log service refused an entry: %s: %s", err.field,
                                     err.message)
                self._settled += own
                self._cond.notify_all()

    def _take_batch(self) -> tuple[list[codec.WireRow], int] | None:
        with self._cond:
            while not self._buffer:
                if self._closing:
                    return None
                self._cond.wait()
            if len(self._buffer) < self.batch_entries and not (self._closing or self._urgent):
                self._cond.wait(self.linger)
            batch: list[codec.WireRow] = []
            size = 0
            buf = self._buffer
            while buf and len(batch) < self.batch_entries and size < _BATCH_BYTES:
                row = buf.popleft()
                size += len(row[2]) + len(row[6]) + 64
                batch.append(row)
            drops, self._unreported_drops = self._unreported_drops, 0
            self._cond.notify_all()
            return batch, drops

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
        return {"sent": self.sent, "buffered": self.buffered, "dropped": self.dropped,
                "rejected": self.rejected, "retries": self.retries}


def _result(reply: pb.WriteResponse) -> WriteResult:
    return WriteResult(reply.accepted, [(e.index, e.field, e.message) for e in reply.errors])
