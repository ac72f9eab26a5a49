"""The tokenize step: input documents to a sharded, resumable token cache.

    step = tokenize_step("tokenized/shakespeare", train_paths=["data/plays/*.txt"],
                         validation_paths=["data/sonnets.txt"], tokenizer="gpt2")
    # or, by hand:
    ExecutorStep("tokenized/x", tokenize, TokenizeConfig(train_paths=(...,), tokenizer="gpt2"))

The input files are cut into units of work below the file (``ranges``: byte ranges of
large JSON-lines files, row groups of large Parquet files, chunks of compressed streams,
groups of small files), shared among ``num_processes`` workers (all cores by default;
threads of this process, whose encoders release the GIL: see ``pool``), so every core is
busy whatever the corpus's shape, and memory stays bounded. Each unit becomes one shard;
finished shards are recorded in the cache's ledger in batches, a killed job resumes
without redoing them, and a complete cache is reused (a cache hit) instead of rebuilt.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from marin.execution import ExecutorStep, resumable, this_output_path, unversioned_field
from marin.processing.tokenize.cache import record_usage, remove_partial_files
from marin.processing.tokenize.encoders import load_encoder
from marin.processing.tokenize.inputs import fingerprint_inputs, list_inputs
from marin.processing.tokenize.ledger import Ledger
from marin.processing.tokenize.pool import run_units
from marin.processing.tokenize.progress import TokenizeProgress
from marin.processing.tokenize.ranges import DEFAULT_RANGE_BYTES, Unit, plan_split
from marin.processing.tokenize.records import LedgerRecord, RunCounts, ShardRecord
from marin.processing.tokenize.shard import ShardSettings

__all__ = ["TokenizeConfig", "tokenize", "tokenize_step"]

logger = logging.getLogger("marin.tokenize")


@dataclass(frozen=True)
class TokenizeConfig:
    """What to tokenize, with what, and where the cache goes.

    Attributes:
        train_paths: files, folders or globs (local, gs://, s3:// or any fsspec URL) of .txt,
            .jsonl[.gz|.zst] or .parquet documents.
        validation_paths: the same for the validation split (may be empty).
        tokenizer: ``gpt2``, or a path to a Hugging Face tokenizer.json or a folder with one
            (for example the output of a ``train_tokenizer`` step).
        cache_path: where the cache is written (the step's own output by default).
        text_field: the field (JSON lines) or column (Parquet) holding the text.
        input_fingerprint: identity of the input data (names, sizes and contents: the
            stores' checksums, a hash on local disk), so changed data gets a new version;
            ``tokenize_step`` fills it in.
        num_processes: parallel workers (0: one per core), threads of the step's process.
            Does not change the result.
        batch_size: the most documents in a batch (a batch also ends at 64 KiB of
            text). Does not change the result.
        range_bytes: the size large files are cut at (``ranges``). Changes how the cache
            is sharded, not its token stream; a cache being resumed keeps its own.
        progress_seconds: away from a terminal, a progress line every this many seconds.
    """

    train_paths: tuple[str, ...]
    validation_paths: tuple[str, ...] = ()
    tokenizer: str = "gpt2"
    cache_path: str = this_output_path()
    text_field: str = "text"
    input_fingerprint: str | None = None
    num_processes: int = unversioned_field(default=0)
    batch_size: int = unversioned_field(default=256)
    range_bytes: int = unversioned_field(default=DEFAULT_RANGE_BYTES)
    progress_seconds: float = unversioned_field(default=10.0)


def tokenize_step(name: str, train_paths: Sequence[str], validation_paths: Sequence[str] = (),
                  tokenizer: Any = "gpt2", **options: Any) -> ExecutorStep:
    """An ExecutorStep whose version includes a fingerprint of the input files (literal paths
    only: inputs produced by other steps are identified by those steps' versions)."""
    literal = [p for p in (*train_paths, *validation_paths) if isinstance(p, str)]
    fingerprint = fingerprint_inputs(literal) if literal else None
    config = TokenizeConfig(train_paths=tuple(train_paths),
                            validation_paths=tuple(validation_paths), tokenizer=tokenizer,
                            input_fingerprint=fingerprint, **options)
    return ExecutorStep(name, tokenize, config, description=f"tokenize with {tokenizer}")


@resumable  # its steps resume by default: a new attempt keeps the finished shards
def tokenize(config: TokenizeConfig) -> LedgerRecord:
    """Build the cache (or reuse a complete one); returns its ledger."""
    if not isinstance(config.cache_path, str):
        raise ValueError("TokenizeConfig.cache_path is still a placeholder: run tokenize "
                         "through the executor, or pass cache_path explicitly")
    encoder = load_encoder(config.tokenizer)
    ledger = Ledger.open(config.cache_path, encoder.identity(), config.range_bytes)
    if ledger.complete:
        record_usage(config.cache_path, "hit", {"by": "tokenize"})
        logger.info("token cache %s is complete: reused", config.cache_path)
        return ledger.record
    remove_partial_files(config.cache_path)  # what a killed build was writing
    splits = {"train": list_inputs(config.train_paths)}
    if config.validation_paths:
        splits["validation"] = list_inputs(config.validation_paths)
    plans = [plan_split(split, files, ledger.range_bytes, ledger.finished(split),
                        ledger.group_limit)
             for split, files in splits.items()]
    units = [u for plan in plans for u in plan.units]
    streams = [s for plan in plans for s in plan.streams]
    reused = sum(p.reused for p in plans)
    if reused:  # the ledger an earlier attempt left (the executor copies it in)
        left = f"{len(units)} to build" if not streams else "the rest to build"
        logger.info("resumed: %d unit(s) reused from an earlier attempt, %s (%s)", reused,
                    left, config.cache_path)
    progress = TokenizeProgress(sum(p.weight for p in plans),
                                None if streams else len(units),
                                reused, config.progress_seconds)
    settings = ShardSettings(config.cache_path, config.tokenizer, config.text_field,
                             config.batch_size)
    def done(unit: Unit, shard: ShardRecord) -> None:
        ledger.record_shard(unit.split, shard)
        progress.advance(unit, shard)

    try:
        run_units(units, streams, settings, config.num_processes or _cores(),
                  ledger.range_bytes, done, progress.tick)
    finally:  # what finished stays recorded, whatever stopped the run
        progress.close()
        ledger.flush()
    seconds = time.monotonic() - progress.started
    record = ledger.finish(RunCounts(progress.built, progress.reused, seconds))
    record_usage(config.cache_path, "build", {"seconds": seconds, "built": progress.built,
                                              "reused": progress.reused})
    progress.summary(record, config.cache_path)
    return record


def _cores() -> int:
    """The cores this process may run on (its affinity, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1
