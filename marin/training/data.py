"""What a run reads: its training sequences (one cache or a mixture) and its held-out sets.

    data = training_data(config)       # a TokenCacheDataset, or a MixtureDataset
    sets = validation_sets(config)     # EvalSets: the named ones, or the cache's own split
    suite = task_suite(config, dtype)  # the run's downstream tasks, or None

Every cache is checked against the config before any step runs: the tokenizer it was built
with (when ``config.tokenizer`` is given) and a vocabulary no larger than the model's. A
named validation set whose cache has no validation split fails naming the set. Without
named sets, the training cache's own validation split is evaluated (``eval/loss``); for a
mixture, each component's, named by the component; a cache without one is not evaluated.
A task file that cannot be read, or an item that does not fit the model, fails naming the
task (``TrainLmConfig.tasks[i]``), its file and line.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import Any

from marin.evaluation.tasks import TaskError, read_task, task_fingerprint
from marin.processing.tokenize.cache import CacheError
from marin.processing.tokenize.cache_stats import read_cache_stats
from marin.processing.tokenize.loader import MixtureDataset, TokenCacheDataset
from marin.training.config import TrainingConfigError, TrainLmConfig
from marin.training.evaluation import EvalSet

__all__ = ["task_suite", "training_data", "validation_sets"]

logger = logging.getLogger("marin.training")


def training_data(config: TrainLmConfig) -> TokenCacheDataset | MixtureDataset:
    if not config.mixture:
        return _open(config, config.cache_path, "train", "TrainLmConfig.cache_path")
    return MixtureDataset([
        (c.name, _open(config, c.cache_path, "train", f"TrainLmConfig.mixture[{i}]"), c.weight)
        for i, c in enumerate(config.mixture)])


def validation_sets(config: TrainLmConfig) -> tuple[EvalSet, ...]:
    if config.mixture and not config.validation:  # each component's own split, by its name
        found = (_own_split(config, c.cache_path, c.name) for c in config.mixture)
        return tuple(s for s in found if s is not None)
    if not config.validation:
        own = _own_split(config, config.cache_path, None)
        return () if own is None else (own,)
    sets = []
    for i, entry in enumerate(config.validation):
        where = f"TrainLmConfig.validation[{i}] ({entry.name!r})"
        try:
            data = _open(config, entry.cache_path, "validation", where)
        except CacheError as e:
            raise TrainingConfigError(f"{where}: {e}") from None
        sets.append(EvalSet(entry.name, data, _tokens_per_byte(entry.cache_path)))
    return tuple(sets)


def task_suite(config: TrainLmConfig, dtype: Any, place: Callable[[Any], Any] | None = None
               ) -> Any:
    """The ``marin.evaluation.scoring.TaskSuite`` of ``config.tasks`` (None without tasks),
    scored ``config.batch_size`` sequences at a time."""
    if not config.tasks:
        return None
    from marin.evaluation.scoring import TaskSuite, encode_task, make_loglik_fn
    from marin.processing.tokenize.encoders import load_encoder

    encoder = load_encoder(config.tokenizer)
    encoded = []
    for i, task in enumerate(config.tasks):
        try:
            encoded.append(encode_task(task.name, read_task(task.path), encoder,
                                       config.model.seq_len, task_fingerprint(task.path)))
        except TaskError as e:
            raise TrainingConfigError(f"TrainLmConfig.tasks[{i}] ({task.name!r}): {e}") from None
    suite = TaskSuite(tuple(encoded), make_loglik_fn(dtype), config.batch_size)
    return suite if place is None else dataclasses.replace(suite, place=place)


def _own_split(config: TrainLmConfig, path: str, name: str | None) -> EvalSet | None:
    try:
        data = _open(config, path, "validation", "TrainLmConfig.cache_path")
    except CacheError:  # the split is missing, or too short for one sequence
        logger.info("no validation split in %s: it is not evaluated", path)
        return None
    return EvalSet(name, data, _tokens_per_byte(path))


def _open(config: TrainLmConfig, path: str, split: str, field: str) -> TokenCacheDataset:
    # a mixture's components share one tokenizer: the vocabulary check covers each of them
    data = TokenCacheDataset(path, config.model.seq_len, split=split,
                             expected_tokenizer=config.tokenizer,
                             record_read=split == "train")
    if data.vocab_size > config.model.vocab_size:
        raise TrainingConfigError(
            f"the token cache at {path} ({field}) has a vocabulary of {data.vocab_size}, "
            f"larger than the model's TrainLmConfig.model.vocab_size={config.model.vocab_size};"
            " use the tokenizer's vocabulary size for the model")
    return data


def _tokens_per_byte(path: str) -> float:
    return read_cache_stats(path, split="validation").tokens_per_byte
