"""Packed runs: each member of a pack trains as it would alone, and fails alone."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from marin.processing.tokenize.cache import CacheError
from marin.training import TrainingConfigError, TrainingDivergedError, train_lm
from marin.training.checkpoint import complete_checkpoints
from marin.training.packing import pack_shape, pack_train
from tests.helpers.training import tiny_config

pytestmark = pytest.mark.slow

STEPS = 5


def _member(cache: Path, out: Path, seed: int, learning_rate: float, **optimizer):
    config = tiny_config(cache, out, train_steps=STEPS, seed=seed, compute_dtype="float32",
                         checkpoint_every=3, async_checkpoints=False)
    return dataclasses.replace(config, optimizer=dataclasses.replace(
        config.optimizer, learning_rate=learning_rate, adam_learning_rate=learning_rate,
        **optimizer))


def _losses(folder: Path) -> list[float]:
    records = [json.loads(line) for line in (folder / "metrics.jsonl").open()]
    return [r["train/loss"] for r in records if "train/loss" in r]


def test_each_member_of_a_pack_trains_as_it_would_alone(cache: Path, tmp_path: Path):
    settings = [(0, 0.01), (1, 0.003), (7, 0.03)]  # seed: model and data order
    packed = [_member(cache, tmp_path / f"pack-{i}", s, lr) for i, (s, lr) in
              enumerate(settings)]
    alone = [_member(cache, tmp_path / f"alone-{i}", s, lr) for i, (s, lr) in
             enumerate(settings)]
    outcomes = pack_train(packed)
    summaries = [train_lm(config) for config in alone]
    assert [o.error for o in outcomes] == [None] * 3
    for i, (outcome, summary) in enumerate(zip(outcomes, summaries, strict=True)):
        ours, theirs = _losses(tmp_path / f"pack-{i}"), _losses(tmp_path / f"alone-{i}")
        assert len(ours) == STEPS
        np.testing.assert_allclose(ours, theirs, rtol=1e-6)
        assert outcome.summary.eval_loss == pytest.approx(summary.eval_loss, rel=1e-6)
        written = json.loads((tmp_path / f"pack-{i}" / "summary.json").read_text())
        assert written["eval_loss"] == outcome.summary.eval_loss
        assert [s for s, _ in complete_checkpoints(str(tmp_path / f"pack-{i}" / "checkpoints"))
                ] == [s for s, _ in complete_checkpoints(str(tmp_path / f"alone-{i}"
                                                              / "checkpoints"))]
    # the members really differ: other seeds and learning rates give other losses
    first = [_losses(tmp_path / f"pack-{i}")[-1] for i in range(3)]
    assert len(set(first)) == 3
    # a member's checkpoints are a run's: without its last one, it resumes alone from step 3
    saved = dict(complete_checkpoints(str(tmp_path / "pack-1" / "checkpoints")))
    assert sorted(saved) == [3, 5]
    shutil.rmtree(saved[5])
    resumed = train_lm(packed[1])
    assert resumed.final_step_loss == pytest.approx(summaries[1].final_step_loss, rel=1e-6)
    np.testing.assert_allclose(_losses(tmp_path / "pack-1"), _losses(tmp_path / "alone-1"),
                               rtol=1e-6)


def test_a_diverging_member_fails_alone_and_the_others_go_on(cache: Path, tmp_path: Path):
    plain = {"optimizer": "adamw", "warmup_fraction": 0.0, "max_grad_norm": 0.0}
    good = _member(cache, tmp_path / "good", 0, 3e-3, **plain)
    bad = _member(cache, tmp_path / "bad", 0, 1e38, **plain)
    other = _member(cache, tmp_path / "other", 2, 3e-3, **plain)
    outcomes = pack_train([good, bad, other])
    assert outcomes[0].error is None and outcomes[2].error is None
    assert isinstance(outcomes[1].error, TrainingDivergedError)
    assert "learning_rate" in str(outcomes[1].error)
    assert outcomes[1].summary is None and not (tmp_path / "bad" / "summary.json").exists()
    assert all(np.isfinite(_losses(tmp_path / "bad")))
    assert len(_losses(tmp_path / "bad")) < STEPS
    alone = train_lm(dataclasses.replace(other, output_path=str(tmp_path / "alone")))
    np.testing.assert_allclose(_losses(tmp_path / "other"), _losses(tmp_path / "alone"),
                               rtol=1e-6)
    assert outcomes[2].summary.eval_loss == pytest.approx(alone.eval_loss, rel=1e-6)


def test_runs_of_other_shapes_are_refused_before_anything_trains(cache: Path,
                                                                 tmp_path: Path):
    a = _member(cache, tmp_path / "a", 0, 0.01)
    b = dataclasses.replace(a, output_path=str(tmp_path / "b"), batch_size=4)
    assert pack_shape(a) == pack_shape(dataclasses.replace(b, batch_size=8, seed=3))
    with pytest.raises(TrainingConfigError, match=r"member 1 .* differs .* in batch_size"):
        pack_train([a, b])
    with pytest.raises(TrainingConfigError, match="share an output_path"):
        pack_train([a, dataclasses.replace(a, seed=1)])
    with pytest.raises(TrainingConfigError, match=r"member 1 .*profile_steps"):
        pack_train([a, dataclasses.replace(b, batch_size=8, profile_steps=(1, 2))])
    missing = dataclasses.replace(b, batch_size=8, cache_path=str(tmp_path / "nowhere"))
    with pytest.raises(CacheError, match=r"no token cache at .*nowhere"):
        pack_train([a, missing])
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_a_pack_resumes_from_its_members_common_checkpoint(cache: Path, tmp_path: Path):
    configs = [_member(cache, tmp_path / f"m{i}", i, lr) for i, lr in enumerate((0.01, 0.02))]
    pack_train(configs)
    before = [_losses(tmp_path / f"m{i}") for i in range(2)]
    last = [dict(complete_checkpoints(str(tmp_path / f"m{i}" / "checkpoints")))[5]
            for i in range(2)]
    shutil.rmtree(last[0])  # member 0 stands at step 3, member 1 at step 5
    with pytest.raises(TrainingConfigError, match=r"different checkpointed steps .*m0: step 3"
                       r".*m1: step 5"):
        pack_train(configs)
    assert _losses(tmp_path / "m1") == before[1]  # nothing lost
    shutil.rmtree(last[1])
    outcomes = pack_train(configs)
    for i, outcome in enumerate(outcomes):
        assert outcome.error is None
        np.testing.assert_allclose(_losses(tmp_path / f"m{i}"), before[i], rtol=1e-6)
