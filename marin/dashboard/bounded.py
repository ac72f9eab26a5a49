"""Reads of at most a given number of bytes from a file at any URL ``marin.storage`` knows.

    head = read_head("gs://b/x/summary.json", 4 << 20)   # Part(data, size, offset=0) or None
    tail = read_tail("/p/train/run-1a2b3c4d/train.log", 64_000)   # its last 64 kB
    parts = read_spread(url, budget=8 << 20)  # the whole file, or windows across it

Object stores answer each window with one ranged request, so a page over a 200 MB file
costs the budget, not the file.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO

from marin.storage.files import open_url

__all__ = ["Part", "read_head", "read_spread", "read_tail"]


@dataclass(frozen=True)
class Part:
    """``data`` read from ``offset`` of a file of ``size`` bytes."""

    data: bytes
    size: int
    offset: int = 0

    @property
    def whole(self) -> bool:
        return self.offset == 0 and len(self.data) == self.size


@contextmanager
def _opened(url: str) -> Iterator[tuple[IO[bytes], int] | None]:
    try:
        f = open_url(url, "rb")
    except (FileNotFoundError, NotADirectoryError):
        yield None
        return
    with f:
        size = f.seek(0, 2)
        yield f, size


def read_head(url: str, limit: int) -> Part | None:
    """The first ``limit`` bytes of ``url`` (None when there is no such file)."""
    with _opened(url) as opened:
        if opened is None:
            return None
        f, size = opened
        f.seek(0)
        return Part(f.read(min(limit, size)), size)


def read_tail(url: str, limit: int) -> Part | None:
    """The last ``limit`` bytes of ``url`` (None when there is no such file)."""
    with _opened(url) as opened:
        if opened is None:
            return None
        f, size = opened
        start = max(0, size - limit)
        f.seek(start)
        return Part(f.read(size - start), size, start)


def read_spread(url: str, budget: int, windows: int = 64) -> list[Part] | None:
    """The whole file when it fits in ``budget`` bytes; else its last ``budget / 2`` bytes
    after ``windows`` evenly spaced windows sharing the other half, in file order."""
    with _opened(url) as opened:
        if opened is None:
            return None
        f, size = opened
        if size <= budget:
            f.seek(0)
            return [Part(f.read(size), size)]
        tail = budget // 2
        width = max(1, (budget - tail) // windows)
        span = size - tail
        parts = []
        for i in range(windows):
            start = span * i // windows
            f.seek(start)
            parts.append(Part(f.read(min(width, span - start)), size, start))
        f.seek(span)
        parts.append(Part(f.read(tail), size, span))
        return parts
