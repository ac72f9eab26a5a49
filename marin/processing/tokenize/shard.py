"""Tokenizing one unit of work into one shard: the work one tokenize worker does.

    settings = ShardSettings(cache, "gpt2", "text", batch_size=256)
    record = tokenize_unit(unit, settings)         # a records.ShardRecord
    record.tokens, record.documents

Kept apart from the step's coordination (``step.py``, ``pool.py``) so that it needs only
the tokenizer, the input readers and the cache format.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from marin.processing.tokenize.cache import token_dtype
from marin.processing.tokenize.documents import DecodeCounter, unit_documents
from marin.processing.tokenize.encoders import load_encoder
from marin.processing.tokenize.ranges import Unit
from marin.processing.tokenize.records import ShardRecord, shard_name
from marin.storage.files import atomic_write, join_url

__all__ = ["ShardSettings", "Stopped", "tokenize_unit"]


@dataclass(frozen=True)
class ShardSettings:
    cache_path: str
    tokenizer: str
    text_field: str = "text"
    batch_size: int = 256


class Stopped(Exception):
    """Another unit failed: this one stops between batches and writes nothing."""


def tokenize_unit(unit: Unit, settings: ShardSettings, stop: threading.Event | None = None,
                  data: bytes | None = None) -> ShardRecord:
    """Tokenize ``unit`` into one shard; its files appear whole or not at all. ``stop``
    (when set) ends the work between two batches with ``Stopped``."""
    encoder = load_encoder(settings.tokenizer)
    dtype = token_dtype(encoder.vocab_size)
    eos = np.array([encoder.eos_id], dtype=dtype)
    counter = DecodeCounter()
    offsets: list[int] = []
    total = documents = empty = text_bytes = 0
    base = join_url(settings.cache_path, unit.split, shard_name(unit.file, unit.range))
    with atomic_write(f"{base}.tokens") as out:
        batch: list[str] = []

        def flush() -> None:
            nonlocal total
            if stop is not None and stop.is_set():
                raise Stopped(unit.where())
            if not batch:
                return
            pieces = []
            for ids in encoder.encode_arrays(batch):
                pieces += (ids, eos)
                total += len(ids) + 1
                offsets.append(total)
            np.concatenate(pieces).astype(dtype, copy=False).tofile(out)
            batch.clear()

        for text in unit_documents(unit, settings.text_field, counter, data):
            if not text:
                empty += 1
                continue
            documents += 1
            text_bytes += len(text.encode("utf-8", errors="surrogatepass"))
            batch.append(text)
            if len(batch) >= settings.batch_size:
                flush()
        flush()
    with atomic_write(f"{base}.offsets") as f:
        f.write(np.asarray(offsets, dtype="<i8").tobytes())
    return ShardRecord(file=unit.file, range=unit.range, files=len(unit.paths),
                       input=unit.paths[0], documents=documents, tokens=total,
                       bytes=text_bytes, empty_documents=empty,
                       replaced_bytes=counter.replaced, dtype=dtype.str)
