"""The tokenize step's workers: threads of the step's own process.

    run_units(units, streams, settings, workers=2, range_bytes=1 << 20,
              done=lambda unit, record: ledger.record_shard(unit.split, record))

Workers take units from one queue: the chunks a reader thread cuts from compressed
streams first (they hold memory), then the units that read their own bytes (ranges of
plain files, row groups, groups of small files). The reader decodes one stream after the
other and keeps at most ``2 * workers`` chunks waiting, so memory stays bounded whatever
the file sizes. A worker that finds no unit to take while others are still being read
(the end of a run, or a reader behind the workers) encodes their batches instead
(``shard.Helpers``): once no unit waits to be taken, the units being read queue their
batches up to eight ahead, so every core is busy to the end.

The encoders do their work in Rust with Python's GIL released (tiktoken's
``encode_to_numpy``, Hugging Face tokenizers), and hand back one buffer per batch
(``encoders.Encoder.encode_documents``), not a Python int per token: what stays under the
GIL (reading lines, JSON, writing arrays) is a small part of a unit's time, so threads use
every core. Each thread encodes with its own copy of a tiktoken encoding
(``TiktokenEncoder.thread_encoding``), as fast as a process. A failing unit stops the
others at their next batch, and its exception is raised here unchanged.

Design note: the step used to run its workers in processes: forked when called from a
script, and inside the executor (whose runner threads and lease heartbeats make forking
unsafe) from a fresh interpreter the step started. Threads start nothing and import
nothing, load the tokenizer once, and behave the same in a script, in an executor thread
and next to JAX.
"""

from __future__ import annotations

import collections
import queue
import threading
from collections.abc import Callable, Sequence

from marin.processing.tokenize.encoders import load_encoder
from marin.processing.tokenize.ranges import StreamPlan, Unit
from marin.processing.tokenize.records import ShardRecord
from marin.processing.tokenize.shard import Batch, ShardSettings, Stopped, tokenize_unit
from marin.processing.tokenize.streams import stream_chunks

__all__ = ["run_units"]

_DONE = object()


class _Work:
    """Units to take: loaded chunks first, then self-reading units, then batches that
    the units being read hand over (``shard.Helpers``)."""

    def __init__(self, units: Sequence[Unit], capacity: int, streaming: bool):
        self._units = collections.deque(units)
        self._loaded: collections.deque[tuple[Unit, bytes]] = collections.deque()
        self._batches: collections.deque[Batch] = collections.deque()
        self._capacity = capacity
        self._streaming = streaming
        self._reading = 0  # units taken and not finished
        self._cond = threading.Condition()
        self.stop = threading.Event()

    def take(self) -> tuple[Unit, bytes | None] | Batch | None:
        """A unit to tokenize (``unit_done`` when finished), a batch to encode, or None
        when nothing is left."""
        with self._cond:
            while not self.stop.is_set():
                if self._loaded:
                    self._cond.notify_all()  # room for the reader
                    self._reading += 1
                    return self._loaded.popleft()
                if self._units:
                    self._reading += 1
                    return self._units.popleft(), None
                if self._batches:
                    return self._batches.popleft()
                if not self._streaming and not self._reading:
                    return None
                self._cond.wait(0.5)
            return None

    def unit_done(self) -> None:
        with self._cond:
            self._reading -= 1
            self._cond.notify_all()

    def offer(self, texts: list[str]) -> Batch | None:
        """Share the batch once no unit waits to be taken: a worker that finishes its unit
        then finds it queued, rather than waiting for the next one to be read."""
        with self._cond:
            if (self._units or self._loaded or len(self._batches) >= self._capacity
                    or self.stop.is_set()):
                return None
            batch = Batch(texts)
            self._batches.append(batch)
            self._cond.notify_all()  # the reader may be waiting too
            return batch

    def reclaim(self, batch: Batch) -> bool:
        with self._cond:
            try:
                self._batches.remove(batch)
            except ValueError:  # taken by a worker
                return False
            return True

    def put_loaded(self, unit: Unit, data: bytes) -> None:
        with self._cond:
            while len(self._loaded) >= self._capacity and not self.stop.is_set():
                self._cond.wait(0.5)
            if self.stop.is_set():
                raise Stopped(unit.where())
            self._loaded.append((unit, data))
            self._cond.notify_all()

    def streams_done(self) -> None:
        with self._cond:
            self._streaming = False
            self._cond.notify_all()

    def halt(self) -> None:
        with self._cond:
            self.stop.set()
            self._cond.notify_all()


def run_units(units: Sequence[Unit], streams: Sequence[StreamPlan], settings: ShardSettings,
              workers: int, range_bytes: int,
              done: Callable[[Unit, ShardRecord], None],
              tick: Callable[[], None] = lambda: None, tick_seconds: float = 1.0) -> None:
    """Tokenize ``units`` and the chunks of ``streams`` on ``workers`` threads; calls
    ``done(unit, record)`` in this thread as units finish (also, after a failure, for the
    units that finished meanwhile), and ``tick()`` every ``tick_seconds`` between them."""
    if not units and not streams:
        return
    encoder = load_encoder(settings.tokenizer)  # once, before the threads race to load it
    workers = max(1, workers)
    work = _Work(units, 2 * workers, streaming=bool(streams))
    results: queue.Queue = queue.Queue()

    def worker() -> None:
        try:
            while (item := work.take()) is not None:
                if isinstance(item, Batch):
                    item.run(encoder.encode_documents)
                    continue
                unit, data = item
                try:
                    record = tokenize_unit(unit, settings, work.stop, data, work)
                finally:
                    work.unit_done()
                results.put((unit, record))
        except BaseException as e:  # raised in the caller's thread
            results.put((None, e))
        finally:
            results.put((_DONE, None))

    def reader() -> None:
        try:
            for plan in streams:
                read = 0  # the file's bytes read up to the previous chunk (for progress)
                for chunk in stream_chunks(plan.path, range_bytes):
                    weight, read = chunk.raw_offset - read, chunk.raw_offset
                    if chunk.range in plan.finished:
                        continue
                    unit = Unit(plan.split, plan.file, chunk.range, "chunk", (plan.path,),
                                chunk.start, chunk.start + len(chunk.data), weight,
                                chunk.first_line)
                    work.put_loaded(unit, chunk.data)
        except BaseException as e:
            results.put((None, e))
        finally:
            work.streams_done()
            results.put((_DONE, None))

    threads = [threading.Thread(target=worker, name=f"marin-tokenize-{i}", daemon=True)
               for i in range(workers)]
    if streams:
        threads.append(threading.Thread(target=reader, name="marin-tokenize-reader",
                                        daemon=True))
    for t in threads:
        t.start()
    running = len(threads)
    try:
        while running:
            try:
                unit, outcome = results.get(timeout=tick_seconds)
            except queue.Empty:
                tick()
                continue
            if unit is _DONE:
                running -= 1
            elif unit is None:
                if not isinstance(outcome, Stopped):
                    raise outcome
            else:
                done(unit, outcome)
    finally:  # an error or an interrupt: stop the other units, keep what they finished
        work.halt()
        for t in threads:
            t.join()
        while not results.empty():
            unit, outcome = results.get()
            if isinstance(unit, Unit):
                done(unit, outcome)
