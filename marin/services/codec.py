"""Log batches on the wire: columns of a ``LogColumns`` message, zstd-compressed.

    payload = encode(rows)                  # rows: (ts, level, msg, run, step, source, extra)
    columns = decode(payload, max_bytes=64 << 20)
"""

from __future__ import annotations

from collections.abc import Sequence

import zstandard

from marin.services.proto import services_pb2 as pb

# What a client sends per entry: (timestamp, level name, msg, run, step or None, source,
# extra JSON object or "").
WireRow = tuple[float, str, str, str, int | None, str, str]
# Timestamps lie in (0, MAX_TIMESTAMP): epoch seconds up to the end of year 9999, the last
# that time.localtime and datetime can show.
MAX_TIMESTAMP = 253402300800.0


class PayloadError(ValueError):
    """A payload that is not a zstd-compressed LogColumns message within the caps."""


class TextError(ValueError):
    """A string that cannot travel: protobuf strings are UTF-8, which has no lone
    surrogates (what Python makes of bytes in a command line that are not UTF-8)."""


def check_text(name: str, value: str) -> str:
    """``value``, or ``TextError`` naming ``name`` when it has no UTF-8 form."""
    try:
        value.encode()
    except UnicodeEncodeError as e:
        raise TextError(f"{name} {value!r} is not valid text (character {e.start} is a lone "
                        "surrogate, from bytes that are not UTF-8); pass UTF-8 text") from None
    return value


def columns_message(timestamp: Sequence[float], level: Sequence[str], msg: Sequence[str],
                    run: Sequence[str], step: Sequence[int | None], source: Sequence[str],
                    extra: Sequence[str]) -> pb.LogColumns:
    """A ``LogColumns`` message from columns of equal length (``step`` None for none)."""
    cols = pb.LogColumns()
    cols.timestamp.extend(timestamp)
    cols.level.extend(level)
    cols.msg.extend(msg)
    cols.run.extend(run)
    cols.has_step.extend([s is not None for s in step])
    cols.step.extend([0 if s is None else s for s in step])
    cols.source.extend(source)
    cols.extra_json.extend(extra)
    return cols


def columns_of(rows: Sequence[WireRow]) -> pb.LogColumns:
    if not rows:
        return pb.LogColumns()
    return columns_message(*zip(*rows, strict=True))


def compress(message_bytes: bytes, level: int = 3) -> bytes:
    return zstandard.ZstdCompressor(level=level).compress(message_bytes)


def encode(rows: Sequence[WireRow], level: int = 3) -> bytes:
    return compress(columns_of(rows).SerializeToString(), level)


def encode_columns(*columns: Sequence, level: int = 3) -> bytes:
    """The payload of columns in ``columns_message`` order."""
    return compress(columns_message(*columns).SerializeToString(), level)


def decode(payload: bytes, max_bytes: int) -> pb.LogColumns:
    try:
        size = zstandard.frame_content_size(payload)
    except zstandard.ZstdError as e:
        raise PayloadError(f"payload is not a zstd frame ({e})") from None
    if size < 0:
        raise PayloadError("payload is a zstd frame without its content size; compress "
                           "with write_content_size=True")
    if size > max_bytes:
        raise PayloadError(f"batch of {size} bytes uncompressed exceeds the cap of "
                           f"{max_bytes}; send smaller batches")
    try:
        raw = zstandard.ZstdDecompressor().decompress(payload, max_output_size=max_bytes)
    except zstandard.ZstdError as e:
        raise PayloadError(f"payload is not valid zstd data ({e})") from None
    try:
        return pb.LogColumns.FromString(raw)
    except Exception as e:  # protobuf's DecodeError and friends
        raise PayloadError(f"payload is not a LogColumns message ({e})") from None
