"""Cutting a split's input files into units of work, from the files alone.

    plan = plan_split("train", list_inputs(["data/*.jsonl"]), range_bytes=1 << 20,
                      finished={(0, 0), (0, 1)})
    plan.units        # what the workers read themselves, finished ones left out
    plan.streams      # compressed files, decoded in order and cut into chunks as they come

Boundaries depend only on the files and ``range_bytes``, never on the worker count, so the
cache is the same, byte for byte, for any number of workers:

* a plain JSON-lines file larger than ``range_bytes`` is cut into byte ranges (range ``k``
  holds the lines starting in ``[k*R, (k+1)*R)``: ``streams``);
* a Parquet file larger than that, into its row groups;
* a compressed JSON-lines file larger than that is decoded as one stream and cut by the
  same rule on its decoded bytes (gzip cannot be entered in the middle; one zstd frame
  cannot either, and most files are one frame);
* smaller files, and text files (one document each), are grouped whole, consecutive files
  together until a group reaches ``range_bytes`` (a group's cost is its files as well as
  its bytes: each unit writes two files, whose creation costs as much as encoding tens of
  kilobytes; the balance at the end of a run is the pool's, whose idle workers encode the
  batches of the units still being read).

A unit is named by its first file's index and its range in that file: ``(file, range)``,
the order of the cache's token stream.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from marin.processing.tokenize.inputs import PARQUET_SUFFIXES, TEXT_SUFFIXES, InputError, InputFile
from marin.processing.tokenize.streams import is_compressed, open_input

__all__ = ["DEFAULT_RANGE_BYTES", "SplitPlan", "StreamPlan", "Unit", "plan_split"]

DEFAULT_RANGE_BYTES = 1 << 20


@dataclass(frozen=True)
class Unit:
    split: str
    file: int
    """The index of the (first) input file in its split."""
    range: int
    """The range within that file (0 for whole files)."""
    kind: str
    """``files`` (whole files), ``lines`` (a byte range), ``row_group``, or ``chunk`` (a
    range of a decoded stream, whose bytes the reader hands over)."""
    paths: tuple[str, ...]
    start: int = 0
    """The range's first byte (``lines``, ``chunk``), or the row group."""
    stop: int = 0
    weight: int = 0
    """The input bytes it stands for, on the store (for progress)."""
    first_line: int | None = None

    @property
    def key(self) -> tuple[int, int]:
        return (self.file, self.range)

    def where(self) -> str:
        if self.kind == "files":
            more = len(self.paths) - 1
            return self.paths[0] + (f" (and {more} more files)" if more else "")
        if self.kind == "row_group":
            return f"{self.paths[0]}, row group {self.start}"
        return f"{self.paths[0]}, bytes {self.start}.."


@dataclass(frozen=True)
class StreamPlan:
    split: str
    file: int
    path: str
    size: int
    finished: frozenset[int] = frozenset()
    """Ranges of the stream already in the cache, not handed out again."""


@dataclass
class SplitPlan:
    units: list[Unit] = field(default_factory=list)
    streams: list[StreamPlan] = field(default_factory=list)
    reused: int = 0
    """Units left out because the cache has them."""
    weight: int = 0
    """Input bytes still to tokenize."""


def plan_split(split: str, files: Sequence[InputFile], range_bytes: int,
               finished: set[tuple[int, int]] = frozenset(),
               group_bytes: int | None = None) -> SplitPlan:
    """The units of ``files``, those in ``finished`` left out; small files are grouped up
    to ``group_bytes`` (``range_bytes`` by default; a cache keeps the limit it began with,
    ``LedgerRecord.group_limit``)."""
    if range_bytes <= 0:
        raise ValueError(f"range_bytes must be positive, got {range_bytes}")
    groups = _row_groups([f.url for f in files if f.size > range_bytes
                          and f.url.endswith(PARQUET_SUFFIXES)])
    group_limit = max(1, range_bytes if group_bytes is None else group_bytes)
    plan = SplitPlan()
    units: list[Unit] = []
    group: list[int] = []
    group_bytes = 0

    def close_group() -> None:
        nonlocal group, group_bytes
        if group:
            units.append(Unit(split, group[0], 0, "files", tuple(files[i].url for i in group),
                              weight=group_bytes))
        group, group_bytes = [], 0

    for index, f in enumerate(files):
        url = f.url
        if f.size <= range_bytes or url.endswith(TEXT_SUFFIXES):
            group.append(index)
            group_bytes += f.size
            if group_bytes >= group_limit:
                close_group()
            continue
        close_group()
        if url.endswith(PARQUET_SUFFIXES):
            count = groups[url]
            units += [Unit(split, index, g, "row_group", (url,), g, g + 1, f.size // count)
                      for g in range(count)]
        elif is_compressed(url):
            done = frozenset(r for i, r in finished if i == index)
            plan.streams.append(StreamPlan(split, index, url, f.size, done))
            plan.reused += len(done)
            plan.weight += f.size
        else:
            units += [Unit(split, index, k, "lines", (url,), k * range_bytes,
                           min((k + 1) * range_bytes, f.size),
                           min(range_bytes, f.size - k * range_bytes))
                      for k in range(-(-f.size // range_bytes))]
    close_group()
    for unit in units:
        if unit.key in finished:
            plan.reused += 1
        else:
            plan.units.append(unit)
            plan.weight += unit.weight
    return plan


def _row_groups(paths: list[str]) -> dict[str, int]:
    """The number of row groups of each Parquet file (its footer, read in parallel)."""
    def count(path: str) -> int:
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            with open_input(path) as f:
                return max(1, pq.ParquetFile(f).metadata.num_row_groups)
        except (pa.ArrowInvalid, OSError) as e:
            raise InputError(f"{path}: not a readable Parquet file ({e})") from None

    if not paths:
        return {}
    with ThreadPoolExecutor(min(8, len(paths))) as pool:
        return dict(zip(paths, pool.map(count, paths), strict=True))
