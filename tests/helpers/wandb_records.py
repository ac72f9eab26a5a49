"""The records of a W&B run file (``run-<id>.wandb``), decoded with wandb's own protobuf
``Record`` message.

    history = wandb_history(next(run_folder.glob("*.wandb")))   # {step: {name: value}}

The file is W&B's LevelDB-log framing (a 7-byte ``:W&B`` header, 32 KiB blocks, records
split into full/first/middle/last chunks, each with a CRC-32 of its type and data).
wandb 0.31 reads it only inside its Go core and its Python reader left with protobuf 6,
so the framing is read here and every chunk's checksum is verified; the record bodies are
parsed by wandb's ``wandb_internal_pb2.Record``.
"""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path
from typing import Any

BLOCK = 32768
HEADER = struct.Struct("<4sHB")  # ":W&B", 0xBEE1, version 0
CHUNK = struct.Struct("<IHB")  # crc32, length, type
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def records(path: Path) -> list[Any]:
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    ident, magic, version = HEADER.unpack_from(data)
    assert (ident, magic, version) == (b":W&B", 0xBEE1, 0), (ident, magic, version)
    out, pending, pos = [], b"", HEADER.size
    while pos + CHUNK.size <= len(data):
        room = BLOCK - pos % BLOCK
        if room < CHUNK.size:  # a block's tail too short for a header is padding
            pos += room
            continue
        crc, length, kind = CHUNK.unpack_from(data, pos)
        if kind == 0 and length == 0:
            break
        body = data[pos + CHUNK.size:pos + CHUNK.size + length]
        assert zlib.crc32(body, zlib.crc32(bytes([kind]))) & 0xFFFFFFFF == crc, "bad chunk"
        pos += CHUNK.size + length
        pending = body if kind in (FULL, FIRST) else pending + body
        if kind in (FULL, LAST):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            out.append(record)
    return out


def wandb_history(path: Path) -> dict[int, dict[str, Any]]:
    history: dict[int, dict[str, Any]] = {}
    for record in records(path):
        if record.WhichOneof("record_type") != "history":
            continue
        items = {(i.key or "/".join(i.nested_key)): json.loads(i.value_json)
                 for i in record.history.item}
        step = int(items.get("_step", record.history.step.num))
        history.setdefault(step, {}).update(items)
    return history
