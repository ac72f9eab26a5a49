"""Read the log service.

    entries, last_id = query("iris://marin?endpoint=/system/logger", run="r1",
                             min_level="WARNING", grep="nan", limit=100)
    for page, last_id in pages(url, run="r1", limit=100_000): ...   # a page at a time
    for e in entries: print(format_entry(e))           # control characters as escapes

The service answers a query in pages, each well under gRPC's message cap: ``pages`` asks
for the next one (after the last id received) until the limit is reached or no match is
left, so a reply never has to fit one message, and ``query`` joins the pages.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

from marin.services import codec
from marin.services.channel import ServiceChannel
from marin.services.log_service.store import LEVELS
from marin.services.proto import services_pb2 as pb
from marin.services.proto import services_pb2_grpc as pb_grpc

__all__ = ["format_entry", "pages", "query", "visible"]

_MAX_PAGE_BYTES = 64 << 20  # uncompressed, far above what the service sends


def pages(url: str, run: str | None = None, step: int | None = None,
          min_level: str | None = None, since: float | None = None, until: float | None = None,
          grep: str | None = None, limit: int = 1000, newest: bool = False, after_id: int = 0,
          timeout: float = 30.0) -> Iterator[tuple[list[dict[str, Any]], int]]:
    """Matching entries a page at a time (oldest first), each with the last id seen.
    ``newest``: the last ``limit`` matches instead of the first."""
    _check_range(limit, step, min_level, after_id)
    request = pb.QueryRequest(run=codec.check_text("run", run or ""),
                              min_level=(min_level or "").upper(),
                              since=since or 0.0, until=until or 0.0,
                              grep=codec.check_text("grep", grep or ""),
                              limit=limit, after_id=after_id, newest=newest)
    if step is not None:
        request.step = step
    channel = ServiceChannel(url, pb_grpc.LogServiceStub)
    try:
        left = limit
        while True:
            reply = channel.call("Query", request, timeout=timeout)
            yield _entries(reply), reply.last_id
            left -= reply.count
            if not (reply.more and reply.count and left > 0):
                return
            # The rest follows the last entry received, whichever end the query started at.
            request.after_id, request.limit, request.newest = reply.last_id, left, False
    finally:
        channel.close()


def _check_range(limit: int, step: int | None, min_level: str | None, after_id: int) -> None:
    """ValueError, naming the filter, for what the request cannot carry or the service
    would refuse."""
    if not 1 <= limit < 2**32:
        raise ValueError(f"limit {limit}: ask for 1 to {2**32 - 1} entries")
    if step is not None and not -(2**63) <= step < 2**63:
        raise ValueError(f"step {step} is outside the 64-bit range of steps")
    if not 0 <= after_id < 2**63:
        raise ValueError(f"after_id {after_id}: use an id the service returned, or 0")
    if min_level and min_level.upper() not in LEVELS:
        raise ValueError(f"level {min_level!r}: use one of {', '.join(LEVELS)}")


def query(url: str, **filters: Any) -> tuple[list[dict[str, Any]], int]:
    """Matching entries (oldest first) as dicts, and the last id seen (for following);
    the filters of ``pages``."""
    entries, last = [], filters.get("after_id", 0)
    for page, page_last in pages(url, **filters):
        entries += page
        last = page_last
    return entries, last


def _entries(reply: pb.QueryResponse) -> list[dict[str, Any]]:
    cols = codec.decode(reply.payload, _MAX_PAGE_BYTES)
    entries = []
    for i in range(reply.count):
        entry: dict[str, Any] = {"id": cols.id[i], "timestamp": cols.timestamp[i],
                                 "level": cols.level[i], "msg": cols.msg[i],
                                 "run": cols.run[i] or None,
                                 "step": cols.step[i] if cols.has_step[i] else None,
                                 "source": cols.source[i] or None}
        if cols.extra_json[i]:
            for key, value in _extra(cols.extra_json[i]).items():
                entry.setdefault(key, value)  # an extra field never hides a standard one
        entries.append(entry)
    return entries


def _extra(text: str) -> dict[str, Any]:
    """An entry's extra fields; as one ``extra`` string when stored before the service
    checked them (not a JSON object, or nested too deep to parse)."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        value = None
    return value if isinstance(value, dict) else {"extra": text}


# Characters a terminal would act on rather than show (escape sequences, carriage returns,
# bidirectional overrides): written as escapes, so an entry cannot rewrite the screen or
# disguise what it says. Newlines and tabs (a traceback) stay.
_CONTROLS = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7f, *range(0x80, 0xa0))
             if chr(c) not in "\n\t"}
_CONTROLS.update({c: f"\\u{c:04x}" for c in (0x200e, 0x200f, *range(0x202a, 0x202f),
                                               *range(0x2066, 0x206a))})


def visible(text: str) -> str:
    """``text`` with the characters a terminal would act on written as escapes."""
    return text.translate(_CONTROLS)


def format_entry(e: dict[str, Any]) -> str:
    try:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(e["timestamp"]))
    except (OverflowError, OSError, ValueError):  # stored before timestamps were checked
        when = f"{e['timestamp']:<19}"
    where = " ".join(x for x in (e.get("run") and f"run={e['run']}",
                                 e.get("step") is not None and f"step={e['step']}",
                                 e.get("source")) if x)
    return visible(f"{when} {e['level']:<8} {where + ': ' if where else ''}{e['msg']}")
