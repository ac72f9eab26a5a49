"""Compile once, for a whole study: the compile time of a second study whose learning rates
changed, against the first study's in a fresh JAX persistent cache.

    python bench/bench_study_compile.py

Each study is a fresh process (``marin executor`` as a user runs it): a small comparative
study (two labels, two budgets, three candidates each, a held-out budget), its compiles
read from ``$MARIN_CACHE_DIR/jax-compilation`` (empty before the first study). The second
study changes the heuristic's learning rates, which change no shape: its runs are new steps
(new keys), but their programs are the first study's. The figure is the sum over the runs
of ``compile_time`` (what each run's first step spent tracing, compiling or reading
programs), second study over first, with the wall times.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

STUDY = """
import sys
sys.path.insert(0, {root!r})
from marin.execution import executor_main
from marin.scaling_laws.study import Mixture, isoflop_study
from tests.test_isoflop_study import BUDGETS, HELD_OUT, TINY, VOCAB
from tests.test_study_planning import _corpus
from pathlib import Path

root = Path({folder!r})
labels = {{"plays": _corpus(root / "plays", 0), "docs": _corpus(root / "docs", 2)}}
heuristic = TINY.with_overrides(lr_base={lr!r}, adam_lr_base={adam_lr!r})
steps = isoflop_study({name!r}, labels, BUDGETS, heuristic, tokenizer_vocab_size=VOCAB,
                      predict_budget=HELD_OUT, bootstrap=10,
                      train_options={{"compute_dtype": "float32", "eval_batches": 2}})
if __name__ == "__main__":
    executor_main(steps, exit_on_failure=True)
"""


def study(folder: Path, prefix: Path, cache: Path, name: str, lr: float, adam_lr: float
          ) -> tuple[float, float, int]:
    """(sum of compile_time over the study's runs, wall seconds, runs)."""
    import time

    script = folder / f"{name}.py"
    script.write_text(STUDY.format(root=str(ROOT), folder=str(folder / f"{name}-corpora"),
                                   name=name, lr=lr, adam_lr=adam_lr))
    env = {**os.environ, "MARIN_CACHE_DIR": str(cache), "MARIN_PREFIX": str(prefix)}
    started = time.perf_counter()
    subprocess.run([sys.executable, str(script)], cwd=folder, env=env, check=True,
                   stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    total, runs = 0.0, 0
    for metrics in (prefix / name).rglob("metrics.jsonl"):
        runs += 1
        for line in metrics.read_text().splitlines():
            total += float(json.loads(line).get("compile_time", 0.0))
    return total, wall, runs


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        cache, prefix = folder / "cache", folder / "store"
        first = study(folder, prefix, cache, "first", 0.01, 0.003)
        second = study(folder, prefix, cache, "second", 0.02, 0.004)
    print(f"first study:  {first[2]} runs, compile {first[0]:.2f} s, wall {first[1]:.1f} s "
          "(fresh compilation cache)")
    print(f"second study: {second[2]} runs, compile {second[0]:.2f} s, wall {second[1]:.1f} s "
          "(new learning rates, the same shapes)")
    print(f"compile time, second over first: {second[0] / max(first[0], 1e-9):.2f}")


if __name__ == "__main__":
    main()
