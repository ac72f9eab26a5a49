"""Tokenizing one input file into one shard: the work a tokenize worker process does.

Kept apart from the step's coordination (``step.py``) so that worker processes import only
what they need: the tokenizer, the input readers and the cache format.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from typing import Any

import numpy as np

from marin.processing.tokenize.cache import join, shard_name, token_dtype, write_file_atomically
from marin.processing.tokenize.encoders import load_encoder
from marin.processing.tokenize.inputs import DecodeCounter, read_documents


@dataclass(frozen=True)
class ShardJob:
    split: str
    index: int
    path: str
    cache_path: str
    tokenizer: str
    text_field: str
    batch_size: int


def tokenize_shard(job: ShardJob) -> dict[str, Any]:
    """Tokenize one input file into one shard; runs in a worker process."""
    encoder = load_encoder(job.tokenizer)
    dtype = token_dtype(encoder.vocab_size)
    counter = DecodeCounter()
    offsets: list[int] = []
    total = documents = empty = text_bytes = 0
    folder = tempfile.mkdtemp(prefix="marin-shard-")
    tokens_tmp = os.path.join(folder, "tokens")
    with open(tokens_tmp, "wb") as out:
        batch: list[str] = []

        def flush() -> None:
            nonlocal total
            for ids in encoder.encode_batch(batch):
                ids.append(encoder.eos_id)
                np.asarray(ids, dtype=dtype).tofile(out)
                total += len(ids)
                offsets.append(total)
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
    offsets_tmp = os.path.join(folder, "offsets")
    np.asarray(offsets, dtype="<i8").tofile(offsets_tmp)
    base = join(job.cache_path, job.split, shard_name(job.index))
    write_file_atomically(tokens_tmp, f"{base}.tokens")
    write_file_atomically(offsets_tmp, f"{base}.offsets")
    os.rmdir(folder)
    return {"input": job.path, "documents": documents, "tokens": total, "bytes": text_bytes,
            "empty_documents": empty, "replaced_bytes": counter.replaced,
            "dtype": dtype.str}


