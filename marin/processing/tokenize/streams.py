"""Reading input files as bytes: line-aligned ranges of plain files, and compressed files
decoded as a stream and cut into the same ranges.

    base, data = read_line_range("data/big.jsonl", 1 << 20, 2 << 20)   # range 1 of 1 MiB
    for chunk in stream_chunks("data/big.jsonl.zst", 1 << 20): chunk.range, chunk.data
    decoded("data/small.jsonl.gz")                                       # the whole file
    with open_input("data/big.jsonl") as f: f.read(4)                    # any URL, as bytes

Range ``k`` of a file cut at ``R`` bytes holds the lines that *start* at a byte in
``[k*R, (k+1)*R)`` of the decoded stream: boundaries depend only on the file, a line is
never cut, and a plain file and its compressed copy give the same ranges.

A compressed stream that ends inside a frame or member (a truncated download), or whose
bytes are damaged, is an ``InputError`` naming the file and the byte where it stops.

Design note: ``open_input`` opens a local path with ``open()`` itself rather than through
the storage layer's local filesystem, which does the same (it resolves a relative path
against the working folder and follows symbolic links, as ``open()`` does) at five times
the cost: 66 against 13 µs a file, a tenth of the time of a corpus of small text files.
Input files are wherever the user keeps them, not under the prefix, so no containment
check applies to them either way; other URLs go through ``open_url``.
"""

from __future__ import annotations

import contextlib
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO

from marin.processing.tokenize.inputs import InputError
from marin.storage.files import local_path, open_url

__all__ = ["Chunk", "decoded", "decoded_blocks", "is_compressed", "line_number", "open_input",
           "read_line_range", "stream_chunks"]

_BLOCK = 1 << 20
_ZSTD = (".zst", ".zstd")
_GZIP = (".gz",)


def is_compressed(path: str) -> bool:
    return path.endswith(_ZSTD + _GZIP)


def open_input(url: str) -> IO[bytes]:
    """The input file ``url`` opened for reading bytes (see the design note)."""
    path = local_path(url)
    if path is None or path.startswith("~"):  # another store, or a home folder to expand
        return open_url(url, "rb")
    return open(path, "rb")


def read_line_range(path: str, start: int, stop: int) -> tuple[int, bytes]:
    """The lines of the plain file ``path`` that start in ``[start, stop)``, and the byte
    where the first of them starts."""
    with open_input(path) as f:
        f.seek(max(start - 1, 0))
        data = f.read(stop - start + (1 if start else 0))
        base = start
        if start:  # the line holding byte start-1 belongs to the range before
            cut = data.find(b"\n")
            if cut < 0:
                return stop, b""
            base, data = start + cut, data[cut + 1:]
        if not data:
            return base, b""
        parts = [data]
        while not parts[-1].endswith(b"\n"):  # the last line runs past ``stop``: finish it
            more = f.read(64 << 10)
            if not more:
                break
            end = more.find(b"\n")
            parts.append(more if end < 0 else more[:end + 1])
        return base, b"".join(parts)


@dataclass(frozen=True)
class Chunk:
    range: int
    start: int
    """The decoded byte where the chunk's first line starts."""
    first_line: int
    data: bytes
    raw_offset: int
    """Bytes of the file read when the chunk was cut (for progress)."""


class decoded_blocks:
    """The decoded bytes of a compressed file, in blocks; ``raw_offset`` counts the file's
    bytes read so far."""

    def __init__(self, path: str):
        self.path = path
        self.raw_offset = 0

    def __iter__(self) -> Iterator[bytes]:
        zstd = self.path.endswith(_ZSTD)
        new_decoder = _zstd_decoder() if zstd else _gzip_decoder
        unit = "frame" if zstd else "member"
        decoder, fed, unit_start, decoded_bytes = new_decoder(), False, 0, 0
        with open_input(self.path) as f:
            while block := f.read(_BLOCK):
                self.raw_offset += len(block)
                while block:
                    try:
                        out = decoder.decompress(block)
                    except Exception as e:  # zstandard.ZstdError, zlib.error
                        raise InputError(f"{self.path}: the {unit} starting at byte "
                                         f"{unit_start} is damaged ({e}); download or "
                                         "compress the file again") from None
                    fed = True
                    if out:
                        decoded_bytes += len(out)
                        yield out
                    if not decoder.eof:
                        break
                    block = decoder.unused_data  # the next frame or member begins here
                    unit_start = self.raw_offset - len(block)
                    decoder, fed = new_decoder(), False
                    if not zstd and not block.strip(b"\0"):
                        block = b""  # gzip's trailing zero padding
        if fed:
            raise InputError(f"{self.path}: truncated: the file ends inside the {unit} "
                             f"starting at byte {unit_start} (after {decoded_bytes:,} decoded "
                             "bytes); download or compress it again")


def _zstd_decoder():
    import zstandard

    context = zstandard.ZstdDecompressor()
    return context.decompressobj


def _gzip_decoder():
    return zlib.decompressobj(wbits=31)


def decoded(path: str) -> bytes:
    """The whole decoded content of ``path`` (compressed or not)."""
    if not is_compressed(path):
        with open_input(path) as f:
            return f.read()
    return b"".join(decoded_blocks(path))


def stream_chunks(path: str, range_bytes: int) -> Iterator[Chunk]:
    """The ranges of the compressed file ``path`` (the module's rule), in order; a range
    that holds no line is not produced."""
    blocks = decoded_blocks(path)
    rest = b""
    pos, line = 0, 1  # rest[0] is the byte ``pos`` of the stream, where a line starts
    for block in blocks:
        data = rest + block if rest else block
        cut = 0  # data[cut] is the byte ``pos``
        while True:
            boundary = (pos // range_bytes + 1) * range_bytes
            end = data.find(b"\n", cut + boundary - 1 - pos)
            if end < 0:
                break
            chunk = data[cut:end + 1]
            yield Chunk(pos // range_bytes, pos, line, chunk, blocks.raw_offset)
            line += chunk.count(b"\n")
            pos += len(chunk)
            cut = end + 1
        rest = data[cut:]
    if rest:
        yield Chunk(pos // range_bytes, pos, line, rest, blocks.raw_offset)


def line_number(path: str, offset: int, limit: int = 1 << 30) -> int | None:
    """The number of the line starting at byte ``offset`` of ``path``'s decoded content,
    or None past ``limit`` bytes (not worth reading for an error message)."""
    if offset > limit:
        return None
    count, seen = 1, 0
    with contextlib.ExitStack() as stack:
        if is_compressed(path):
            blocks: Iterator[bytes] = iter(decoded_blocks(path))
        else:
            f = stack.enter_context(open_input(path))
            blocks = iter(lambda: f.read(_BLOCK), b"")
        for block in blocks:
            if seen >= offset:
                break
            take = block[:offset - seen]
            count += take.count(b"\n")
            seen += len(take)
    return count
