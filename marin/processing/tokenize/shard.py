"""Tokenizing one unit of work into one shard: the work one tokenize worker does.

    settings = ShardSettings(cache, "gpt2", "text", batch_size=256)
    record = tokenize_unit(unit, settings)         # a records.ShardRecord
    record.tokens, record.documents
    tokenize_unit(unit, settings, helpers=pool)    # idle workers may encode its batches

Kept apart from the step's coordination (``step.py``, ``pool.py``) so that it needs only
the tokenizer, the input readers and the cache format.

A unit's documents are encoded in batches (``batch_size`` documents or ``BATCH_BYTES`` of
text, whichever comes first) and written in order. With ``helpers`` (the pool, see
``Helpers``), a batch may be handed to a worker that has nothing else to do and encoded
there while this thread reads on; the shard's bytes are the same whoever encodes what.

Design note: ranges are cut by the file alone, so a run ends with fewer ranges left than
workers: with 21 ranges on two workers, one sat idle for the whole of the last range,
a tenth of the run. Idle workers now take batches of the ranges still being read, and a
run's last range is encoded by every core. Batches are queued up to eight ahead of the one
being written (``window``): handing one over only to a worker idle at that moment left the
helper waiting while the reading thread encoded its own, about half of the last range.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from marin.processing.tokenize.cache import token_dtype
from marin.processing.tokenize.documents import DecodeCounter, unit_documents
from marin.processing.tokenize.encoders import load_encoder
from marin.processing.tokenize.ranges import Unit
from marin.processing.tokenize.records import ShardRecord, shard_name
from marin.storage.files import atomic_write, join_url

__all__ = ["BATCH_BYTES", "Batch", "Helpers", "ShardSettings", "Stopped", "tokenize_unit"]

#: A batch ends at this many bytes of text (UTF-8), or at ``batch_size`` documents.
BATCH_BYTES = 64 << 10


@dataclass(frozen=True)
class ShardSettings:
    cache_path: str
    tokenizer: str
    text_field: str = "text"
    batch_size: int = 256


class Stopped(Exception):
    """Another unit failed: this one stops between batches and writes nothing."""


#: A batch encoded: its token stream and the end of each document in it (``encoders``).
Encoded = tuple[np.ndarray, np.ndarray]


class Batch:
    """A batch of texts handed to another thread to encode; ``result`` waits for it."""

    __slots__ = ("_done", "_error", "_ids", "texts")

    def __init__(self, texts: list[str]):
        self.texts = texts
        self._ids: Encoded | None = None
        self._error: BaseException | None = None
        self._done = threading.Event()

    def run(self, encode: Callable[[list[str]], Encoded]) -> None:
        """Encode the batch (in the thread that took it)."""
        try:
            self._ids = encode(self.texts)
        except BaseException as e:  # raised again in the thread that wants the result
            self._error = e
        finally:
            self._done.set()

    def done(self) -> bool:
        return self._done.is_set()

    def result(self) -> Encoded:
        self._done.wait()
        if self._error is not None:
            raise self._error
        return self._ids  # type: ignore[return-value]


class Helpers(Protocol):
    """Workers with nothing else to do, that encode batches of other units."""

    def offer(self, texts: list[str]) -> Batch | None:
        """The batch queued for a worker that finds nothing else to take, or None when
        this thread should encode it now."""
        ...

    def reclaim(self, batch: Batch) -> bool:
        """Take back an offered batch: True when no worker had begun it."""
        ...


def tokenize_unit(unit: Unit, settings: ShardSettings, stop: threading.Event | None = None,
                  data: bytes | None = None, helpers: Helpers | None = None) -> ShardRecord:
    """Tokenize ``unit`` into one shard; its files appear whole or not at all. ``stop``
    (when set) ends the work between two batches with ``Stopped``."""
    encoder = load_encoder(settings.tokenizer)
    dtype = token_dtype(encoder.vocab_size)
    counter = DecodeCounter()
    offsets: list[np.ndarray] = []
    total = documents = empty = text_bytes = 0
    window = 8  # batches read ahead of the one being written
    pending: collections.deque[Encoded | Batch] = collections.deque()
    base = join_url(settings.cache_path, unit.split, shard_name(unit.file, unit.range))
    with atomic_write(f"{base}.tokens") as out:

        def write(encoded: Encoded) -> None:
            nonlocal total
            tokens, ends = encoded
            out.write(tokens.astype(dtype, copy=False).data)
            offsets.append(ends + total)
            total += len(tokens)

        def drain(everything: bool) -> None:
            """Write the finished batches at the head. When the head is still being
            encoded elsewhere and too many wait (or ``everything``), encode here a batch of
            this unit that no helper has begun, the newest first; wait only when none is
            left."""
            while pending:
                head = pending[0]
                if isinstance(head, Batch) and not head.done():
                    if not everything and len(pending) < window:
                        return
                    if not _encode_one(pending, helpers, encoder.encode_documents):
                        head.result()  # every batch begun: wait for the head
                    continue
                pending.popleft()
                write(head.result() if isinstance(head, Batch) else head)

        def flush(texts: list[str]) -> None:
            if stop is not None and stop.is_set():
                raise Stopped(unit.where())
            offered = helpers.offer(texts) if helpers is not None else None
            pending.append(offered if offered is not None else encoder.encode_documents(texts))
            drain(False)

        try:
            batch: list[str] = []
            size = 0
            for text in unit_documents(unit, settings.text_field, counter, data):
                if not text:
                    empty += 1
                    continue
                length = len(text) if text.isascii() else len(
                    text.encode("utf-8", errors="surrogatepass"))
                documents += 1
                text_bytes += length
                size += length
                batch.append(text)
                if len(batch) >= settings.batch_size or size >= BATCH_BYTES:
                    flush(batch)
                    batch, size = [], 0
            if batch:
                flush(batch)
            if stop is not None and stop.is_set():
                raise Stopped(unit.where())
            drain(True)
        finally:  # a failure: batches nobody has begun are withdrawn
            if helpers is not None:
                for item in pending:
                    if isinstance(item, Batch):
                        helpers.reclaim(item)
    with atomic_write(f"{base}.offsets") as f:
        f.write(np.concatenate([np.zeros(0, "<i8"), *offsets]).astype("<i8").tobytes())
    return ShardRecord(file=unit.file, range=unit.range, files=len(unit.paths),
                       input=unit.paths[0], documents=documents, tokens=total,
                       bytes=text_bytes, empty_documents=empty,
                       replaced_bytes=counter.replaced, dtype=dtype.str)


def _encode_one(pending: collections.deque[Encoded | Batch], helpers: Helpers | None,
                encode: Callable[[list[str]], Encoded]) -> bool:
    """Encode, in this thread, the newest batch of ``pending`` that no helper has begun;
    False when there is none."""
    for item in reversed(pending):
        if isinstance(item, Batch) and not item.done() and (
                helpers is None or helpers.reclaim(item)):
            item.run(encode)
            return True
    return False
