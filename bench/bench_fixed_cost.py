"""The fixed cost of a training run, phase by phase: what a run costs besides its steps.

    python bench/bench_fixed_cost.py [--runs 6]

N runs of the main job's smallest shape (``experiments/isoflop_tiny.py``: ``HEURISTIC``'s
smallest candidate at its smallest budget, with the study's train options, its vocabulary
set to the bench's 512-token tokenizer) train one after another as N steps (seeds 0..N-1)
of one ``Executor`` invocation in this process, as the local runner runs a study: one
thread, one JAX import. Each step's outcome carries its phases (``marin.execution.phases``:
the worker's lease, start, commit and release, and the trainer's own). Printed per phase:
the CPU seconds of the process (``time.process_time``) of the first run alone, which
compiles its programs (a fresh persistent compilation cache), and the median over the
runs after it; the same for wall seconds. The fixed cost is every phase but ``steps`` and
``evaluation`` (``first_step`` holds one step's compute besides the compilation or load).
The steps' own time is printed for reference, and the executor's time outside its workers
(planning, progress, records) per run. Goal: a fixed cost of at most 1 s of CPU per run
after the first of its shape.
"""

from __future__ import annotations

import time

_STARTED = time.process_time()  # the interpreter's start, before the imports below

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import jax  # noqa: E402

from marin.execution import Executor, ExecutorStep, StepState, this_output_path  # noqa: E402
from marin.execution.phases import PhaseTimes  # noqa: E402
from marin.training import train_lm  # noqa: E402
from tests.helpers.training import VOCAB, build_cache, tiny_config  # noqa: E402

_IMPORTED = time.process_time()
LEFT_OUT = ("steps", "evaluation")  # what the fixed cost is not


def smallest_config(cache: Path, seed: int):
    """The main job's smallest run on the bench's token cache, with ``seed``."""
    from experiments.isoflop_tiny import BUDGETS, HEURISTIC, TRAIN_OPTIONS

    candidate = min(HEURISTIC.candidates_for_budget(BUDGETS[0]),
                    key=lambda c: c.model_config.num_params())
    model = dataclasses.replace(candidate.model_config, vocab_size=VOCAB)
    return dataclasses.replace(
        tiny_config(cache, Path("unused"), **TRAIN_OPTIONS), model=model,
        batch_size=candidate.batch_size, train_steps=candidate.train_steps,
        optimizer=candidate.optimizer, seed=seed, output_path=this_output_path(),
        compilation_cache=str(cache.parent / "jax-compilation"))


def _row(name: str, first: float, later: list[float], first_wall: float,
         later_wall: list[float]) -> str:
    return (f"{name:<18} {first:>9.3f} {statistics.median(later):>9.3f} "
            f"{first_wall:>9.3f} {statistics.median(later_wall):>9.3f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=6)
    args = parser.parse_args()
    if args.runs < 2:
        parser.error("--runs must be at least 2: the first run compiles, the others measure")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "data").mkdir()
        cache = build_cache(root / "data")
        configs = [smallest_config(cache, seed) for seed in range(args.runs)]
        c = configs[0]
        print(f"{args.runs} runs: hidden {c.model.hidden_dim}, {c.model.num_layers} layers, "
              f"batch {c.batch_size} x {c.model.seq_len}, {c.train_steps} steps, "
              f"{jax.device_count()} {jax.devices()[0].platform} device(s), load average "
              f"{os.getloadavg()[0]:.1f}")
        steps = [ExecutorStep(f"fixed-cost/run-{i}", train_lm, config)
                 for i, config in enumerate(configs)]
        cpu, wall = time.process_time(), time.perf_counter()
        result = Executor(str(root / "prefix"), max_concurrent=1).run(steps)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        assert {s.state for s in result.steps} == {StepState.SUCCEEDED}, result.summary()
        times: list[PhaseTimes] = [s.phases for s in result.steps]  # in the order they ran
    names = list(dict.fromkeys(n for t in times for n in t.phases))
    print(f"{'phase':<18} {'cpu first':>9} {'cpu later':>9} {'wall 1st':>9} {'wall later':>9}")
    for name in names:
        figures = [t.phases.get(name) for t in times]
        cpus = [f.cpu if f else 0.0 for f in figures]
        walls = [f.wall if f else 0.0 for f in figures]
        print(_row(name, cpus[0], cpus[1:], walls[0], walls[1:]))
    fixed = [t.total(LEFT_OUT) for t in times]
    print(_row("fixed cost", fixed[0].cpu, [f.cpu for f in fixed[1:]], fixed[0].wall,
               [f.wall for f in fixed[1:]]))
    own = [t.phases["steps"] for t in times]
    print(_row(f"steps ({own[0].count})", own[0].cpu, [f.cpu for f in own[1:]], own[0].wall,
               [f.wall for f in own[1:]]))
    outside = cpu - sum(t.total().cpu for t in times)
    print(f"executor outside its workers: {outside / args.runs:.3f} s CPU per run; process "
          f"start and imports (once per invocation): {_IMPORTED:.2f} s CPU, of which the "
          f"interpreter {_STARTED:.2f} s; invocation {cpu:.1f} s CPU, {wall:.1f} s wall")
    print(f"goal: fixed cost <= 1 s CPU per run after the first; median "
          f"{statistics.median(f.cpu for f in fixed[1:]):.3f} s")


if __name__ == "__main__":
    main()
