"""Read the log service.

    entries, last_id = query("iris://marin?endpoint=/system/logger", run="r1",
                             min_level="WARNING", grep="nan", limit=100)
    for e in entries: print(format_entry(e))
"""

from __future__ import annotations

import json
import time
from typing import Any

import zstandard

from marin.services.channel import ServiceChannel
from marin.services.proto import services_pb2 as pb
from marin.services.proto import services_pb2_grpc as pb_grpc


def query(url: str, run: str | None = None, step: int | None = None,
          min_level: str | None = None, since: float | None = None, until: float | None = None,
          grep: str | None = None, limit: int = 1000, newest: bool = False, after_id: int = 0,
          timeout: float = 30.0) -> tuple[list[dict[str, Any]], int]:
    """Matching entries (oldest first) as dicts, and the last id seen (for following)."""
    request = pb.QueryRequest(run=run or "", min_level=(min_level or "").upper(),
                              since=since or 0.0, until=until or 0.0, grep=grep or "",
                              limit=limit, after_id=after_id, newest=newest)
    if step is not None:
        request.step = step
    channel = ServiceChannel(url, pb_grpc.LogServiceStub)
    try:
        reply = channel.call("Query", request, timeout=timeout)
    finally:
        channel.close()
    cols = pb.LogColumns.FromString(zstandard.ZstdDecompressor().decompress(reply.payload))
    entries = []
    for i in range(reply.count):
        entry: dict[str, Any] = {"id": cols.id[i], "timestamp": cols.timestamp[i],
                                 "level": cols.level[i], "msg": cols.msg[i],
                                 "run": cols.run[i] or None,
                                 "step": cols.step[i] if cols.has_step[i] else None,
                                 "source": cols.source[i] or None}
        if cols.extra_json[i]:
            entry.update(json.loads(cols.extra_json[i]))
        entries.append(entry)
    return entries, reply.last_id


def format_entry(e: dict[str, Any]) -> str:
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(e["timestamp"]))
    where = " ".join(x for x in (e.get("run") and f"run={e['run']}",
                                 e.get("step") is not None and f"step={e['step']}",
                                 e.get("source")) if x)
    return f"{when} {e['level']:<8} {where + ': ' if where else ''}{e['msg']}"
