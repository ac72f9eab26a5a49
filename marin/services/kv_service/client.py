"""A client of the KV service.

    kv = KVClient.connect("iris://marin?endpoint=/system/kv")
    item = kv.put("steps/exec-1/train", b"running")             # Item(version=1)
    kv.put("steps/exec-1/train", b"done", expected_version=1)   # compare-and-swap
    kv.get("steps/exec-1/train").value                          # b"done"
    kv.list("steps/")                                           # [Item, ...] sorted by key
    kv.delete("steps/exec-1/train")

A key, prefix or text value that has no UTF-8 form raises ``TextError`` (a ValueError)
before anything is sent. A put or delete with ``expected_version`` raises
``VersionConflictError`` (carrying the current item) when the key has moved on; 0 means the
key must not exist yet.
"""

from __future__ import annotations

from marin.services.channel import ServiceChannel
from marin.services.codec import check_text
from marin.services.kv_service.store import Item
from marin.services.proto import services_pb2 as pb
from marin.services.proto import services_pb2_grpc as pb_grpc

__all__ = ["Item", "KVClient", "VersionConflictError"]


class VersionConflictError(RuntimeError):
    def __init__(self, key: str, expected: int, current: Item | None):
        super().__init__(f"key {key!r} is at version {current.version if current else 0}, "
                         f"not {expected}; read it again and retry")
        self.current = current


def _check_version(expected: int | None) -> None:
    if expected is not None and not 0 <= expected < 2**63:
        raise ValueError(f"expected_version {expected}: versions count from 1 (0: the key "
                         "must not exist yet)")


def _item(msg: pb.KVItem) -> Item:
    return Item(msg.key, msg.value, msg.version, msg.updated)


class KVClient:
    def __init__(self, url: str, timeout: float = 10.0):
        self.url, self.timeout = url, timeout
        self._channel = ServiceChannel(url, pb_grpc.KVServiceStub)

    @classmethod
    def connect(cls, url: str, **options) -> KVClient:
        return cls(url, **options)

    def get(self, key: str) -> Item | None:
        reply = self._channel.call("Get", pb.KVGetRequest(key=check_text("key", key)),
                                   self.timeout)
        return _item(reply.item) if reply.found else None

    def put(self, key: str, value: bytes | str, expected_version: int | None = None) -> Item:
        _check_version(expected_version)
        data = check_text("value", value).encode() if isinstance(value, str) else value
        reply = self._channel.call("Put", pb.KVPutRequest(key=check_text("key", key),
                                                          value=data,
                                                          expected_version=expected_version),
                                   self.timeout)
        if not reply.ok:
            current = _item(reply.item) if reply.HasField("item") else None
            raise VersionConflictError(key, expected_version or 0, current)
        return _item(reply.item)

    def delete(self, key: str, expected_version: int | None = None) -> bool:
        """True if the key existed and was deleted."""
        _check_version(expected_version)
        reply = self._channel.call("Delete", pb.KVDeleteRequest(
            key=check_text("key", key), expected_version=expected_version), self.timeout)
        if not reply.ok and expected_version is not None:
            raise VersionConflictError(key, expected_version, self.get(key))
        return reply.ok

    def list(self, prefix: str = "", limit: int = 10_000) -> list[Item]:
        check_text("prefix", prefix)
        items: list[Item] = []
        start_after = ""
        while len(items) < limit:
            reply = self._channel.call("List", pb.KVListRequest(
                prefix=prefix, limit=min(1000, limit - len(items)), start_after=start_after),
                self.timeout)
            items.extend(_item(i) for i in reply.items)
            if not reply.more or not reply.items:
                break
            start_after = reply.items[-1].key
        return items

    def info(self) -> pb.InfoResponse:
        return self._channel.call("Info", pb.InfoRequest(), self.timeout)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> KVClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
