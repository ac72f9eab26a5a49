"""The tokenize step's workers: threads of the step's own process.

    for job, result in run_shards(jobs, workers=2):   # in completion order
        ledger.record_shard(job.split, shard_name(job.index), result)

The encoders do their work in Rust with Python's GIL released (tiktoken's
``encode_to_numpy``, Hugging Face tokenizers), and hand back one buffer per document, not a
Python int per token: what stays under the GIL (reading lines, JSON, writing arrays) is
under a tenth of a shard's time, so threads use every core. Each thread encodes with its own
copy of a tiktoken encoding (``TiktokenEncoder.thread_encoding``), as fast as a process. A
failing shard stops the others at their next batch, and its exception is raised here
unchanged.

Design note: the step used to run its workers in processes: forked when called from a
script, and inside the executor (whose runner threads and lease heartbeats make forking
unsafe) from a fresh interpreter the step started, which imported the tokenizer code and
loaded the tokenizer before the first document was read. Threads start nothing and import
nothing, load the tokenizer once, and behave the same in a script, in an executor thread
and next to JAX. ``bench/bench_tokenize.py`` measures them against process pools, standalone
and inside the executor, in one interleaved run.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any

from marin.processing.tokenize.encoders import load_encoder
from marin.processing.tokenize.shard import ShardJob, tokenize_shard


def run_shards(jobs: list[ShardJob], workers: int
               ) -> Iterator[tuple[ShardJob, dict[str, Any]]]:
    """Tokenize ``jobs`` on ``workers`` threads; yields (job, result) as shards finish."""
    if not jobs:
        return
    load_encoder(jobs[0].tokenizer)  # once, before the threads race to load it
    stop = threading.Event()
    pool = ThreadPoolExecutor(max(1, min(workers, len(jobs))),
                              thread_name_prefix="marin-tokenize")
    try:
        pending: dict[Future, ShardJob] = {pool.submit(tokenize_shard, j, stop): j
                                           for j in jobs}
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                yield pending.pop(future), future.result()
    finally:  # an error, an interrupt or an abandoned generator: stop the other shards
        stop.set()
        pool.shutdown(wait=True, cancel_futures=True)
