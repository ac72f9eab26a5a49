"""The tiny IsoFLOP study setup the study tests share: a heuristic whose runs take seconds,
its budgets, and corpora of two plays each.

    corpus = play_corpus(tmp_path / "plays", first=0)    # plays 0 and 1: train, validation
    steps = isoflop_study("cmp", {"plays": corpus}, BUDGETS, TINY,
                          tokenizer_vocab_size=VOCAB, predict_budget=HELD_OUT)
"""

from __future__ import annotations

import shutil
from pathlib import Path

from marin.scaling_laws.scaling_heuristics import CompletedAdamhHeuristic
from marin.scaling_laws.study import StudyCorpus
from tests.helpers.corpus import plays

VOCAB = 300
# three candidates (hidden 8, 16, 24) at each budget, one run at the held-out budget: a fixed
# batch of 4 sequences of 16 tokens and 9 to 42 steps per run, so the study takes seconds
TINY = CompletedAdamhHeuristic(
    vocab_size=VOCAB, seq_len=16, hardware="cpu", devices=1, min_hidden=8, max_hidden=24,
    hidden_step=8, head_dim=8, large_step_budget=1e30, target_steps=10**9, min_batch_size=4,
    max_batch_size=4, min_train_steps=6, budget_tolerance=0.1, reference_batch_size=4,
    reference_tokens=1e4, lr_base=0.01, adam_lr_base=0.003, max_learning_rate=0.05,
    min_tokens_per_param=0.01, max_tokens_per_param=400)
BUDGETS = (6e7, 1.2e8)
HELD_OUT = 2.4e8


def play_corpus(root: Path, first: int) -> StudyCorpus:
    """Play ``first`` to train on and the next one to validate on, copied under ``root``."""
    texts = plays(first + 2)[first:]
    for folder in ("train", "validation"):
        (root / folder).mkdir(parents=True)
    shutil.copy(texts[0], root / "train" / f"{texts[0].stem}.txt")
    shutil.copy(texts[1], root / "validation" / f"{texts[1].stem}.txt")
    return StudyCorpus(train=(str(root / "train"),), validation=(str(root / "validation"),))


def plays_corpus(root: Path, count: int = 5) -> StudyCorpus:
    """``count`` plays as one corpus under ``root``: all but the last to train on, the last
    to validate on."""
    import shutil

    from tests.helpers.corpus import plays

    texts = plays(count)
    for folder in ("train", "validation"):
        (root / folder).mkdir(parents=True)
    for play in texts[:-1]:
        shutil.copy(play, root / "train" / f"{play.stem}.txt")
    shutil.copy(texts[-1], root / "validation" / f"{texts[-1].stem}.txt")
    return StudyCorpus(train=(str(root / "train"),), validation=(str(root / "validation"),))
