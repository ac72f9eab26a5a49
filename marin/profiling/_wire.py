"""Cut a serialized XSpace into bounded pieces that ``jax.profiler.ProfileData`` parses.

    with open_url(url, "rb") as f:           # marin.storage.files
        for piece in split_xspace(f, size, limit=64 << 20):
            data = ProfileData.from_serialized_xspace(piece)   # one plane, some of its lines

Design note: ``ProfileData.from_file`` holds the whole XSpace as C++ messages, several
times the file's size (a 1 GB trace would need far more than 2 GB). The XSpace format
nests ``planes`` (repeated XPlane) holding ``lines`` (repeated XLine) holding ``events``;
a repeated field may be cut anywhere between its elements. This module reads only the
protobuf framing (field tags and lengths) to find those cuts: each piece is a valid XSpace
with one plane, that plane's metadata and stats, and a run of its lines (a very long line
is cut between events, its own header repeated). Every event, stat and name is still
decoded by jaxlib's parser.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

_LEN = 2
_PLANE_LINES = 3  # XPlane.lines
_LINE_EVENTS = 4  # XLine.events
_SPACE_PLANES = 1  # XSpace.planes
_BLOCK = 1 << 20


class WireError(ValueError):
    """The bytes are not a well-formed protobuf message (truncated or not a trace)."""


def _varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise WireError("a field runs past the end of the data (truncated)")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise WireError("malformed varint")


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        bits = value & 0x7F
        value >>= 7
        if value:
            out.append(bits | 0x80)
        else:
            out.append(bits)
            return bytes(out)


def _field(number: int, body: bytes) -> bytes:
    return _encode_varint(number << 3 | _LEN) + _encode_varint(len(body)) + body


class _Reader:
    """Random access to a file object with a one-block cache for small reads."""

    def __init__(self, f: BinaryIO, size: int):
        self.f, self.size = f, size
        self._start, self._block = 0, b""

    def read(self, offset: int, n: int) -> bytes:
        if offset + n > self.size:
            raise WireError("a field runs past the end of the file (truncated)")
        if self._start <= offset and offset + n <= self._start + len(self._block):
            return self._block[offset - self._start:offset - self._start + n]
        if n >= _BLOCK:
            self.f.seek(offset)
            return _read_exactly(self.f, n)
        self.f.seek(offset)
        self._start = offset
        self._block = _read_exactly(self.f, min(_BLOCK, self.size - offset))
        return self._block[:n]

    def fields(self, start: int, end: int) -> Iterator[tuple[int, int, int, int]]:
        """(field number, start of the field, start of its value, end) of a message's fields."""
        pos = start
        while pos < end:
            head = self.read(pos, min(20, end - pos))
            key, i = _varint(head, 0)
            number, wire = key >> 3, key & 7
            if number == 0:
                raise WireError("field number 0 (not a protobuf message)")
            if wire == 0:
                _, j = _varint(head, i)
                value, stop = pos + i, pos + j
            elif wire == _LEN:
                length, j = _varint(head, i)
                value, stop = pos + j, pos + j + length
            elif wire == 1:
                value, stop = pos + i, pos + i + 8
            elif wire == 5:
                value, stop = pos + i, pos + i + 4
            else:
                raise WireError(f"wire type {wire} (not a trace)")
            if stop > end:
                raise WireError("a field runs past the end of its message (truncated)")
            yield number, pos, value, stop
            pos = stop


def _read_exactly(f: BinaryIO, n: int) -> bytes:
    data = f.read(n)
    if len(data) != n:
        raise WireError("the file ended early (truncated)")
    return data


def split_xspace(f: BinaryIO, size: int, limit: int = 64 << 20) -> Iterator[bytes]:
    """Serialized XSpaces of at most about ``limit`` bytes each, one plane apiece."""
    reader = _Reader(f, size)
    for number, _, value, stop in reader.fields(0, size):
        if number == _SPACE_PLANES:
            yield from _split_plane(reader, value, stop, limit)


def _split_plane(reader: _Reader, start: int, end: int, limit: int) -> Iterator[bytes]:
    if end - start <= limit:
        yield _field(_SPACE_PLANES, reader.read(start, end - start))
        return
    header, lines = bytearray(), []
    for number, field_start, value, stop in reader.fields(start, end):
        if number == _PLANE_LINES:
            lines.append((value, stop))
        else:
            header += reader.read(field_start, stop - field_start)
    header = bytes(header)
    budget = max(limit - len(header), limit // 2)
    batch: list[bytes] = []
    batch_size = 0
    for line_start, line_end in lines:
        for part in _split_line(reader, line_start, line_end, budget):
            if batch and batch_size + len(part) > budget:
                yield _field(_SPACE_PLANES, header + b"".join(batch))
                batch, batch_size = [], 0
            batch.append(part)
            batch_size += len(part)
    if batch or not lines:
        yield _field(_SPACE_PLANES, header + b"".join(batch))


def _split_line(reader: _Reader, start: int, end: int, budget: int) -> Iterator[bytes]:
    """The line as one XPlane.lines field, or several with the events shared out."""
    if end - start <= budget:
        yield _field(_PLANE_LINES, reader.read(start, end - start))
        return
    header, runs = _scan_line(reader, start, end, budget)
    for run_start, run_end in runs:
        yield _field(_PLANE_LINES, header + reader.read(run_start, run_end - run_start))


_EVENT_TAG = _LINE_EVENTS << 3 | _LEN


def _scan_line(reader: _Reader, start: int, end: int, budget: int
               ) -> tuple[bytes, list[tuple[int, int]]]:
    """A line's fields other than events, and runs of whole events of at most ``budget``
    bytes. Events are most of a large trace, so their framing is read inline."""
    header = bytearray()
    runs: list[tuple[int, int]] = []
    run_start = run_end = -1
    pos = start
    while pos < end:
        block = reader.read(pos, min(4 * _BLOCK, end - pos))
        base = pos
        stop = len(block) if base + len(block) == end else len(block) - 24
        i = 0
        while i < stop:
            if block[i] == _EVENT_TAG:
                length = block[i + 1]
                j = i + 2
                if length >= 0x80:
                    length, j = _varint(block, i + 1)
                field_start, i = base + i, j + length
                if field_start != run_end or base + i - run_start > budget:
                    if run_end > run_start:
                        runs.append((run_start, run_end))
                    run_start = field_start
                run_end = base + i
            else:
                (_, field_start, _, field_end), = _first_field(reader, base + i, end)
                header += reader.read(field_start, field_end - field_start)
                i = field_end - base
        pos = base + i
    if pos != end or run_end > end:
        raise WireError("an event runs past the end of its line (truncated)")
    if run_end > run_start:
        runs.append((run_start, run_end))
    return bytes(header), runs


def _first_field(reader: _Reader, start: int, end: int) -> list[tuple[int, int, int, int]]:
    fields = reader.fields(start, end)
    return [next(fields)]
