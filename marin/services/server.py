"""The log and KV services, each a gRPC server in its own process.

    python -m marin.services.serve logger --data /var/marin/logger --cluster marin
    marin services serve kv --port 7001 --data /var/marin/kv      # the same, from the CLI

A service listens on 127.0.0.1 unless told otherwise; on any other address it refuses to
start without a token and then refuses every call that does not carry it
(``authorization: Bearer TOKEN``). With ``cluster`` it registers its endpoint
(``/system/logger`` or ``/system/kv``) once it listens and removes it when it stops. Batches
and messages are capped; an entry that fails validation gets its own error in the reply
while the rest of its batch is stored.
"""

from __future__ import annotations

import gc
import math
import os
import signal
import socket
import sqlite3
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import grpc

from marin.services import codec
from marin.services.checks import Caps, rows_of
from marin.services.endpoints import Endpoint, EndpointRegistry
from marin.services.interceptors import RequestCheck, TokenCheck
from marin.services.kv_service.store import KVStore
from marin.services.log_service.store import (
    LEVEL_NAMES,
    LEVELS,
    InvalidBatchError,
    LogQuery,
    LogStore,
    StoreClosedError,
    check_batch_id,
)
from marin.services.proto import services_pb2 as pb
from marin.services.proto import services_pb2_grpc as pb_grpc

ENDPOINTS = {"logger": "/system/logger", "kv": "/system/kv"}
LOOPBACK_DEFAULT = {"127.0.0.1", "localhost", "::1"}
VERSION = "1"


@dataclass(frozen=True)
class ServiceConfig:
    """How one service runs.

    Fields: ``kind`` ("logger" or "kv"); ``data`` (its storage folder); ``host``/``port``
    (port 0 picks a free one); ``cluster`` (register under this cluster's registry,
    ``clusters_root`` overriding $MARIN_CLUSTERS); ``token`` (required off 127.0.0.1);
    ``advertise`` (the host written to the registry, default: the bound host, or this
    machine's name for 0.0.0.0); caps: ``max_message_bytes`` (one request on the wire),
    ``max_batch_entries``, ``max_batch_bytes`` (uncompressed), ``max_msg_chars``,
    ``max_field_chars`` (run, source, level), ``max_extra_chars``, ``max_key_chars``,
    ``max_value_bytes``; ``retention_days`` (log entries older than this are deleted; 0
    keeps everything); ``synchronous`` ("full": fsync per group commit, or "normal")."""

    kind: str
    data: str
    host: str = "127.0.0.1"
    port: int = 0
    cluster: str | None = None
    clusters_root: str | None = None
    token: str | None = None
    advertise: str | None = None
    max_message_bytes: int = 16 << 20
    max_batch_entries: int = 100_000
    max_batch_bytes: int = 64 << 20
    max_msg_chars: int = 64 << 10
    max_field_chars: int = 256
    max_extra_chars: int = 64 << 10
    max_key_chars: int = 1024
    max_value_bytes: int = 1 << 20
    retention_days: float = 30.0
    synchronous: str = "full"
    workers: int = 16

    @property
    def caps(self) -> Caps:
        return Caps(max_msg_chars=self.max_msg_chars, max_field_chars=self.max_field_chars,
                    max_extra_chars=self.max_extra_chars)


class ServiceConfigError(ValueError):
    pass


def _log_query(request: pb.QueryRequest, context: grpc.ServicerContext) -> LogQuery:
    """The store's query for a request; INVALID_ARGUMENT for a filter out of range."""
    min_level = 0
    if request.min_level:
        min_level = LEVELS.get(request.min_level.upper(), -1)
        if min_level < 0:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          f"unknown level {request.min_level!r}; use one of "
                          f"{', '.join(LEVELS)}")
    if request.after_id < 0:
        context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                      f"after_id {request.after_id} is negative; use 0 for the first entry")
    if math.isnan(request.since) or math.isnan(request.until):
        context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                      "since and until must be epoch seconds, not NaN")
    return LogQuery(run=request.run or None,
                    step=request.step if request.HasField("step") else None,
                    min_level=min_level, since=request.since or None,
                    until=request.until or None, grep=request.grep or None,
                    after_id=request.after_id, limit=min(request.limit or 1000, 100_000),
                    newest=request.newest)


def _store_call(context: grpc.ServicerContext, fn, *args):
    """``fn(*args)`` with the store's failures as status codes a client can act on."""
    try:
        return fn(*args)
    except InvalidBatchError as e:
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
    except StoreClosedError:
        context.abort(grpc.StatusCode.UNAVAILABLE, "the service is stopping; retry")
    except (sqlite3.Error, OSError) as e:
        context.abort(grpc.StatusCode.INTERNAL, f"storage error: {e}")


