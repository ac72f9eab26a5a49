"""The log and KV services, each a gRPC server in its own process.

    python -m marin.services.server logger --data /var/marin/logger --cluster marin
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
import hmac
import itertools
import json
import math
import os
import signal
import socket
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import grpc

from marin.services import codec
from marin.services.endpoints import Endpoint, EndpointRegistry
from marin.services.kvstore import KVStore
from marin.services.logstore import LEVEL_NAMES, LEVELS, LogQuery, LogStore
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


class ServiceConfigError(ValueError):
    pass


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
        rows, errors = self._rows(cols)
        duplicate = self.store.append(rows, request.client_id, request.seq)
        return pb.WriteResponse(accepted=0 if duplicate else len(rows), errors=errors,
                                duplicate=duplicate)

    def _rows(self, cols: pb.LogColumns) -> tuple[list, list[pb.EntryError]]:
        rows = self._rows_fast(cols)
        return (rows, []) if rows is not None else self._rows_checked(cols)

    def _rows_fast(self, cols: pb.LogColumns) -> list | None:
        """Whole-column checks, C loops only; None when any entry needs a closer look.
        Each column is read out of the message once (every read builds new objects)."""
        cfg = self.config
        if not cols.timestamp:
            return []
        level = list(cols.level)
        if not set(level) <= LEVELS.keys() or any(cols.extra_json):
            return None
        ts, msg, run, source = (list(cols.timestamp), list(cols.msg), list(cols.run),
                                list(cols.source))
        if max(map(len, msg)) > cfg.max_msg_chars or max(
                max(map(len, run)), max(map(len, source))) > cfg.max_field_chars:
            return None
        if not (min(ts) > 0 and math.isfinite(sum(ts))):  # NaN and inf make the sum so
            return None
        has = list(cols.has_step)
        step = list(cols.step) if all(has) else [
            s if h else None for s, h in zip(cols.step, has, strict=True)]
        return list(zip(ts, map(LEVELS.__getitem__, level), run, step, source, msg,
                        itertools.repeat(None)))

    def _rows_checked(self, cols: pb.LogColumns) -> tuple[list, list[pb.EntryError]]:
        cfg = self.config
        rows, errors = [], []
        max_msg, max_field, max_extra = cfg.max_msg_chars, cfg.max_field_chars, \
            cfg.max_extra_chars
        for i, (ts, level, msg, run, step, has, source, extra) in enumerate(zip(
                cols.timestamp, cols.level, cols.msg, cols.run, cols.step, cols.has_step,
                cols.source, cols.extra_json, strict=True)):
            problem = None
            levelno = LEVELS.get(level)
            if levelno is None:
                problem = ("level", f"unknown level {level[:40]!r}; use one of "
                           f"{', '.join(LEVELS)}")
            elif not (math.isfinite(ts) and ts > 0):
                problem = ("timestamp", f"timestamp {ts} is not a positive epoch time")
            elif len(msg) > max_msg:
                problem = ("msg", f"message of {len(msg)} characters exceeds the cap of "
                           f"{max_msg}")
            elif len(run) > max_field or len(source) > max_field:
                problem = ("run" if len(run) > max_field else "source",
                           f"longer than {max_field} characters")
            elif extra:
                problem = _check_extra(extra, max_extra)
            if problem:
                errors.append(pb.EntryError(index=i, field=problem[0], message=problem[1]))
                continue
            rows.append((ts, levelno, run, step if has else None, source, msg, extra or None))
        return rows, errors

    def Query(self, request: pb.QueryRequest, context: grpc.ServicerContext) -> pb.QueryResponse:
        min_level = 0
        if request.min_level:
            min_level = LEVELS.get(request.min_level.upper(), -1)
            if min_level < 0:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                              f"unknown level {request.min_level!r}; use one of "
                              f"{', '.join(LEVELS)}")
        q = LogQuery(run=request.run or None,
                     step=request.step if request.HasField("step") else None,
                     min_level=min_level, since=request.since or None,
                     until=request.until or None, grep=request.grep or None,
                     after_id=request.after_id, limit=min(request.limit or 1000, 100_000),
                     newest=request.newest)
        rows = self.store.query(q)
        cols = pb.LogColumns()
        for rid, ts, level, run, step, source, msg, extra in rows:
            cols.id.append(rid)
            cols.timestamp.append(ts)
            cols.level.append(LEVEL_NAMES.get(level, str(level)))
            cols.msg.append(msg)
            cols.run.append(run)
            cols.has_step.append(step is not None)
            cols.step.append(step or 0)
            cols.source.append(source)
            cols.extra_json.append(extra or "")
        return pb.QueryResponse(payload=codec.compress(cols.SerializeToString()),
                                count=len(rows), last_id=rows[-1][0] if rows else
                                request.after_id)

    def Info(self, request: pb.InfoRequest, context: grpc.ServicerContext) -> pb.InfoResponse:
        return _info("logger", self.started, self.store.count, self.store.batches,
                     self.store.db_bytes(), self.config.data)


def _check_extra(extra: str, cap: int) -> tuple[str, str] | None:
    if len(extra) > cap:
        return ("extra", f"extra fields of {len(extra)} characters exceed the cap of {cap}")
    try:
        value = json.loads(extra)
    except ValueError:
        return ("extra", "extra fields are not valid JSON")
    return None if isinstance(value, dict) else ("extra", "extra fields must be a JSON object")


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


class _TokenCheck(grpc.ServerInterceptor):
    """Refuses every call whose ``authorization`` metadata is not ``Bearer TOKEN``."""

    def __init__(self, token: str):
        self._expected = f"Bearer {token}".encode()

        def deny(request, context):
            context.abort(grpc.StatusCode.UNAUTHENTICATED,
                          "missing or wrong token; set $MARIN_SERVICES_TOKEN or read it from "
                          "the cluster registry's token file")

        self._deny = grpc.unary_unary_rpc_method_handler(deny)

    def intercept_service(self, continuation, handler_call_details):
        given = dict(handler_call_details.invocation_metadata).get("authorization", "")
        if hmac.compare_digest(given.encode(), self._expected):
            return continuation(handler_call_details)
        return self._deny


class Service:
    """A started service: ``address``, ``port``; ``stop()`` ends it and unregisters."""

    def __init__(self, config: ServiceConfig):
        if config.kind not in ENDPOINTS:
            raise ServiceConfigError(f"unknown service {config.kind!r}; use one of "
                                     f"{', '.join(ENDPOINTS)}")
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
        os.makedirs(config.data, exist_ok=True)
        options = [("grpc.max_receive_message_length", config.max_message_bytes),
                   ("grpc.max_send_message_length", config.max_message_bytes),
                   ("grpc.so_reuseport", 0)]
        self.server = grpc.server(ThreadPoolExecutor(max_workers=config.workers,
                                                     thread_name_prefix=config.kind),
                                  options=options,
                                  interceptors=[_TokenCheck(token)] if token else [])
        if config.kind == "logger":
            self.store = LogStore(os.path.join(config.data, "logs.sqlite"), config.synchronous)
            pb_grpc.add_LogServiceServicer_to_server(LogServicer(self.store, config),
                                                     self.server)
        else:
            self.store = KVStore(os.path.join(config.data, "kv.sqlite"), config.synchronous)
            pb_grpc.add_KVServiceServicer_to_server(KVServicer(self.store, config),
                                                    self.server)
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
            self.registry.register(Endpoint(ENDPOINTS[self.config.kind], self.address,
                                            pid=os.getpid(), data=self.config.data))
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


def main(argv: list[str] | None = None) -> int:
    from marin.services.cli import serve_parser

    args = serve_parser().parse_args(argv)
    return args.handler(args, [])


if __name__ == "__main__":
    sys.exit(main())
