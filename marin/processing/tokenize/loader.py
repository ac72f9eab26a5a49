"""Fixed-length training sequences from a token cache, or from a weighted mixture of
caches: shuffled by seed, resumable from a step, read through ``marin.storage.files`` with
a prefetching thread.

    dataset = TokenCacheDataset(cache_path, seq_len=1024, expected_tokenizer="gpt2")
    loader = DataLoader(dataset, batch_size=8, seed=0, start_step=1200)
    for step, batch in loader:          # batch: int32 array (8, 1024)
        ...
    mixed = MixtureDataset([("plays", plays, 0.7), ("docs", docs, 0.3)])
    DataLoader(mixed, batch_size=8, seed=0).batch(12)
    mixed.tokens_by_component(8 * 1000, seed=0)     # {"plays": ..., "docs": ...}

The cache's token stream (documents separated by the end-of-document token) is cut into
consecutive sequences of ``seq_len`` tokens. Batch ``s`` holds the sequences at positions
``s*B .. s*B+B-1`` of a per-epoch permutation drawn from ``(seed, epoch)``, so any step can
be produced directly: resuming at step ``s`` gives exactly the batches an uninterrupted run
would have seen.

A mixture cuts the stream of positions into blocks of ``MixtureDataset.BLOCK`` sequences.
Each block holds a fixed number of sequences of each component, the weights' shares of the
block (largest remainders), in an order drawn from ``(seed, block)``; the ``k``-th sequence
a component gives is position ``k`` of that component's own shuffled stream, as above. The
component and sequence at any position are then computed directly, without replaying the
steps before it: a resumed run sees exactly the batches of an uninterrupted one, and the
tokens drawn from each component up to a step are known in closed form.

Reading runs inside ``marin.data/...`` trace scopes, so a JAX profile shows time spent
loading data.
"""

from __future__ import annotations

