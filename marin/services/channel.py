"""A gRPC channel to a service URL that re-resolves the URL when a call fails.

    chan = ServiceChannel("iris://marin?endpoint=/system/kv", pb_grpc.KVServiceStub)
    reply = chan.call("Get", pb.KVGetRequest(key="a"), timeout=5)
"""

from __future__ import annotations

import threading

import grpc

from marin.services.resolve import ResolutionError, Target, forget, resolve, resolver_for

# Codes after which the service may have moved: resolve the URL again and reconnect.
_MOVED = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
          grpc.StatusCode.UNAUTHENTICATED}


class ServiceError(ConnectionError):
    """A call failed; the message names the URL, the address and the likely fix."""

    def __init__(self, message: str, code: grpc.StatusCode | None = None):
        super().__init__(message)
        self.code = code


class ServiceChannel:
    def __init__(self, url: str, stub_cls, max_message_bytes: int = 16 << 20):
        resolver_for(url)  # an unknown scheme fails here, not on the first call
        self.url = url
        self._stub_cls = stub_cls
        self._options = [("grpc.max_send_message_length", max_message_bytes),
                         ("grpc.max_receive_message_length", max_message_bytes),
                         ("grpc.initial_reconnect_backoff_ms", 100),
                         ("grpc.min_reconnect_backoff_ms", 100),
                         ("grpc.max_reconnect_backoff_ms", 1000)]
        self._lock = threading.Lock()
        self._target: Target | None = None
        self._channel: grpc.Channel | None = None
        self._stub = None
        self._stale = False

    @property
    def address(self) -> str | None:
        return self._target.address if self._target else None

    def _connect(self):
        with self._lock:
            if self._stub is None or self._stale:
                target = resolve(self.url, refresh=self._stale)
                if self._channel is None or target != self._target:
                    if self._channel is not None:
                        self._channel.close()
                    self._channel = grpc.insecure_channel(target.address,
                                                          options=self._options)
                    self._stub = self._stub_cls(self._channel)
                self._target, self._stale = target, False
            metadata = ((("authorization", f"Bearer {self._target.token}"),)
                        if self._target.token else None)
            return self._stub, metadata

    def invalidate(self) -> None:
        """Resolve the URL again before the next call (this channel's and any other's)."""
        forget(self.url)
        with self._lock:
            self._stale = True

    def call(self, method: str, request, timeout: float = 10.0, attempts: int = 2):
        """Call ``method``; after a failure that suggests a move, re-resolve and try again."""
        for attempt in range(attempts):
            try:
                stub, metadata = self._connect()
            except ResolutionError as e:
                raise ServiceError(str(e), grpc.StatusCode.UNAVAILABLE) from None
            try:
                return getattr(stub, method)(request, timeout=timeout, metadata=metadata)
            except grpc.RpcError as e:
                code = e.code()
                if code in _MOVED:
                    self.invalidate()
                    if attempt + 1 < attempts:
                        continue
                raise ServiceError(self._describe(code, e.details()), code) from None
        raise AssertionError("unreachable")

    def _describe(self, code: grpc.StatusCode, details: str | None) -> str:
        where = f"{self.url} ({self.address})" if self.address and self.address not in \
            self.url else self.url
        hint = {grpc.StatusCode.UNAVAILABLE: "; is it running? see `marin services status`",
                grpc.StatusCode.UNAUTHENTICATED: "; set $MARIN_SERVICES_TOKEN to the "
                "cluster's token"}.get(code, "")
        return f"{where}: {code.name}: {details}{hint}"

    def close(self) -> None:
        with self._lock:
            if self._channel is not None:
                self._channel.close()
            self._channel = self._stub = None
