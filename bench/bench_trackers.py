"""Tracker overhead: the tiny model's step time with all three trackers against none.

    python bench/bench_trackers.py [steps] [rounds]

One process trains the same run (the tests' tiny model and corpus, ``log_every=1``) with no
trackers, with ``json``, ``tensorboard`` and ``wandb`` (offline) as marin runs them (in a
process of their own, ``marin.trackers.process``), and with the same trackers on a thread
of the training process (how they ran before: the baseline of the fix), in ``rounds``
rounds whose order rotates. A step's time is the wall-clock time between consecutive
records of ``metrics.jsonl``; each run gives the median over its steps after the first
five, and its mean; a round's overheads compare its runs with trackers to its run without.
A second figure leaves out, in every run of a round, as many first steps as the trackers of
its own-process run took to start (``started_at`` in ``trackers.json``: importing W&B and
TensorBoard and starting the W&B run take seconds of CPU, once per run). The median
overhead over the rounds is printed with its range, and the load average before and after,
since on a shared machine one run can be off by tens of percent. Goal: trackers add at most
1% to the step time.
"""

from __future__ import annotations

import itertools
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from marin.trackers import TrackerConfig
from marin.trackers.fanout import Trackers
from marin.trackers.record import FILE, started_at
from marin.training import hooks, train_lm
from tests.helpers.training import build_cache, tiny_config

TRACKERS = [TrackerConfig("json"), TrackerConfig("tensorboard"),
            TrackerConfig("wandb", project="bench", mode="offline")]
KINDS = ("none", "process", "thread")


def step_walls(run: Path) -> list[float]:
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [r["wall_time"] for r in records if "train/loss" in r]


def times(walls: list[float], skip: int = 5) -> list[float]:
    return [b - a for a, b in itertools.pairwise(walls[skip:])]


def train(cache: Path, run: Path, kind: str, steps: int) -> tuple[list[float], int]:
    """The run's step walls, and how many steps had begun when its trackers had started."""
    config = tiny_config(cache, run, train_steps=steps, eval_every=0, log_every=1,
                         checkpoint_every=0, trackers=TRACKERS if kind != "none" else [])
    start = hooks.start_trackers
    if kind == "thread":  # the trackers on a thread of the training process
        hooks.start_trackers = Trackers.open
    try:
        train_lm(config)
    finally:
        hooks.start_trackers = start
    walls = step_walls(run)
    record = run / FILE
    begun = started_at(json.loads(record.read_text())) if record.exists() else None
    return walls, (sum(w <= begun for w in walls) if begun is not None else 0)


def _range(values: list[float]) -> str:
    return (f"{100 * statistics.median(values):+.2f}% ({100 * min(values):+.2f}%.."
            f"{100 * max(values):+.2f}%)")


def main(steps: int = 1000, rounds: int = 7) -> None:
    os.environ.pop("WANDB_API_KEY", None)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "data").mkdir()
        cache = build_cache(root / "data")
        medians: dict[str, list[float]] = {k: [] for k in KINDS}
        means: dict[str, list[float]] = {k: [] for k in KINDS}
        steady: dict[str, list[float]] = {k: [] for k in KINDS}
        starts = []
        for i in range(rounds):
            walls, begun = {}, {}
            for kind in KINDS[i % 3:] + KINDS[:i % 3]:
                walls[kind], begun[kind] = train(cache, root / f"run{i}-{kind}" / "train" /
                                                 "tiny", kind, steps)
                medians[kind].append(statistics.median(times(walls[kind])))
                means[kind].append(statistics.mean(times(walls[kind])))
            skip = max(5, begun["process"])
            starts.append(begun["process"])
            if skip < steps - 20:  # else the trackers were starting all run long
                for kind in KINDS:
                    steady[kind].append(statistics.median(times(walls[kind], skip)))
    load_after = os.getloadavg()
    plain = statistics.median(medians["none"])
    print(f"{rounds} rounds of {steps} steps; load average {load_before[0]:.2f} before, "
          f"{load_after[0]:.2f} after")
    print(f"step time, median of the runs' medians: no trackers {1e3 * plain:.2f} ms; the "
          f"trackers' own process had started after {statistics.median(starts):.0f} steps "
          f"({min(starts)}..{max(starts)})")
    for kind, what in (("process", "json+tensorboard+wandb (own process)"),
                       ("thread", "the same on a thread (before)")):
        by_median = [t / p - 1 for p, t in zip(medians["none"], medians[kind], strict=True)]
        by_mean = [t / p - 1 for p, t in zip(means["none"], means[kind], strict=True)]
        by_steady = [t / p - 1 for p, t in zip(steady["none"], steady[kind], strict=True)]
        once = (f"{_range(by_steady)} on the median step once started ({len(by_steady)} "
                "rounds)" if by_steady else "no round outlasted the trackers' start")
        print(f"{what}: {1e3 * statistics.median(medians[kind]):.2f} ms; overhead "
              f"{_range(by_median)} on the median step, {_range(by_mean)} on the mean, "
              f"{once} (goal <= 1%)")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
