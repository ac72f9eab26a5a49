"""The ledger of a token cache: which shards are finished, recorded in batches.

    ledger = Ledger.open(cache, encoder_identity, range_bytes=1 << 20)
    ledger.record("train", shard)        # kept in memory, written with the next batch
    ledger.flush()                        # one small journal file for every record since
    ledger.finish(RunCounts(built=12))    # ledger.json whole and complete; journal removed
    read_ledger(cache)                    # LedgerRecord (journal merged), or None

    <cache>/ledger.json                          the record (``records.LedgerRecord``)
    <cache>/ledger.journal/<time>-<id>.json      shards finished since ledger.json was written

A shard counts as finished only once a journal batch (or ``ledger.json``) lists it, and
its files are written before it is recorded: a killed build resumes with the shards
listed, and redoes the others, whose files it writes again whole.

Design note: the ledger used to be rewritten whole after every shard, quadratic in the
number of shards (10,000 ranges of a large corpus). Records are now written in batches,
every ``flush_seconds`` or ``flush_records``, each batch a new small file (object stores
cannot append); ``finish`` folds them into ``ledger.json`` once.
"""

from __future__ import annotations

import dataclasses
import json
import posixpath
import re
import time
import uuid

from marin.processing.tokenize.records import (
    CacheError,
    LedgerRecord,
    RunCounts,
    ShardRecord,
    TokenizerIdentity,
    decode_shards,
    parse_json,
)
from marin.storage.files import atomic_write, find, join_url, open_url, url_to_fs

__all__ = ["FLUSH_RECORDS", "FLUSH_SECONDS", "JOURNAL", "LEDGER", "Ledger", "read_ledger"]

LEDGER = "ledger.json"
JOURNAL = "ledger.journal"
#: A journal batch is written when the oldest record waiting is this old, or this many wait.
FLUSH_SECONDS = 2.0
FLUSH_RECORDS = 1000
_BATCH = re.compile(r"^\d{20}-[0-9a-f]{8}\.json$")


def read_ledger(cache_path: str) -> LedgerRecord | None:
    """The cache's ledger with its journal merged in; None when there is no ledger."""
    where = join_url(cache_path, LEDGER)
    try:
        with open_url(where, "rb") as f:
            raw = f.read()
    except (FileNotFoundError, IsADirectoryError):
        return None
    record = LedgerRecord.decode(raw, where)
    if record.complete:
        return record
    for batch in find(join_url(cache_path, JOURNAL)):
        if not _BATCH.match(posixpath.basename(batch)):
            continue  # a batch being written (or left half-written by a kill): not counted
        with open_url(batch, "rb") as f:
            data = parse_json(f.read(), batch)
        if not isinstance(data, dict) or not isinstance(data.get("splits"), dict):
            raise CacheError(f"{batch}: the cache's ledger is damaged: not a journal batch; "
                             "delete the cache folder to build it again")
        try:
            for split, shards in data["splits"].items():
                record = record.with_shards(split, list(decode_shards(shards, split)))
        except ValueError as e:
            raise CacheError(f"{batch}: the cache's ledger is damaged: {e}; delete the cache "
                             "folder to build it again") from None
    return record


class Ledger:
    """The ledger of a cache being built (one builder at a time: the step's lease)."""

    def __init__(self, cache_path: str, record: LedgerRecord, *,
                 flush_seconds: float | None = None, flush_records: int | None = None):
        self.cache_path = cache_path
        self.record = record
        self.flush_seconds = FLUSH_SECONDS if flush_seconds is None else flush_seconds
        self.flush_records = FLUSH_RECORDS if flush_records is None else flush_records
        self._pending: list[tuple[str, ShardRecord]] = []
        self._last_flush = time.monotonic()
        self._header_written = False

    @classmethod
    def open(cls, cache_path: str, tokenizer: dict | TokenizerIdentity, range_bytes: int,
             **options: float) -> Ledger:
        """The cache's ledger, or a new one. A cache begun by another tokenizer is an
        error; one begun with another range size keeps its own (its shards stay valid)."""
        identity = (tokenizer if isinstance(tokenizer, TokenizerIdentity)
                    else TokenizerIdentity.from_data(tokenizer))
        existing = read_ledger(cache_path)
        if existing is not None and existing.tokenizer.fingerprint != identity.fingerprint:
            raise CacheError(f"the cache at {cache_path} was built with tokenizer "
                             f"{existing.tokenizer.name!r}, not {identity.name!r}; use another "
                             "cache path")
        if existing is None or (not existing.complete and existing.range_bytes == 0):
            # nothing yet, or an unfinished build of the one-shard-per-file layout: start over
            ledger = cls(cache_path, LedgerRecord(identity, range_bytes, range_bytes),
                         **options)
        else:
            ledger = cls(cache_path, existing, **options)
            ledger._header_written = True
        return ledger

    @property
    def complete(self) -> bool:
        return self.record.complete

    @property
    def range_bytes(self) -> int:
        return self.record.range_bytes

    @property
    def group_limit(self) -> int:
        return self.record.group_limit

    def finished(self, split: str) -> set[tuple[int, int]]:
        """The (file, range) of every shard of ``split`` already recorded."""
        return {s.key for s in self.record.shards(split)}

    def record_shard(self, split: str, shard: ShardRecord) -> None:
        self._pending.append((split, shard))
        if (len(self._pending) >= self.flush_records
                or time.monotonic() - self._last_flush >= self.flush_seconds):
            self.flush()

    def flush(self) -> None:
        """Write every record since the last flush as one journal batch."""
        self._last_flush = time.monotonic()
        if not self._pending:
            return
        if not self._header_written:
            self._write_ledger()
        name = f"{time.time_ns():020d}-{uuid.uuid4().hex[:8]}.json"
        batch = self._take_pending()
        with atomic_write(join_url(self.cache_path, JOURNAL, name), "w") as f:
            json.dump({"splits": {k: [s.to_data() for s in v] for k, v in batch.items()}}, f,
                      sort_keys=True)

    def finish(self, run: RunCounts) -> LedgerRecord:
        """Mark the cache complete: ``ledger.json`` lists every shard; the journal goes."""
        self._take_pending()
        self.record = dataclasses.replace(self.record, complete=True, finished_at=time.time(),
                                          last_run=run)
        self._write_ledger()
        fs, path = url_to_fs(join_url(self.cache_path, JOURNAL))
        if fs.exists(path):
            fs.rm(path, recursive=True)
        return self.record

    def _take_pending(self) -> dict[str, list[ShardRecord]]:
        """The records since the last flush, by split, merged into ``self.record``."""
        by_split: dict[str, list[ShardRecord]] = {}
        for split, shard in self._pending:
            by_split.setdefault(split, []).append(shard)
        for split, shards in by_split.items():
            self.record = self.record.with_shards(split, shards)
        self._pending.clear()
        return by_split

    def _write_ledger(self) -> None:
        with atomic_write(join_url(self.cache_path, LEDGER)) as f:
            f.write(self.record.encode())
        self._header_written = True

