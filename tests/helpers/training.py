"""A tiny trainer setup on real text: a BPE tokenizer, a token cache, a 2-layer model.

    root = build_cache(tmp_path)                 # tokenizer/ and cache/ under root
    config = tiny_config(root, tmp_path / "run", train_steps=6)
    train_lm(config)
    model, opt_state = initial_state(config)     # the shapes a checkpoint restores into
    slow_saves_from_environment()                # MARIN_TEST_SAVE_SLEEP: a slow store

The ``cache`` fixture in ``tests/conftest.py`` builds one per test session.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

from marin.models import TransformerConfig
from marin.processing.tokenize import (
    TokenizeConfig,
    TrainTokenizerConfig,
    tokenize,
    train_tokenizer,
)
from marin.training import TrainLmConfig
from marin.training.hyperparameters import OptimizerHyperparameters
from tests.helpers.corpus import plays

VOCAB = 512


def build_cache(root: Path) -> Path:
    """Seven plays to train on and one to validate on, tokenized with a BPE of VOCAB."""
    (root / "train").mkdir()
    (root / "validation").mkdir()
    texts = plays(8)
    for play in texts[:7]:
        shutil.copy(play, root / "train" / f"{play.stem}.txt")
    shutil.copy(texts[7], root / "validation" / f"{texts[7].stem}.txt")
    train_tokenizer(TrainTokenizerConfig(input_paths=(str(root / "train"),), vocab_size=VOCAB,
                                         output_path=str(root / "tokenizer")))
    tokenize(TokenizeConfig(train_paths=(str(root / "train"),),
                            validation_paths=(str(root / "validation"),),
                            tokenizer=str(root / "tokenizer"), cache_path=str(root / "cache"),
                            num_processes=1))
    return root


def tiny_config(cache: Path, out: Path, **changes) -> TrainLmConfig:
    config = TrainLmConfig(
        cache_path=str(cache / "cache"),
        model=TransformerConfig(hidden_dim=64, intermediate_dim=192, num_layers=2, num_heads=4,
                                num_kv_heads=2, vocab_size=VOCAB, seq_len=64),
        batch_size=8, train_steps=120, tokenizer=str(cache / "tokenizer"),
        optimizer=OptimizerHyperparameters(learning_rate=0.01, adam_learning_rate=0.01,
                                           epsilon=1e-8, beta1=0.9, beta2=0.98,
                                           optimizer="adamh", warmup_fraction=0.05),
        output_path=str(out), eval_every=40, log_every=1000)
    return dataclasses.replace(config, **changes)


def initial_state(config: TrainLmConfig):
    """(model, optimizer state) of a fresh run of ``config``: what its checkpoints hold."""
    import equinox as eqx
    import jax

    from marin.models.transformer import TransformerLM
    from marin.training.optimizer import build_optimizer

    model = TransformerLM.init(config.model, key=jax.random.PRNGKey(config.seed))
    params = eqx.filter(model, eqx.is_inexact_array)
    tx, _ = build_optimizer(config.optimizer, config.train_steps, params)
    return model, tx.init(params)


def slow_saves_from_environment() -> None:
    """Make each checkpoint save of this process wait ``$MARIN_TEST_SAVE_SLEEP`` seconds
    after it starts (default 0): a slow store, so that a test can stop a run between two
    checkpoints. For experiment files that tests run as executor processes; once per
    process, and only where the variable is set."""
    import os
    import time

    from marin.training.checkpoint import Checkpoints

    save = Checkpoints.save
    if not os.environ.get("MARIN_TEST_SAVE_SLEEP") or getattr(save, "slowed", False):
        return

    def slow_save(self, step, state, meta) -> None:
        save(self, step, state, meta)
        time.sleep(float(os.environ.get("MARIN_TEST_SAVE_SLEEP", "0")))

    slow_save.slowed = True  # type: ignore[attr-defined]
    Checkpoints.save = slow_save  # type: ignore[method-assign]
