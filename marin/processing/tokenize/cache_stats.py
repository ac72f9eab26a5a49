"""Figures of a token cache, and of every cache under a prefix.

    stats = read_cache_stats("gs://bucket/tokenized/shakespeare-1a2b3c4d")
    stats.total_elements, stats.total_tokens, stats.tokens_per_byte, stats.hit_rate
    for row in prefix_cache_stats("gs://bucket/tokenized"): row.stats or row.error

    marin cache stats gs://bucket/tokenized [--json]

A damaged cache (its ledger unreadable) is one ``CacheError`` line naming it; under a
prefix, it is one row with that line, and the other caches are still read.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any

from marin.processing.tokenize.cache import CacheError, usage_counts
from marin.processing.tokenize.ledger import LEDGER, read_ledger
from marin.storage.files import find

__all__ = ["CacheRow", "TokenizedCacheStats", "find_caches", "prefix_cache_stats",
           "read_cache_stats"]


@dataclass(frozen=True)
class TokenizedCacheStats:
    """Figures of one cache (all splits together unless ``split`` is given).

    ``total_elements`` counts documents. ``hits`` counts reads by training steps plus
    tokenize runs that found the cache complete; ``hit_rate`` is hits over hits and builds.
    """

    path: str
    tokenizer: str
    complete: bool
    total_elements: int
    total_tokens: int
    bytes: int
    shards: int
    tokens_per_byte: float
    replaced_bytes: int
    builds: int
    hits: int
    reads: int

    @property
    def hit_rate(self) -> float:
        uses = self.hits + self.builds
        return self.hits / uses if uses else 0.0

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "hit_rate": self.hit_rate}


@dataclass(frozen=True)
class CacheRow:
    """One cache under a prefix: its figures, or the one line that says why not."""

    path: str
    stats: TokenizedCacheStats | None = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return self.stats.to_json() if self.stats else {"path": self.path, "error": self.error}


def read_cache_stats(path: str, split: str | None = None) -> TokenizedCacheStats:
    ledger = read_ledger(path)
    if ledger is None:
        raise CacheError(f"no token cache at {path} (no {LEDGER})")
    if split is not None and split not in ledger.splits:
        raise CacheError(f"cache {path} has no split {split!r}; it has "
                         f"{', '.join(ledger.splits)}")
    shards = [s for name, split_shards in ledger.splits.items() if split in (None, name)
              for s in split_shards]
    total_tokens = sum(s.tokens for s in shards)
    total_bytes = sum(s.bytes for s in shards)
    usage = usage_counts(path)
    return TokenizedCacheStats(
        path=path, tokenizer=ledger.tokenizer.name, complete=ledger.complete,
        total_elements=sum(s.documents for s in shards), total_tokens=total_tokens,
        bytes=total_bytes, shards=len(shards),
        tokens_per_byte=total_tokens / total_bytes if total_bytes else 0.0,
        replaced_bytes=sum(s.replaced_bytes for s in shards),
        builds=usage["build"], hits=usage["hit"] + usage["read"], reads=usage["read"])


def find_caches(prefix: str) -> list[str]:
    """Every cache (a folder with a ledger) at or under ``prefix``."""
    return sorted(url[: -len(LEDGER) - 1] for url in find(prefix)
                  if url.endswith(f"/{LEDGER}"))


def prefix_cache_stats(prefix: str) -> list[CacheRow]:
    """A row for every cache at or under ``prefix``, read in parallel; a damaged one is a
    row with its error, never an exception that hides the others."""
    def row(path: str) -> CacheRow:
        try:
            return CacheRow(path, stats=read_cache_stats(path))
        except (CacheError, OSError) as e:
            return CacheRow(path, error=str(e).splitlines()[0] if str(e) else repr(e))

    caches = find_caches(prefix)
    with ThreadPoolExecutor(max(1, min(8, len(caches)))) as pool:
        return list(pool.map(row, caches))
