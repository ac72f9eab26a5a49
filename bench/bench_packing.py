"""Packed runs against the same runs one after another: training throughput on the same cores.

    python bench/bench_packing.py [--hidden 32 --batch 8 --seq 64 --steps 40 --packs 1,2,4,8]
    python bench/bench_packing.py --executor 4    # the same K runs as executor steps

For each K, K runs of the tiny model (seeds 0..K-1, learning rates apart) train on a real
token cache (``tests/helpers/training.py``), first one after another with ``train_lm``, then
as one pack with ``pack_train``, in this process. Reported for each: tokens/s and steps/s
(member steps: K runs of S steps are K x S) over the whole run, wall clock, initialisation,
compilation, evaluation and checkpoints included (what a study waits for), and over the
steps alone (the median step time in ``metrics.jsonl``, compilation left out); each as the
ratio of packed to separate, measured in the same run. Both sides share one persistent
compilation cache, fresh for the bench, and each runs once untimed first, so the timed runs
find their programs cached, as every run of a study but the first of its shape does: what
is left of compilation is tracing, lowering and loading, once per run apart and once per
pack. Goal: packing K > 1 raises both.

With ``--executor K`` it times the main job instead: K training steps (``ExecutorStep`` of
``train_lm``) run by one ``Executor`` with packing off (``pack=1``, one step after another)
and on (``pack=K``), each on a fresh prefix after an untimed run of each side, and prints
the wall clock of each invocation (planning, leases, commits included) and their ratio.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from marin.execution import Executor, ExecutorStep, StepState, this_output_path
from marin.training import metric_names as names
from marin.training import train_lm
from marin.training.packing import pack_train
from tests.helpers.training import build_cache, tiny_config


def _configs(cache: Path, out: Path, k: int, args: argparse.Namespace) -> list:
    configs = []
    for i in range(k):
        base = tiny_config(cache, out / f"run-{i}", train_steps=args.steps, seed=i,
                           batch_size=args.batch, eval_every=0, log_every=10_000,
                           compilation_cache=str(cache.parent / "jax-compilation"))
        model = dataclasses.replace(base.model, hidden_dim=args.hidden,
                                    intermediate_dim=3 * args.hidden, seq_len=args.seq)
        lr = 0.01 * (1 + i) / k
        configs.append(dataclasses.replace(base, model=model, optimizer=dataclasses.replace(
            base.optimizer, learning_rate=lr, adam_learning_rate=lr)))
    return configs


def _median_step(folder: str) -> float:
    lines = Path(folder, "metrics.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    return statistics.median(r[names.STEP_TIME] for r in records
                             if names.STEP_TIME in r and "compile_time" not in r)


def _measure(configs: list, packed: bool) -> tuple[float, float]:
    """(wall seconds of the whole, seconds per step of the steps alone, all members)."""
    start = time.perf_counter()
    if packed:
        outcomes = pack_train(configs)
        assert all(o.error is None for o in outcomes), [o.error for o in outcomes]
        step = _median_step(configs[0].output_path)  # one step of the pack steps them all
    else:
        for config in configs:
            train_lm(config)
        step = sum(_median_step(c.output_path) for c in configs)
    return time.perf_counter() - start, step


def _invocation(configs: list, prefix: Path, pack: int) -> float:
    """Wall seconds of one executor invocation over ``configs`` as steps."""
    steps = [ExecutorStep(f"train/run-{i}", train_lm,
                          dataclasses.replace(c, output_path=this_output_path()))
             for i, c in enumerate(configs)]
    start = time.perf_counter()
    result = Executor(str(prefix), max_concurrent=1, pack=pack).run(steps)
    seconds = time.perf_counter() - start
    assert {s.state for s in result.steps} == {StepState.SUCCEEDED}, result.summary()
    return seconds


def _executor_figures(cache: Path, root: Path, k: int, args: argparse.Namespace) -> None:
    configs = _configs(cache, root / "unused", k, args)
    for pack in (1, k):  # untimed: each side's programs into the compilation cache
        _invocation(configs, root / f"warm-executor-{pack}", pack)
    off = _invocation(configs, root / "executor-off", 1)
    on = _invocation(configs, root / "executor-on", k)
    print(f"executor, {k} training steps: packing off {off:.1f} s, on (--pack {k}) "
          f"{on:.1f} s, ratio off/on {off / on:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--packs", default="1,2,4,8")
    parser.add_argument("--executor", type=int, default=0,
                        help="K: time K training steps under the executor, unpacked and packed")
    args = parser.parse_args()
    import jax

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "data").mkdir()
        cache = build_cache(root / "data")
        tokens = args.batch * args.seq
        print(f"hidden {args.hidden}, batch {args.batch} x {args.seq}, {args.steps} steps a "
              f"run, {jax.device_count()} {jax.devices()[0].platform} device(s), load average "
              f"{os.getloadavg()[0]:.1f}")
        if args.executor:
            _executor_figures(cache, root, args.executor, args)
            print(f"load average at the end {os.getloadavg()[0]:.1f}")
            return
        print(f"{'K':>3} {'separate tok/s':>15} {'packed tok/s':>13} {'ratio':>6} "
              f"{'steps/s sep':>12} {'steps/s pack':>13} {'ratio':>6} {'steady ratio':>13}")
        for k in (int(x) for x in args.packs.split(",")):
            for packed in (False, True):  # untimed: each side's programs into the cache
                _measure(_configs(cache, root / f"warm-{k}-{packed}", k, args), packed)
            apart = _measure(_configs(cache, root / f"apart-{k}", k, args), packed=False)
            pack = _measure(_configs(cache, root / f"pack-{k}", k, args), packed=True)
            steps = k * args.steps
            sep_sps, pack_sps = steps / apart[0], steps / pack[0]
            print(f"{k:>3} {sep_sps * tokens:>15.0f} {pack_sps * tokens:>13.0f} "
                  f"{pack_sps / sep_sps:>6.2f} {sep_sps:>12.1f} {pack_sps:>13.1f} "
                  f"{pack_sps / sep_sps:>6.2f} {apart[1] / pack[1]:>13.2f}")
        print(f"load average at the end {os.getloadavg()[0]:.1f}")
        print("tok/s and steps/s: whole runs (wall clock, a warm compilation cache); steady "
              "ratio: the steps alone (median step time, compilation left out)")


if __name__ == "__main__":
    main()