def _info(service: str, started: float, items: int, batches: int, db_bytes: int,
          data: str) -> pb.InfoResponse:
    return pb.InfoResponse(service=service, pid=os.getpid(), host=socket.gethostname(),
                           started=started, items=items, batches=batches, db_bytes=db_bytes,
                           data=data, version=VERSION)


class LogServicer(pb_grpc.LogServiceServicer):
    def __init__(self, store: LogStore, config: ServiceConfig):
        self.store, self.config, self.started = store, config, time.time()

    def Write(self, request: pb.WriteRequest, context: grpc.ServicerContext) -> pb.WriteResponse:
        cfg = self.config
        try:
            check_batch_id(request.client_id, request.seq)
        except InvalidBatchError as e:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        if request.count > cfg.max_batch_entries:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          f"batch of {request.count} entries exceeds the cap of "
                          f"{cfg.max_batch_entries}; send smaller batches")
        try:
            cols = codec.decode(request.payload, cfg.max_batch_bytes)
        except codec.PayloadError as e:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        n = len(cols.timestamp)
        if n > cfg.max_batch_entries:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          f"batch of {n} entries exceeds the cap of {cfg.max_batch_entries}")
        for name in ("level", "msg", "run", "step", "has_step", "source", "extra_json"):
            if len(getattr(cols, name)) != n:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                              f"malformed batch: column {name} has {len(getattr(cols, name))} "
                              f"values, timestamp has {n}")
        if request.count and request.count != n:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          f"malformed batch: count says {request.count}, payload has {n}")
        rows, errors = rows_of(cols, cfg.caps)
        duplicate = _store_call(context, self.store.append, rows, request.client_id,
                                request.seq)
        return pb.WriteResponse(accepted=0 if duplicate else len(rows), errors=errors,
                                duplicate=duplicate)

    def Query(self, request: pb.QueryRequest, context: grpc.ServicerContext) -> pb.QueryResponse:
        q = _log_query(request, context)
        # Characters per page: at most 4 bytes each in UTF-8, so a page stays under half the
        # message cap (of this service and of a default client) even uncompressed.
        budget = min(self.config.max_message_bytes, 16 << 20) // 8
        cols, size, more = pb.LogColumns(), 0, False
        rows = self.store.scan(q)
        try:
            for rid, ts, level, run, step, source, msg, extra in rows:
                if size >= budget:
                    more = True
                    break
                size += len(msg) + len(run) + len(source) + len(extra or "") + 48
                cols.id.append(rid)
                cols.timestamp.append(ts)
                cols.level.append(LEVEL_NAMES.get(level, str(level)))
                cols.msg.append(msg)
                cols.run.append(run)
                cols.has_step.append(step is not None)
                cols.step.append(step or 0)
                cols.source.append(source)
                cols.extra_json.append(extra or "")
        finally:
            rows.close()
        return pb.QueryResponse(payload=codec.compress(cols.SerializeToString()),
                                count=len(cols.id), more=more,
                                last_id=cols.id[-1] if cols.id else request.after_id)

    def Info(self, request: pb.InfoRequest, context: grpc.ServicerContext) -> pb.InfoResponse:
        return _info("logger", self.started, self.store.count, self.store.batches,
                     self.store.db_bytes(), self.config.data)


class KVServicer(pb_grpc.KVServiceServicer):
    def __init__(self, store: KVStore, config: ServiceConfig):
        self.store, self.config, self.started = store, config, time.time()

    def _check_key(self, key: str, context: grpc.ServicerContext) -> None:
        if not key or len(key) > self.config.max_key_chars:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          f"key must have 1 to {self.config.max_key_chars} characters")

    def Get(self, request, context):
        self._check_key(request.key, context)
        item = self.store.get(request.key)
        return pb.KVGetResponse(found=item is not None, item=_item(item))

    def Put(self, request, context):
        self._check_key(request.key, context)
        if len(request.value) > self.config.max_value_bytes:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          f"value of {len(request.value)} bytes exceeds the cap of "
                          f"{self.config.max_value_bytes}")
        expected = request.expected_version if request.HasField("expected_version") else None
        ok, item = self.store.put(request.key, request.value, expected)
        return pb.KVPutResponse(ok=ok, item=_item(item))

    def Delete(self, request, context):
        self._check_key(request.key, context)
        expected = request.expected_version if request.HasField("expected_version") else None
        ok, existed = self.store.delete(request.key, expected)
        return pb.KVDeleteResponse(ok=ok, existed=existed)

    def List(self, request, context):
        if max(len(request.prefix), len(request.start_after)) > self.config.max_key_chars:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          f"prefix and start_after must have at most "
                          f"{self.config.max_key_chars} characters")
        items, more = self.store.list(request.prefix, min(request.limit or 1000, 10_000),
                                      request.start_after)
        return pb.KVListResponse(items=[_item(i) for i in items], more=more)

    def Info(self, request, context):
        return _info("kv", self.started, self.store.count(), 0, self.store.db_bytes(),
                     self.config.data)


