"""The tokenize step: input documents to a sharded, resumable token cache.

    step = tokenize_step("tokenized/shakespeare", train_paths=["data/plays/*.txt"],
                         validation_paths=["data/sonnets.txt"], tokenizer="gpt2")
    # or, by hand:
    ExecutorStep("tokenized/x", tokenize, TokenizeConfig(train_paths=(...,), tokenizer="gpt2"))

Each input file becomes one shard, tokenized by one of ``num_processes`` workers (all cores
by default; threads of this process, whose encoders release the GIL: see ``pool``) while
memory stays bounded: documents are encoded in batches and written out as they come.
Finished shards are recorded in the cache's ledger; a killed job resumes from them, and a
complete cache is reused (a cache hit) instead of rebuilt.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from marin.execution.step import ExecutorStep, this_output_path, unversioned_field
from marin.processing.tokenize.cache import Ledger, record_usage, shard_name
from marin.processing.tokenize.encoders import load_encoder
from marin.processing.tokenize.inputs import expand_inputs, fingerprint_inputs
from marin.processing.tokenize.pool import run_shards
from marin.processing.tokenize.shard import ShardJob

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
        input_fingerprint: identity of the input data (sizes, mtimes, etags), so changed
            data gets a new version; ``tokenize_step`` fills it in.
        num_processes: parallel workers (0: one per core), threads of the step's process.
            Does not change the result.
        batch_size: documents encoded per call. Does not change the result.
    """

    train_paths: tuple[str, ...]
    validation_paths: tuple[str, ...] = ()
    tokenizer: str = "gpt2"
    cache_path: str = this_output_path()
    text_field: str = "text"
    input_fingerprint: str | None = None
    num_processes: int = unversioned_field(default=0)
    batch_size: int = unversioned_field(default=256)


def tokenize_step(name: str, train_paths: Sequence[str], validation_paths: Sequence[str] = (),
                  tokenizer: Any = "gpt2", **options: Any) -> ExecutorStep:
    """An ExecutorStep whose version includes a fingerprint of the input files (literal paths
    only: inputs produced by other steps are identified by those steps' versions)."""
    literal = [p for p in (*train_paths, *validation_paths) if isinstance(p, str)]
    fingerprint = fingerprint_inputs(literal) if literal else None
    config = TokenizeConfig(train_paths=tuple(train_paths),
                            validation_paths=tuple(validation_paths), tokenizer=tokenizer,
                            input_fingerprint=fingerprint, **options)
    return ExecutorStep(name, tokenize, config, description=f"tokenize with {tokenizer}",
                        resumable=True)  # a new attempt keeps the finished shards


def tokenize(config: TokenizeConfig) -> dict[str, Any]:
    """Build the cache (or reuse a complete one); returns the ledger's summary."""
    if not isinstance(config.cache_path, str):
        raise ValueError("TokenizeConfig.cache_path is still a placeholder: run tokenize "
                         "through the executor, or pass cache_path explicitly")
    encoder = load_encoder(config.tokenizer)
    ledger = Ledger.open(config.cache_path, encoder.identity())
    if ledger.complete:
        record_usage(config.cache_path, "hit", {"by": "tokenize"})
        logger.info("token cache %s is complete: reused", config.cache_path)
        return ledger.data
    splits = {"train": expand_inputs(config.train_paths)}
    if config.validation_paths:
        splits["validation"] = expand_inputs(config.validation_paths)
    jobs = [ShardJob(split, i, path, config.cache_path, config.tokenizer, config.text_field,
                      config.batch_size)
            for split, files in splits.items() for i, path in enumerate(files)
            if shard_name(i) not in ledger.shards(split)]
    started = time.monotonic()
    _run_jobs(jobs, ledger, config.num_processes or _cores())
    summary = _summary(ledger, time.monotonic() - started)
    ledger.finish(summary)
    record_usage(config.cache_path, "build", {"seconds": summary["build_seconds"]})
    _report(summary, config.cache_path)
    return ledger.data


def _run_jobs(jobs: list[ShardJob], ledger: Ledger, workers: int) -> None:
    progress = _progress(len(jobs))
    for job, result in run_shards(jobs, workers):
        ledger.record_shard(job.split, shard_name(job.index), result)
        progress(job)


def _cores() -> int:
    """The cores this process may run on (its affinity, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _progress(total: int):
    count = {"done": 0}
    started = time.monotonic()

    def advance(job: ShardJob) -> None:
        count["done"] += 1
        logger.info("tokenized shard %d/%d (%s) after %.1fs", count["done"], total, job.path,
                    time.monotonic() - started)

    return advance


def _summary(ledger: Ledger, seconds: float) -> dict[str, Any]:
    totals: dict[str, Any] = {}
    for split in ledger.data["splits"]:
        shards = ledger.shards(split).values()
        totals[split] = {key: sum(s[key] for s in shards) for key in
                         ("documents", "tokens", "bytes", "empty_documents", "replaced_bytes")}
        totals[split]["shards"] = len(shards)
    return {"totals": totals, "build_seconds": seconds}


def _report(summary: dict[str, Any], cache_path: str) -> None:
    for split, t in summary["totals"].items():
        logger.info("%s: %s documents, %s tokens in %s shards (%s)", split, t["documents"],
                    t["tokens"], t["shards"], cache_path)
        if t["replaced_bytes"]:
            logger.warning("%s: %d undecodable byte(s) replaced with U+FFFD; see the ledger's "
                           "replaced_bytes per shard", split, t["replaced_bytes"])
        if t["empty_documents"]:
            logger.warning("%s: %d empty document(s) skipped", split, t["empty_documents"])
