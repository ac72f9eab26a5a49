"""Scaling-law benchmarks.

    python bench/bench_scaling.py

* Candidate generation for every default budget (goal: under 1 s in total).
* The Approach 3 fit on Epoch AI's 240 Chinchilla runs with 4,000 bootstrap resamples
  (goal: under 60 s), and the fit's agreement with Epoch's published estimates.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from marin.scaling_laws.isoflop_analysis import DEFAULT_BUDGETS  # noqa: E402
from marin.scaling_laws.parametric import fit_parametric_loss  # noqa: E402
from marin.scaling_laws.scaling_heuristics import CompletedAdamhHeuristic  # noqa: E402
from tests.test_scaling_fits import EPOCH, EPOCH_SE, chinchilla_runs  # noqa: E402


def main() -> None:
    heuristic = CompletedAdamhHeuristic(vocab_size=50257)
    t0 = time.perf_counter()
    counts = [len(list(heuristic.candidates_for_budget(b))) for b in DEFAULT_BUDGETS]
    elapsed = time.perf_counter() - t0
    print(f"candidates for {len(DEFAULT_BUDGETS)} default budgets: {sum(counts)} "
          f"({', '.join(map(str, counts))}) in {elapsed * 1e3:.0f} ms (goal < 1000 ms)")

    n, d, loss = chinchilla_runs()
    t0 = time.perf_counter()
    fit = fit_parametric_loss(n, d, loss)
    point = time.perf_counter() - t0
    t0 = time.perf_counter()
    fit = fit_parametric_loss(n, d, loss, bootstrap=4000, seed=0)
    total = time.perf_counter() - t0
    print(f"Approach 3 on {len(n)} Chinchilla runs: point fit {point:.2f} s; with 4000 "
          f"bootstrap resamples {total:.1f} s (goal < 60 s)")
    for name in ("E", "A", "B", "alpha", "beta"):
        se = fit.standard_errors[name]
        ref = EPOCH_SE.get(name)
        print(f"  {name:>5} = {getattr(fit, name):9.4f} +/- {se:8.4f}   Epoch: "
              f"{EPOCH[name]:9.4f}" + (f" +/- {ref}" if ref else ""))


if __name__ == "__main__":
    main()
