"""Figures of a token cache, and of every cache under a prefix.

    stats = read_cache_stats("gs://bucket/tokenized/shakespeare-1a2b3c4d")
    stats.total_elements, stats.total_tokens, stats.tokens_per_byte, stats.hit_rate

    marin cache stats gs://bucket/tokenized [--json]
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from marin.processing.tokenize.cache import LEDGER, CacheError, read_json, usage_counts
from marin.storage.files import find, join_url


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


def read_cache_stats(path: str, split: str | None = None) -> TokenizedCacheStats:
    ledger = read_json(join_url(path, LEDGER))
    if ledger is None:
        raise CacheError(f"no token cache at {path} (no {LEDGER})")
    splits = ledger.get("splits", {})
    if split is not None and split not in splits:
        raise CacheError(f"cache {path} has no split {split!r}; it has {', '.join(splits)}")
    shards = [s for name, shard_map in splits.items() if split in (None, name)
              for s in shard_map.values()]
    total_tokens = sum(s["tokens"] for s in shards)
    total_bytes = sum(s["bytes"] for s in shards)
    usage = usage_counts(path)
    return TokenizedCacheStats(
        path=path, tokenizer=ledger.get("tokenizer", {}).get("name", "?"),
        complete=bool(ledger.get("complete")), total_elements=sum(s["documents"] for s in shards),
        total_tokens=total_tokens, bytes=total_bytes, shards=len(shards),
        tokens_per_byte=total_tokens / total_bytes if total_bytes else 0.0,
        replaced_bytes=sum(s.get("replaced_bytes", 0) for s in shards),
        builds=usage["build"], hits=usage["hit"] + usage["read"], reads=usage["read"])


def find_caches(prefix: str) -> list[str]:
    """Every cache (a folder with a ledger) at or under ``prefix``."""
    return sorted(url[: -len(LEDGER) - 1] for url in find(prefix)
                  if url.endswith(f"/{LEDGER}"))
