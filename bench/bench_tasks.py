"""Downstream tasks' share of a run: the same training run with and without tasks, at the
main job's evaluation cadence, timed in the same process.

    python bench/bench_tasks.py [--steps 160 --items 64 --choices 4 --rounds 2]

The run is the main job's largest shape (``experiments/isoflop_tiny.py``: hidden 64, four
layers, batch 16, sequences of 64 tokens) on a real token cache, evaluated four times
during the run and once at its end (the study's ``eval_points``). The task is a cloze of
``--items`` items made from the validation play: each line's start, and as choices its
true end and the ends of other lines. One warm-up round compiles both variants (JAX's
persistent cache keeps the programs); each timed round runs them in turn, so the machine's
load reaches both alike. Reported: each variant's median wall time and the ratio (goal:
tasks add at most 10%), and, as the runs' difference is near the machine's noise, the
seconds of the five evaluations' scoring alone against the run without tasks.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def cloze(text: str, items: int, choices: int) -> list:
    from marin.evaluation import TaskItem

    lines = [line.strip() for line in text.splitlines() if len(line.split()) >= 6]
    out = []
    for i, line in enumerate(lines[:items]):
        words = line.split()
        cut = len(words) // 2
        ends = [" " + " ".join(other.split()[len(other.split()) // 2:])
                for other in lines[i + 1:i + choices]]
        gold = i % choices
        ends.insert(gold, " " + " ".join(words[cut:]))
        out.append(TaskItem(" ".join(words[:cut]), tuple(ends[:choices]), min(gold, choices - 1)))
    return out


def main() -> Path:
    """Runs the comparison and prints it; returns the scratch folder."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=160)
    parser.add_argument("--items", type=int, default=64)
    parser.add_argument("--choices", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-tasks-"))
    os.environ["MARIN_CACHE_DIR"] = str(root / "marin-cache")

    from marin.evaluation import TaskConfig
    from marin.models import TransformerConfig
    from marin.training import train_lm
    from tests.helpers.training import build_cache, tiny_config

    (root / "data").mkdir()
    data = build_cache(root / "data")
    text = next((data / "validation").iterdir()).read_text()
    task = root / "cloze.jsonl"
    items = cloze(text, args.items, args.choices)
    task.write_text("".join(item.encode() + "\n" for item in items))
    model = TransformerConfig(hidden_dim=64, intermediate_dim=192, num_layers=4, num_heads=16,
                              num_kv_heads=16, vocab_size=512, seq_len=64)
    base = tiny_config(data, root / "run", model=model, batch_size=16, train_steps=args.steps,
                       eval_every=args.steps // 4, checkpoint_every=0)
    variants = {"without tasks": base,
                "with tasks": dataclasses.replace(base, tasks=[TaskConfig("cloze", str(task))])}
    seconds: dict[str, list[float]] = {name: [] for name in variants}
    for round_ in range(args.rounds + 1):
        for name, config in variants.items():
            out = root / f"run-{round_}-{name.replace(' ', '-')}"
            start = time.perf_counter()
            train_lm(dataclasses.replace(config, output_path=str(out)))
            if round_:  # round 0 compiles
                seconds[name].append(time.perf_counter() - start)
    plain, tasks = (statistics.median(seconds[n]) for n in variants)
    scoring = _scoring_seconds(variants["with tasks"])
    print(f"{len(items)} items x {args.choices} choices, {args.steps} steps, 5 evaluations")
    print(f"without tasks: {plain:.2f} s   with tasks: {tasks:.2f} s   "
          f"ratio {tasks / plain:.3f} (goal <= 1.10)")
    print(f"the 5 evaluations' scoring alone (compiled): {scoring:.2f} s, "
          f"{scoring / plain:.3f} of the run without tasks")
    return root


def _scoring_seconds(config) -> float:
    """The seconds of the run's five task evaluations, once compiled, as the trainer
    scores them (``marin.training.data.task_suite``), on a fresh model."""
    import jax
    import jax.numpy as jnp

    from marin.models.transformer import TransformerLM
    from marin.training.data import task_suite

    suite = task_suite(config, jnp.dtype(config.compute_dtype))
    model = TransformerLM.init(config.model, key=jax.random.PRNGKey(0))
    suite.evaluate(model)  # compiles, and places the batches
    start = time.perf_counter()
    for _ in range(5):
        suite.evaluate(model)
    return time.perf_counter() - start


if __name__ == "__main__":
    shutil.rmtree(main(), ignore_errors=True)
