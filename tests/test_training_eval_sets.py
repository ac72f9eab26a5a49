"""Named validation sets: each evaluated at every evaluation, bits per byte checked against an
independent count (decoded bytes, token losses from a separate forward pass)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import equinox as eqx
import haliax as hax
import jax
import numpy as np
import pytest

from marin.models.transformer import Axes, TransformerLM
from marin.processing.tokenize.encoders import load_encoder
from marin.training import TrainingConfigError, ValidationSet, read_summary, train_lm
from marin.training.checkpoint import Checkpoints
from marin.training.optimizer import build_optimizer
from tests.helpers.caches import read_split
from tests.helpers.training import tiny_config

pytestmark = pytest.mark.slow


def _trained_model(config, run: Path) -> TransformerLM:
    model = TransformerLM.init(config.model, key=jax.random.PRNGKey(config.seed))
    params = eqx.filter(model, eqx.is_inexact_array)
    tx, _ = build_optimizer(config.optimizer, config.train_steps, params)
    (model, _), _ = Checkpoints(str(run / "checkpoints")).restore(
        config.train_steps, like=(model, tx.init(params)))
    return model


def _reference(model: TransformerLM, cache: Path, tokenizer: Path, seq_len: int
               ) -> tuple[float, float, int]:
    """(summed next-token loss in nats, tokens per byte, tokens scored) of a whole
    validation split: float64 log-softmax in numpy over the model's logits, bytes counted
    from the decoded text."""
    stream = read_split(cache, "validation")
    encoder = load_encoder(str(tokenizer))
    text = encoder.tokenizer.decode([int(t) for t in stream if t != encoder.eos_id])
    tokens_per_byte = len(stream) / len(text.encode("utf-8"))
    sequences = stream[: len(stream) // seq_len * seq_len].reshape(-1, seq_len)
    ax = Axes(model.config)
    logits = np.asarray(model(hax.named(sequences.astype(np.int32),
                                        (hax.Axis("batch", len(sequences)), ax.Pos))).array,
                        dtype=np.float64)[:, :-1]
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    picked = np.take_along_axis(log_probs, sequences[:, 1:, None], axis=-1)[..., 0]
    return float(-picked.sum()), tokens_per_byte, picked.size


def test_every_set_is_scored_and_bits_per_byte_match_an_independent_count(
        cache: Path, docs_cache: Path, tmp_path: Path):
    docs = docs_cache
    run = tmp_path / "run"
    config = tiny_config(cache, run, train_steps=12, eval_every=4, compute_dtype="float32",
                         eval_batches=10_000,  # every sequence of both splits
                         validation=(ValidationSet("plays", str(cache / "cache")),
                                     ValidationSet("docs", str(docs))))
    summary = train_lm(config)
    records = [json.loads(line) for line in (run / "metrics.jsonl").open()]
    keys = ("eval/plays/loss", "eval/plays/bpb", "eval/docs/loss", "eval/docs/bpb",
            "eval/macro_loss", "eval/macro_bpb", "eval/loss", "eval/bpb")
    evaluated = [r for r in records if any(k.startswith("eval/") for k in r)]
    assert [r["step"] for r in evaluated] == [4, 8, 12]
    assert all(set(keys) <= set(r) for r in evaluated)

    model = _trained_model(config, run)
    figures = {}
    for name, path in (("plays", cache / "cache"), ("docs", docs)):
        nats, tokens_per_byte, scored = _reference(model, path, cache / "tokenizer", 64)
        figures[name] = (nats, tokens_per_byte, scored)
        loss = nats / scored
        assert summary.evals[name].loss == pytest.approx(loss, rel=1e-4)
        assert summary.evals[name].bpb == pytest.approx(loss * tokens_per_byte / math.log(2),
                                                        rel=1e-4)
    plays, docs_figures = figures["plays"], figures["docs"]
    assert abs(plays[1] - docs_figures[1]) > 0.01  # each set's own bytes: the check can tell
    nats = plays[0] + docs_figures[0]
    bits_over_bytes = nats / math.log(2) / (plays[2] / plays[1] + docs_figures[2] /
                                            docs_figures[1])
    assert summary.eval_loss == pytest.approx(nats / (plays[2] + docs_figures[2]), rel=1e-4)
    assert summary.eval_bpb == pytest.approx(bits_over_bytes, rel=1e-4)
    assert summary.macro_bpb == pytest.approx(
        (summary.evals["plays"].bpb + summary.evals["docs"].bpb) / 2, rel=1e-12)
    assert summary.metric("docs/bpb") == summary.evals["docs"].bpb
    assert read_summary(str(run)) == summary
    final = evaluated[-1]
    assert final["eval/docs/bpb"] == summary.evals["docs"].bpb


def test_without_named_sets_the_training_caches_split_is_recorded_as_before(cache: Path,
                                                                           tmp_path: Path):
    config = tiny_config(cache, tmp_path / "run", train_steps=4, eval_every=0,
                         compute_dtype="float32", eval_batches=10_000)
    summary = train_lm(config)
    nats, tokens_per_byte, scored = _reference(_trained_model(config, tmp_path / "run"),
                                               cache / "cache", cache / "tokenizer", 64)
    assert summary.eval_loss == pytest.approx(nats / scored, rel=1e-4)
    assert summary.eval_bpb == pytest.approx(nats / scored * tokens_per_byte / math.log(2),
                                             rel=1e-4)
    assert summary.evals == {} and summary.macro_bpb == summary.eval_bpb
    last = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[-1])
    assert not any(k.startswith("eval/macro") for k in last)


def test_a_named_set_without_a_validation_split_is_refused_naming_it(cache: Path,
                                                                    tmp_path: Path):
    from marin.processing.tokenize import TokenizeConfig, tokenize

    only_train = tmp_path / "only-train"
    tokenize(TokenizeConfig(train_paths=(str(cache / "validation"),),  # one play
                            tokenizer=str(cache / "tokenizer"), cache_path=str(only_train),
                            num_processes=1))
    config = tiny_config(cache, tmp_path / "run", train_steps=2,
                         validation=(ValidationSet("plays", str(cache / "cache")),
                                     ValidationSet("bare", str(only_train))))
    with pytest.raises(TrainingConfigError, match=r"^TrainLmConfig.validation\[1\] \('bare'\):"
                       r" the token cache at .* has no 'validation' split"):
        train_lm(config)
    assert not (tmp_path / "run" / "summary.json").exists()
