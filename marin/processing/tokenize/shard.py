"""Tokenizing one input file into one shard: the work one tokenize worker does.

    result = tokenize_shard(ShardJob("train", 3, "data/a.jsonl", cache, "gpt2", "text", 256))
    result["tokens"], result["documents"]

Kept apart from the step's coordination (``step.py``) so that it needs only the tokenizer,
the input readers and the cache format.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from marin.processing.tokenize.cache import shard_name, token_dtype
from marin.processing.tokenize.encoders import load_encoder
from marin.processing.tokenize.inputs import DecodeCounter, read_documents
from marin.storage.files import atomic_write, join_url


@dataclass(frozen=True)
class ShardJob:
    split: str
    index: int
    path: str
    cache_path: str
    tokenizer: str
    text_field: str
    batch_size: int


class Stopped(Exception):
    """Another shard failed: this one stops between batches and writes nothing."""


def tokenize_shard(job: ShardJob, stop: threading.Event | None = None) -> dict[str, Any]:
    """Tokenize one input file into one shard; its files appear whole or not at all.
    ``stop`` (when set) ends the work between two batches with ``Stopped``."""
    encoder = load_encoder(job.tokenizer)
    dtype = token_dtype(encoder.vocab_size)
    eos = np.array([encoder.eos_id], dtype=dtype)
    counter = DecodeCounter()
    offsets: list[int] = []
    total = documents = empty = text_bytes = 0
    base = join_url(job.cache_path, job.split, shard_name(job.index))
    with atomic_write(f"{base}.tokens") as out:
        batch: list[str] = []

        def flush() -> None:
            nonlocal total
            if stop is not None and stop.is_set():
                raise Stopped(job.path)
            if not batch:
                return
            pieces = []
            for ids in encoder.encode_arrays(batch):
                pieces += (ids, eos)
                total += len(ids) + 1
                offsets.append(total)
            np.concatenate(pieces).astype(dtype, copy=False).tofile(out)
            batch.clear()

        for text in read_documents(job.path, counter, job.text_field):
            if not text:
                empty += 1
                continue
            documents += 1
            text_bytes += len(text.encode("utf-8"))
            batch.append(text)
            if len(batch) >= job.batch_size:
                flush()
        flush()
    with atomic_write(f"{base}.offsets") as f:
        f.write(np.asarray(offsets, dtype="<i8").tobytes())
    return {"input": job.path, "documents": documents, "tokens": total, "bytes": text_bytes,
            "empty_documents": empty, "replaced_bytes": counter.replaced,
            "dtype": dtype.str}