def _item(item) -> pb.KVItem | None:
    if item is None:
        return None
    return pb.KVItem(key=item.key, value=item.value, version=item.version,
                     updated=item.updated)


class Service:
    """A started service: ``address``, ``port``; ``stop()`` ends it and unregisters."""

    def __init__(self, config: ServiceConfig):
        if config.kind not in ENDPOINTS:
            raise ServiceConfigError(f"unknown service {config.kind!r}; use one of "
                                     f"{', '.join(ENDPOINTS)}")
        if not 0 <= config.port <= 65535:
            raise ServiceConfigError(f"--port {config.port}: use a port from 1 to 65535, or 0 "
                                     "to have a free one picked")
        self.config = config
        self.registry = (EndpointRegistry.for_cluster(config.cluster, config.clusters_root)
                         if config.cluster else None)
        token = config.token
        if config.host not in LOOPBACK_DEFAULT and not token:
            if self.registry is None:
                raise ServiceConfigError(
                    f"listening on {config.host} needs a token: pass --token-file or set "
                    "$MARIN_SERVICES_TOKEN (or --cluster to use the cluster's token)")
            token = self.registry.ensure_token()
        try:
            os.makedirs(config.data, exist_ok=True)
            store = (LogStore(os.path.join(config.data, "logs.sqlite"), config.synchronous)
                     if config.kind == "logger" else
                     KVStore(os.path.join(config.data, "kv.sqlite"), config.synchronous))
        except (OSError, sqlite3.Error) as e:
            raise ServiceConfigError(f"--data {config.data}: cannot keep a database there "
                                     f"({getattr(e, 'strerror', None) or e}); pick a folder "
                                     "this user can write") from None
        self.store = store
        options = [("grpc.max_receive_message_length", config.max_message_bytes),
                   ("grpc.max_send_message_length", config.max_message_bytes),
                   ("grpc.so_reuseport", 0)]
        self.server = grpc.server(ThreadPoolExecutor(max_workers=config.workers,
                                                     thread_name_prefix=config.kind),
                                  options=options,
                                  interceptors=[*([TokenCheck(token)] if token else []),
                                                RequestCheck()])
        if isinstance(store, LogStore):
            pb_grpc.add_LogServiceServicer_to_server(LogServicer(store, config), self.server)
        else:
            pb_grpc.add_KVServiceServicer_to_server(KVServicer(store, config), self.server)
        host = f"[{config.host}]" if ":" in config.host else config.host
        try:
            self.port = self.server.add_insecure_port(f"{host}:{config.port}")
        except RuntimeError:
            self.port = 0
        if not self.port:
            self.store.close()
            raise ServiceConfigError(f"cannot listen on {config.host}:{config.port} (in use, "
                                     "or not an address of this machine); pick another --port")
        advertised = config.advertise or (socket.gethostname() if config.host in
                                          ("0.0.0.0", "::") else config.host)
        self.address = f"{advertised}:{self.port}"
        self._stopped = threading.Event()
        self._retention: threading.Thread | None = None

    def start(self) -> Service:
        self.server.start()
        if self.registry is not None:
            try:
                self.registry.register(Endpoint(ENDPOINTS[self.config.kind], self.address,
                                                pid=os.getpid(), data=self.config.data))
            except OSError as e:
                self.server.stop(0).wait()
                self.store.close()
                raise ServiceConfigError(
                    f"cannot register the {self.config.kind} endpoint in "
                    f"{self.registry.url} ({e.strerror or e}); check --clusters or "
                    "$MARIN_CLUSTERS") from None
        if self.config.kind == "logger" and self.config.retention_days > 0:
            self._retention = threading.Thread(target=self._retain, daemon=True,
                                               name="retention")
            self._retention.start()
        return self

    def _retain(self, every: float = 600.0) -> None:
        while not self._stopped.is_set():
            self.store.prune(time.time() - self.config.retention_days * 86400)
            self._stopped.wait(every)

    def stop(self, grace: float = 3.0) -> None:
        if self._stopped.is_set():
            return
        self._stopped.set()
        if self.registry is not None:
            self.registry.unregister(ENDPOINTS[self.config.kind], pid=os.getpid())
        self.server.stop(grace).wait()
        self.store.close()


def serve_forever(config: ServiceConfig) -> int:
    """Run a service until SIGTERM or SIGINT; prints one line once it listens."""
    service = Service(config).start()
    # A batch makes one tuple per entry, freed after its commit (no cycles): collect rarely,
    # and never walk the objects that live as long as the process.
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    print(f"marin {config.kind} listening on {service.address} (pid {os.getpid()}, data "
          f"{config.data})", flush=True)
    done.wait()
    service.stop()
    return 0