import contextlib
import functools
import queue
import threading
from collections.abc import Iterator, Sequence

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

    def indices_at(self, positions: np.ndarray, seed: Sequence[int]) -> np.ndarray:
        """The sequence at each position of the stream shuffled by ``seed``: each epoch a
        permutation of every sequence, drawn from ``(*seed, epoch)``."""
        n = self.num_sequences
        return np.array([self._permutation(tuple(seed), int(p // n))[p % n]
                         for p in positions], dtype=np.int64)

    def sequences_at(self, positions: np.ndarray, seed: int) -> np.ndarray:
        return np.stack([self.sequence(int(i)) for i in self.indices_at(positions, (seed,))])

    @functools.lru_cache(maxsize=4)  # noqa: B019 - the current and the next epoch
    def _permutation(self, seed: tuple[int, ...], epoch: int) -> np.ndarray:
        return np.random.default_rng([*seed, epoch]).permutation(self.num_sequences)

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


class MixtureDataset:
    """Sequences drawn from several token caches in proportion to their weights.

    Args:
        components: ``(name, dataset, weight)`` for each cache, every dataset of the same
            ``seq_len``; weights are relative (>= 0, not all 0).
    """

    BLOCK = 2048  # sequences per block: the resolution at which the weights are exact
    _ORDER, _COMPONENT = 0x6D6978, 0x636F6D70  # keep the seeds apart from a single cache's

    def __init__(self, components: Sequence[tuple[str, TokenCacheDataset, float]]):
        self.names = [name for name, _, _ in components]
        self.datasets = [data for _, data, _ in components]
        weights = np.array([float(w) for _, _, w in components])
        if len(components) == 0 or (weights < 0).any() or weights.sum() <= 0:
            raise ValueError("a mixture needs components with weights >= 0, not all 0")
        if len({d.seq_len for d in self.datasets}) != 1:
            raise ValueError("the datasets of a mixture must have one seq_len")
        self.seq_len = self.datasets[0].seq_len
        self.quotas = _largest_remainders(weights / weights.sum(), self.BLOCK)

    @functools.lru_cache(maxsize=4)  # noqa: B019 - the blocks being read
    def _block(self, seed: int, block: int) -> tuple[np.ndarray, np.ndarray]:
        """Each position's component in the block, and how many of the block's positions
        before it took the same component."""
        members = np.repeat(np.arange(len(self.quotas)), self.quotas)
        order = np.random.default_rng([seed, self._ORDER, block]).permutation(members)
        rank = np.empty(len(order), dtype=np.int64)
        for c in range(len(self.quotas)):
            where = order == c
            rank[where] = np.arange(int(where.sum()))
        return order, rank

    def draw(self, positions: np.ndarray, seed: int) -> list[tuple[int, int]]:
        """``(component, sequence index in its dataset)`` at each stream position."""
        out = []
        for p in positions:
            block, offset = divmod(int(p), self.BLOCK)
            order, rank = self._block(seed, block)
            c = int(order[offset])
            ordinal = block * int(self.quotas[c]) + int(rank[offset])
            index = self.datasets[c].indices_at(np.array([ordinal]),
                                                (seed, self._COMPONENT, c))[0]
            out.append((c, int(index)))
        return out

    def sequences_at(self, positions: np.ndarray, seed: int) -> np.ndarray:
        return np.stack([self.datasets[c].sequence(i) for c, i in self.draw(positions, seed)])

    def tokens_by_component(self, positions: int, seed: int) -> dict[str, int]:
        """Tokens drawn from each component by stream positions ``0 .. positions-1``."""
        blocks, rest = divmod(positions, self.BLOCK)
        counts = blocks * self.quotas
        if rest:  # whole blocks are the quotas; the last one, what its order put first
            counts = counts + np.bincount(self._block(seed, blocks)[0][:rest],
                                          minlength=len(self.quotas))
        return {name: int(n) * self.seq_len for name, n in zip(self.names, counts,
                                                                 strict=True)}


def _largest_remainders(shares: np.ndarray, total: int) -> np.ndarray:
    """Whole numbers summing to ``total`` in proportion to ``shares`` (Hamilton's method;
    ties go to the earlier component)."""
    exact = shares * total
    counts = np.floor(exact).astype(np.int64)
    left = total - int(counts.sum())
    order = np.argsort(-(exact - counts), kind="stable")
    counts[order[:left]] += 1
    return counts


class DataLoader:
    """Batches of sequences for each step, deterministic in ``seed`` and the step number,
    from a ``TokenCacheDataset`` or a ``MixtureDataset``.

    With ``host_count`` above 1 each batch is this host's slice of the global batch of
    ``batch_size`` sequences: the ``host_index``-th of ``host_count`` equal parts, read
    alone, so the hosts of a multi-host run together read each global batch once."""

    def __init__(self, dataset: TokenCacheDataset | MixtureDataset, batch_size: int,
                 seed: int = 0, start_step: int = 0, prefetch: int = 2,
                 host_index: int = 0, host_count: int = 1):
        if batch_size % host_count or not 0 <= host_index < host_count:
            raise ValueError(f"a batch of {batch_size} sequences cannot be cut into "
                             f"{host_count} equal slices (host {host_index})")
        self.dataset = dataset
        self.batch_size = batch_size
        self.seed = seed
        self.start_step = start_step
        self.prefetch = prefetch
        self.host_index, self.host_count = host_index, host_count

    def positions(self, step: int) -> np.ndarray:
        """The stream positions of this host's sequences of step ``step``."""
        rows = self.batch_size // self.host_count
        return step * self.batch_size + self.host_index * rows + np.arange(rows)

    def indices(self, step: int) -> np.ndarray:
        """The sequences of step ``step`` (of a single cache)."""
        return self.dataset.indices_at(self.positions(step), (self.seed,))

    def batch(self, step: int) -> np.ndarray:
        with trace_scope("marin.data/load_batch"):
            return self.dataset.sequences_at(self.positions(step), self.seed)

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
