"""Tracker overhead: the tiny model's step time with all three trackers against none.

    python bench/bench_trackers.py [steps] [rounds]

One process trains the same run (the tests' tiny model and corpus, ``log_every=1``) with no
trackers and with ``json``, ``tensorboard`` and ``wandb`` (offline), alternately, in
``rounds`` rounds. A step's time is the wall-clock time between consecutive records of
``metrics.jsonl`` (the update, the hooks and the trackers' queue); each run gives the
median over its steps after the first five, and a round's overhead compares its two runs.
The median overhead over the rounds is printed with its range, since one run on a shared
machine can be off by tens of percent. Goal: trackers add at most 1% to the step time.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from marin.trackers import TrackerConfig
from marin.training import train_lm
from tests.helpers.training import build_cache, tiny_config

TRACKERS = [TrackerConfig("json"), TrackerConfig("tensorboard"),
            TrackerConfig("wandb", project="bench", mode="offline")]


def step_times(run: Path) -> list[float]:
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    walls = [r["wall_time"] for r in records if "train/loss" in r]
    return [b - a for a, b in itertools.pairwise(walls[5:])]


def main(steps: int = 150, rounds: int = 5) -> None:
    os.environ.pop("WANDB_API_KEY", None)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "data").mkdir()
        cache = build_cache(root / "data")
        medians: dict[str, list[float]] = {"none": [], "trackers": []}
        for i in range(2 * rounds):
            kind = ("none", "trackers")[i % 2]
            run = root / f"run{i}" / "train" / "tiny"
            config = tiny_config(cache, run, train_steps=steps, eval_every=0, log_every=1,
                                 checkpoint_every=0,
                                 trackers=TRACKERS if kind == "trackers" else [])
            train_lm(dataclasses.replace(config))
            medians[kind].append(statistics.median(step_times(run)))
        overheads = sorted(t / p - 1 for p, t in zip(medians["none"], medians["trackers"],
                                                     strict=True))
        plain, tracked = (statistics.median(medians[k]) for k in ("none", "trackers"))
        print(f"step time, median of {rounds} runs each of {steps} steps: no trackers "
              f"{1e3 * plain:.2f} ms, json+tensorboard+wandb {1e3 * tracked:.2f} ms; "
              f"overhead {100 * statistics.median(overheads):+.2f}% "
              f"({100 * overheads[0]:+.2f}%..{100 * overheads[-1]:+.2f}%; goal <= 1%)")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
