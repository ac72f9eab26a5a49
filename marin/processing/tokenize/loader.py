"""Fixed-length training sequences from a token cache: shuffled by seed, resumable from a
step, read through ``marin.storage.files`` with a prefetching thread.

    dataset = TokenCacheDataset(cache_path, seq_len=1024, expected_tokenizer="gpt2")
    loader = DataLoader(dataset, batch_size=8, seed=0, start_step=1200)
    for step, batch in loader:          # batch: int32 array (8, 1024)
        ...

The cache's token stream (documents separated by the end-of-document token) is cut into
consecutive sequences of ``seq_len`` tokens. Batch ``s`` holds the sequences at positions
``s*B .. s*B+B-1`` of a per-epoch permutation drawn from ``(seed, epoch)``, so any step can
be produced directly: resuming at step ``s`` gives exactly the batches an uninterrupted run
would have seen. Reading runs inside ``marin.data/...`` trace scopes, so a JAX profile shows
time spent loading data.
"""

from __future__ import annotations

import contextlib
import functools
import queue
import threading
from collections.abc import Iterator

import numpy as np

from marin.processing.tokenize.cache import CacheError, record_usage
from marin.processing.tokenize.encoders import load_encoder
from marin.processing.tokenize.ledger import LEDGER, read_ledger
from marin.storage.files import join_url, local_path, url_to_fs


def trace_scope(name: str):
    """A JAX profiler annotation when JAX is loaded; otherwise nothing."""
    import sys

    if "jax" not in sys.modules:
        return contextlib.nullcontext()
    import jax

    return jax.profiler.TraceAnnotation(name)


class TokenCacheDataset:
    def __init__(self, cache_path: str, seq_len: int, split: str = "train",
                 expected_tokenizer: str | None = None, record_read: bool = True):
        ledger = read_ledger(cache_path)
        if ledger is None:
            raise CacheError(f"no token cache at {cache_path} (no {LEDGER}); run the tokenize "
                             "step first")
        if not ledger.complete:
            raise CacheError(f"the token cache at {cache_path} is incomplete (its tokenize "
                             "step did not finish); run it again to resume")
        self.cache_path = cache_path
        self.seq_len = seq_len
        self.tokenizer = ledger.tokenizer
        if expected_tokenizer is not None:
            self._check_tokenizer(expected_tokenizer)
        if split not in ledger.splits:
            raise CacheError(f"the token cache at {cache_path} has no {split!r} split; it has "
                             f"{', '.join(ledger.splits) or 'none'}")
        shards = [s for s in ledger.shards(split) if s.tokens]  # in the stream's order
        self._paths = [join_url(cache_path, split, f"{ledger.shard_name(s)}.tokens")
                       for s in shards]
        self._dtype = np.dtype(shards[0].dtype if shards else "<u2")
        counts = np.array([s.tokens for s in shards], dtype=np.int64)
        self._starts = np.concatenate([[0], np.cumsum(counts)])
        self.total_tokens = int(self._starts[-1])
        self.num_sequences = self.total_tokens // seq_len
        if self.num_sequences == 0:
            raise CacheError(f"the {split!r} split of {cache_path} has {self.total_tokens} "
                             f"tokens, fewer than one sequence of {seq_len}")
        if record_read:
            record_usage(cache_path, "read", {"split": split, "seq_len": seq_len})

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.vocab_size

    def _check_tokenizer(self, expected: str) -> None:
        wanted = load_encoder(expected).identity()
        if wanted["fingerprint"] != self.tokenizer.fingerprint:
            raise CacheError(
                f"the token cache at {self.cache_path} was tokenized with "
                f"{self.tokenizer.name!r} (vocabulary {self.tokenizer.vocab_size}),"
                f" but this step asks for {expected!r} (vocabulary {wanted['vocab_size']}); "
                "tokenize the data with the same tokenizer")

    def tokens(self, start: int, stop: int) -> np.ndarray:
        """Tokens ``start .. stop-1`` of the stream, across shard boundaries."""
        out = []
        first = int(np.searchsorted(self._starts, start, side="right")) - 1
        shard = first
        while start < stop:
            begin = start - int(self._starts[shard])
            end = min(stop, int(self._starts[shard + 1])) - int(self._starts[shard])
            out.append(self._read(shard, begin, end))
            start = int(self._starts[shard]) + end
            shard += 1
        return np.concatenate(out).astype(np.int32)

    def sequence(self, index: int) -> np.ndarray:
        return self.tokens(index * self.seq_len, (index + 1) * self.seq_len)

    def _read(self, shard: int, begin: int, end: int) -> np.ndarray:
        size = self._dtype.itemsize
        mapped = self._mapped(shard)
        if mapped is not None:
            return np.asarray(mapped[begin:end])
        fs, path = url_to_fs(self._paths[shard])
        raw = fs.cat_file(path, start=begin * size, end=end * size)
        return np.frombuffer(raw, dtype=self._dtype)

    @functools.lru_cache(maxsize=64)  # noqa: B019 - one map per shard for the dataset's life
    def _mapped(self, shard: int) -> np.ndarray | None:
        path = local_path(self._paths[shard])
        return None if path is None else np.memmap(path, dtype=self._dtype, mode="r")


class DataLoader:
    """Batches of sequences for each step, deterministic in ``seed`` and the step number."""

    def __init__(self, dataset: TokenCacheDataset, batch_size: int, seed: int = 0,
                 start_step: int = 0, prefetch: int = 2):
        self.dataset = dataset
        self.batch_size = batch_size
        self.seed = seed
        self.start_step = start_step
        self.prefetch = prefetch

    @functools.lru_cache(maxsize=2)  # noqa: B019 - the current and the next epoch
    def _permutation(self, epoch: int) -> np.ndarray:
        return np.random.default_rng([self.seed, epoch]).permutation(self.dataset.num_sequences)

    def indices(self, step: int) -> np.ndarray:
        n = self.dataset.num_sequences
        positions = step * self.batch_size + np.arange(self.batch_size)
        return np.array([self._permutation(int(p // n))[p % n] for p in positions])

    def batch(self, step: int) -> np.ndarray:
        with trace_scope("marin.data/load_batch"):
            return np.stack([self.dataset.sequence(int(i)) for i in self.indices(step)])

    def __iter__(self) -> Iterator[tuple[int, np.ndarray]]:
        ready: queue.Queue = queue.Queue(maxsize=max(1, self.prefetch))
        stop = threading.Event()

        def produce() -> None:
            step = self.start_step
            while not stop.is_set():
                try:
                    item = (step, self.batch(step))
                except Exception as e:  # surfaced in the consumer
                    ready.put(e)
                    return
                while not stop.is_set():
                    try:
                        ready.put(item, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                step += 1

        worker = threading.Thread(target=produce, name="marin-data-prefetch", daemon=True)
        worker.start()
        try:
            while True:
                with trace_scope("marin.data/wait_for_batch"):
                    item = ready.get()
                if isinstance(item, Exception):
                    raise item
                yield item
        finally:
            stop.set()
