"""The token cache on disk or in a bucket.

    <cache>/ledger.json                      tokenizer, range size, shards finished, totals,
                                             complete flag (``records.LedgerRecord``)
    <cache>/ledger.journal/                  shards finished since (``ledger``); gone once
                                             the cache is complete
    <cache>/<split>/shard-00003-00012.tokens token ids of range 12 of input file 3,
                                             little-endian uint16 (uint32 if the vocabulary
                                             needs it), documents back to back, each
                                             followed by the end-of-document token
    <cache>/<split>/shard-00003-00012.offsets int64 end offset of each document
    <cache>/.usage/<event>-<time>-<id>.json  one small file per build, hit or read

A shard is one unit of work (``ranges``): a range of a large input file, or one or more
small files whole. It is written through ``marin.storage.files.atomic_write`` (a temporary
name moved into place; a single upload on object stores), and counts only once the ledger
lists it: a killed job resumes with the shards the ledger has, and a complete cache is never
rebuilt. Caches of the first format (``shard-00003``, one per input file) read unchanged.

    record_usage(cache, "read", {"split": "train"}); usage_counts(cache)["read"]
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import time
import uuid
from typing import Any

import numpy as np

from marin.processing.tokenize.records import CacheError
from marin.storage.files import atomic_write, join_url, local_path, url_to_fs

__all__ = ["USAGE", "CacheError", "record_usage", "remove_partial_files", "token_dtype",
           "usage_counts"]

USAGE = ".usage"
_PARTIAL = re.compile(r"^\..+\.tmp-[0-9a-f]{32}$")  # ``atomic_write``'s temporaries


def remove_partial_files(cache_path: str) -> int:
    """Remove the temporaries a killed build left in a local cache (never counted: a
    shard counts once renamed into place and listed); returns how many. On object stores
    temporaries are local files of the writer, so nothing is left in the bucket."""
    root = local_path(cache_path)
    removed = 0
    if root is None or not os.path.isdir(root):
        return 0
    for folder, _, names in os.walk(root):
        for name in names:
            if _PARTIAL.match(name):
                os.unlink(os.path.join(folder, name))
                removed += 1
    return removed


def token_dtype(vocab_size: int) -> np.dtype:
    return np.dtype("<u2") if vocab_size <= 65536 else np.dtype("<u4")


def record_usage(cache_path: str, event: str, detail: dict[str, Any] | None = None) -> None:
    """Append one usage event (``build``, ``hit`` or ``read``) as its own small file, so
    concurrent readers never race on a shared counter."""
    name = f"{event}-{time.time():.6f}-{uuid.uuid4().hex[:8]}.json"
    with atomic_write(join_url(cache_path, USAGE, name), "w") as f:
        json.dump({"event": event, "time": time.time(), **(detail or {})}, f, indent=1)


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
