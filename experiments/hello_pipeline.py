"""A small, real pipeline: Zipf's law on the English text that ships with Python.

    python experiments/hello_pipeline.py                   # run (outputs under ./local_store)
    python experiments/hello_pipeline.py --dry_run true    # what would run, and why
    marin executor --dry-run experiments/hello_pipeline.py
    python experiments/hello_pipeline.py --fit/zipf.top_k 500   # an override: a new version

Three steps: extract the corpus (the standard library's ``pydoc_data.topics``), count word
frequencies, and fit the exponent s of Zipf's law, frequency ∝ rank^-s, by least squares
in log-log space, the same kind of power-law fit the scaling-law steps make.

Steps write through ``marin.storage.files``, never ``open()``: the same code then works on a
local prefix and on ``MARIN_PREFIX=gs://bucket/experiments`` or ``s3://...``.
"""

from __future__ import annotations

import collections
import json
import math
import re
from dataclasses import dataclass

from marin.execution import (
    ExecutorStep,
    executor_main,
    output_path_of,
    this_output_path,
    unversioned_field,
)
from marin.storage.files import join_url, open_url


@dataclass(frozen=True)
class ExtractConfig:
    output_path: str
    lowercase: bool = True


@dataclass(frozen=True)
class CountConfig:
    corpus_path: str
    output_path: str
    min_length: int = 1


@dataclass(frozen=True)
class FitConfig:
    counts_path: str
    output_path: str
    top_k: int = 1000
    report_every: int = unversioned_field(default=0)


def extract_corpus(config: ExtractConfig) -> None:
    from pydoc_data.topics import topics

    text = "\n\n".join(topics[key] for key in sorted(topics))
    with open_url(join_url(config.output_path, "corpus.txt"), "w", encoding="utf-8") as f:
        f.write(text.lower() if config.lowercase else text)


def count_words(config: CountConfig) -> None:
    with open_url(config.corpus_path, "r", encoding="utf-8") as f:
        words = re.findall(r"[a-z]+", f.read().lower())
    counts = collections.Counter(w for w in words if len(w) >= config.min_length)
    with open_url(join_url(config.output_path, "counts.json"), "w") as f:
        json.dump(dict(counts.most_common()), f)


def fit_zipf(config: FitConfig) -> None:
    with open_url(config.counts_path, "r") as f:
        counts = list(json.load(f).values())[: config.top_k]
    xs = [math.log(rank) for rank in range(1, len(counts) + 1)]
    ys = [math.log(c) for c in counts]
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    covariance = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    slope = covariance / sum((x - mx) ** 2 for x in xs)
    result = {"zipf_exponent": -slope, "log_intercept": my - slope * mx, "ranks_used": n}
    with open_url(join_url(config.output_path, "fit.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(f"Zipf exponent over the top {n} words: s = {-slope:.3f}")


corpus = ExecutorStep("corpus/pydoc_topics", extract_corpus,
                      ExtractConfig(output_path=this_output_path()),
                      description="English text from the standard library's pydoc topics")
counts = ExecutorStep("counts/words", count_words,
                      CountConfig(corpus_path=output_path_of(corpus, "corpus.txt"),
                                  output_path=this_output_path()))
fit = ExecutorStep("fit/zipf", fit_zipf,
                   FitConfig(counts_path=output_path_of(counts, "counts.json"),
                             output_path=this_output_path()))

steps = [fit]

if __name__ == "__main__":
    executor_main(steps, description="Zipf's law on pydoc topics")
