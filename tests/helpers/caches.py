"""A second token cache beside the plays' (``tests/helpers/training.py``), with the same
tokenizer: the standard library's help texts, for mixtures and named validation sets.

    docs = build_docs_cache(root, folder)   # root: what build_cache returned; folder/cache
    read_split(docs, "validation")   # the split's tokens, read straight from its shards
"""

from __future__ import annotations

import glob
from pathlib import Path

import numpy as np

from marin.processing.tokenize import TokenizeConfig, tokenize


def build_docs_cache(root: Path, folder: Path, train_topics: int = 30,
                     validation_topics: int = 6) -> Path:
    """Help topics tokenized with the plays' tokenizer (``root/tokenizer``) into
    ``folder/cache``: ``train_topics`` to train on, the next ``validation_topics`` to
    validate on (sorted by name). The ``docs_cache`` fixture builds one per session."""
    from pydoc_data.topics import topics

    names = sorted(topics)
    for split, chosen in (("train", names[:train_topics]),
                          ("validation", names[train_topics:train_topics + validation_topics])):
        (folder / split).mkdir(parents=True)
        for name in chosen:
            (folder / split / f"{name}.txt").write_text(topics[name])
    tokenize(TokenizeConfig(train_paths=(str(folder / "train"),),
                            validation_paths=(str(folder / "validation"),),
                            tokenizer=str(root / "tokenizer"), cache_path=str(folder / "cache"),
                            num_processes=1))
    return folder / "cache"


def read_split(cache: Path, split: str) -> np.ndarray:
    """A split's token stream, shard after shard in name order (the stream's order)."""
    shards = sorted(glob.glob(str(cache / split / "*.tokens")))
    return np.concatenate([np.fromfile(p, dtype="<u2") for p in shards]).astype(np.int64)
