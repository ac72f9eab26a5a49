"""Mixtures: sequences drawn from several caches by weight, deterministic in (seed, step), so a
resumed run sees the batches of an uninterrupted one; tokens drawn per component."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from marin.processing.tokenize.loader import DataLoader, MixtureDataset, TokenCacheDataset
from marin.training import DataComponent, train_lm
from tests.helpers.caches import read_split
from tests.helpers.training import tiny_config

SEQ = 64
WEIGHTS = {"plays": 0.7, "docs": 0.3}


@pytest.fixture(scope="module")
def caches(cache: Path, docs_cache: Path) -> dict[str, Path]:
    return {"plays": cache / "cache", "docs": docs_cache}


def _mixture(caches: dict[str, Path], weights=WEIGHTS) -> MixtureDataset:
    return MixtureDataset([(name, TokenCacheDataset(str(caches[name]), SEQ), weights[name])
                           for name in weights])


def _owner(caches: dict[str, Path]) -> dict[bytes, tuple[str, int]]:
    """Every sequence of each cache's training stream, read from its shard files: which
    cache and which sequence it is."""
    out = {}
    for name, path in caches.items():
        stream = read_split(path, "train")
        rows = stream[: len(stream) // SEQ * SEQ].reshape(-1, SEQ)
        out.update({row.astype(np.int32).tobytes(): (name, i) for i, row in enumerate(rows)})
    return out


def test_components_are_drawn_by_weight_and_each_without_repeats(caches):
    mixture, owner = _mixture(caches), _owner(caches)
    loader = DataLoader(mixture, batch_size=8, seed=3)
    steps = 300  # 2400 sequences: more than a block
    drawn = [owner[row.tobytes()] for s in range(steps) for row in loader.batch(s)]
    counts = {name: sum(1 for n, _ in drawn if n == name) for name in WEIGHTS}
    total = len(drawn)
    for name, weight in WEIGHTS.items():  # within 4 standard deviations of a binomial draw
        assert abs(counts[name] - total * weight) <= 4 * math.sqrt(total * weight * (1 - weight))
    assert {k: v // SEQ for k, v in mixture.tokens_by_component(total, seed=3).items()} == counts
    docs = [i for n, i in drawn if n == "docs"]
    size = TokenCacheDataset(str(caches["docs"]), SEQ).num_sequences
    assert len(set(docs[:size])) == min(size, len(docs))  # a whole epoch before a repeat
    per_batch = [sum(1 for n, _ in drawn[s * 8:(s + 1) * 8] if n == "docs")
                 for s in range(steps)]
    assert len(set(per_batch)) > 2  # drawn in a shuffled order, not in a fixed pattern
    other = DataLoader(mixture, batch_size=8, seed=4)
    assert not np.array_equal(other.batch(5), loader.batch(5))


def test_a_weight_of_zero_is_never_drawn(caches):
    mixture = _mixture(caches, {"plays": 1.0, "docs": 0.0})
    owner = _owner(caches)
    loader = DataLoader(mixture, batch_size=8, seed=0)
    assert {owner[row.tobytes()][0] for s in range(20) for row in loader.batch(s)} == {"plays"}


def test_batches_from_a_later_step_are_the_tail_of_a_run_from_zero(caches):
    mixture = _mixture(caches)
    straight = iter(DataLoader(mixture, batch_size=8, seed=1))
    from_zero = [next(straight) for _ in range(270)]
    straight.close()
    for k in (0, 7, 255, 256):  # 256 * 8 = 2048: the first step of the second block
        resumed = iter(DataLoader(_mixture(caches), batch_size=8, seed=1, start_step=k))
        for step, batch in from_zero[k:k + 6]:
            at, got = next(resumed)
            assert at == step
            np.testing.assert_array_equal(got, batch)
        resumed.close()


@pytest.mark.slow  # two real trainings and a resume
def test_a_mixture_run_resumed_from_its_checkpoint_equals_an_uninterrupted_one(
        cache: Path, caches, tmp_path: Path, monkeypatch):
    import marin.training.trainer as trainer

    mixture = tuple(DataComponent(name, str(caches[name]), w) for name, w in WEIGHTS.items())

    def config(out: Path):
        return tiny_config(cache, out, cache_path=None, mixture=mixture, train_steps=8,
                           eval_every=0, checkpoint_every=4, async_checkpoints=False)

    straight = train_lm(config(tmp_path / "straight"))
    original = trainer._Run._checkpoint

    def stop_after_four(self, done, state, record):
        original(self, done, state, record)
        if done == 4:
            raise KeyboardInterrupt("stopped after the checkpoint of step 4")

    monkeypatch.setattr(trainer._Run, "_checkpoint", stop_after_four)
    with pytest.raises(KeyboardInterrupt):
        train_lm(config(tmp_path / "resumed"))
    monkeypatch.setattr(trainer._Run, "_checkpoint", original)
    resumed = train_lm(config(tmp_path / "resumed"))
    assert _losses(tmp_path / "resumed") == _losses(tmp_path / "straight")
    assert resumed == straight
    owner = _owner(caches)
    loader = DataLoader(_mixture(caches), batch_size=8, seed=0)
    drawn = [owner[row.tobytes()][0] for s in range(8) for row in loader.batch(s)]
    assert straight.tokens_by_component == {n: drawn.count(n) * SEQ for n in WEIGHTS}
    assert sum(straight.tokens_by_component.values()) == straight.tokens
    assert set(straight.evals) == set(WEIGHTS)  # no named sets: each component's own split


def _losses(run: Path) -> list[tuple[int, float]]:
    return [(r["step"], r["train/loss"]) for r in map(json.loads, (run / "metrics.jsonl").open())
            if "train/loss" in r]
