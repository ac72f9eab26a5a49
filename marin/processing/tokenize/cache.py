"""The token cache on disk or in a bucket.

    <cache>/ledger.json                      tokenizer, shards finished, totals, complete flag
    <cache>/<split>/shard-00003.tokens       token ids, little-endian uint16 (uint32 if the
                                             vocabulary needs it), documents back to back,
                                             each followed by the end-of-document token
    <cache>/<split>/shard-00003.offsets      int64 end offset of each document
    <cache>/.usage/<event>-<time>-<id>.json  one small file per build, hit or read

A shard is one input file. It is written through ``marin.storage.files.atomic_write`` (a
temporary name moved into place; a single upload on object stores), and counts only once
the ledger lists it:
a killed job resumes with the shards the ledger has, and a complete cache is never rebuilt.
"""

from __future__ import annotations

import json
import posixpath
import time
import uuid
from dataclasses import dataclass
from typing import Any

import numpy as np

from marin.storage.files import atomic_write, join_url, open_url, url_to_fs

LEDGER = "ledger.json"
USAGE = ".usage"
FORMAT_VERSION = 1


class CacheError(ValueError):
    """A token cache is missing, incomplete, or does not match what was asked of it."""


def token_dtype(vocab_size: int) -> np.dtype:
    return np.dtype("<u2") if vocab_size <= 65536 else np.dtype("<u4")


def shard_name(index: int) -> str:
    return f"shard-{index:05d}"


def write_json(dest: str, data: dict[str, Any]) -> None:
    with atomic_write(dest, "w") as f:
        json.dump(data, f, indent=1)


def read_json(path: str) -> dict[str, Any] | None:
    try:
        with open_url(path, "r") as f:
            return json.load(f)
    except FileNotFoundError:
        return None
    except json.JSONDecodeError as e:
        raise CacheError(f"{path} is not valid JSON ({e.msg}); the cache is damaged") from None


@dataclass
class Ledger:
    cache_path: str
    data: dict[str, Any]

    @classmethod
    def open(cls, cache_path: str, tokenizer: dict[str, Any]) -> Ledger:
        existing = read_json(join_url(cache_path, LEDGER))
        if existing is None:
            return cls(cache_path, {"format": FORMAT_VERSION, "tokenizer": tokenizer,
                                    "splits": {}, "complete": False})
        if existing.get("tokenizer", {}).get("fingerprint") != tokenizer["fingerprint"]:
            raise CacheError(
                f"the cache at {cache_path} was built with tokenizer "
                f"{existing.get('tokenizer', {}).get('name')!r}, not {tokenizer['name']!r}; "
                "use another cache path")
        return cls(cache_path, existing)

    @property
    def complete(self) -> bool:
        return bool(self.data.get("complete"))

    def shards(self, split: str) -> dict[str, dict[str, Any]]:
        return self.data["splits"].setdefault(split, {})

    def record_shard(self, split: str, name: str, stats: dict[str, Any]) -> None:
        self.shards(split)[name] = stats
        self.save()

    def finish(self, summary: dict[str, Any]) -> None:
        self.data.update(summary, complete=True, finished_at=time.time())
        self.save()

    def save(self) -> None:
        write_json(join_url(self.cache_path, LEDGER), self.data)


def record_usage(cache_path: str, event: str, detail: dict[str, Any] | None = None) -> None:
    """Append one usage event (``build``, ``hit`` or ``read``) as its own small file, so
    concurrent readers never race on a shared counter."""
    name = f"{event}-{time.time():.6f}-{uuid.uuid4().hex[:8]}.json"
    write_json(join_url(cache_path, USAGE, name), {"event": event, "time": time.time(),
                                               **(detail or {})})


def usage_counts(cache_path: str) -> dict[str, int]:
    fs, path = url_to_fs(join_url(cache_path, USAGE))
    try:
        names = [posixpath.basename(p) for p in fs.ls(path, detail=False)]
    except FileNotFoundError:
        names = []
    counts = {"build": 0, "hit": 0, "read": 0}
    for name in names:
        event = name.split("-", 1)[0]
        if event in counts:
            counts[event] += 1
    return counts
