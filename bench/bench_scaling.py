"""Scaling-law benchmarks.

    python bench/bench_scaling.py [--bootstrap 4000]

* Candidate generation for every default budget (goal: under 1 s in total).
* The Approach 3 fit on Epoch AI's 240 Chinchilla runs with 4,000 bootstrap resamples
  (goal: under 10 s), against the straightforward fit measured in the same run (one
  L-BFGS-B run per grid start and per resample), with the largest difference between the
  two sets of resampled parameters in units of the bootstrap's own standard error, and the
  fit's agreement with Epoch's published estimates.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

# One BLAS thread: scipy's L-BFGS-B calls BLAS on 5-vectors, and on a busy machine a
# multi-threaded BLAS spends far longer waking its threads than computing (both paths).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from marin.scaling_laws import parametric  # noqa: E402
from marin.scaling_laws.isoflop_analysis import DEFAULT_BUDGETS  # noqa: E402
from marin.scaling_laws.parametric import PARAMETERS, fit_parametric_loss  # noqa: E402
from marin.scaling_laws.scaling_heuristics import CompletedAdamhHeuristic  # noqa: E402
from tests.test_scaling_fits import EPOCH, EPOCH_SE, chinchilla_runs  # noqa: E402


def straightforward_fit(n, d, loss, bootstrap: int, seed: int, starts: int = 64) -> np.ndarray:
    """The fit one resample at a time (the implementation before vectorisation): returns
    the point fit's row followed by the resamples' rows, in (E, A, B, alpha, beta)."""
    log_n, log_d, log_l = np.log(n), np.log(d), np.log(loss)
    grid = parametric._grid()
    grid = grid[np.argsort(parametric._grid_objectives(grid, log_n, log_d, log_l))[:starts]]
    fits = [parametric._lbfgs(start, log_n, log_d, log_l) for start in grid]
    theta = min(fits, key=lambda r: r.fun).x
    rows = [theta]
    for idx in np.random.default_rng(seed).integers(0, len(n), (bootstrap, len(n))):
        rows.append(parametric._lbfgs(theta, log_n[idx], log_d[idx], log_l[idx]).x)
    x = np.array(rows)
    return np.column_stack([np.exp(x[:, 2]), np.exp(x[:, 0]), np.exp(x[:, 1]), x[:, 3], x[:, 4]])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", type=int, default=4000)
    args = parser.parse_args()
    heuristic = CompletedAdamhHeuristic(vocab_size=50257)
    t0 = time.perf_counter()
    counts = [len(list(heuristic.candidates_for_budget(b))) for b in DEFAULT_BUDGETS]
    elapsed = time.perf_counter() - t0
    print(f"candidates for {len(DEFAULT_BUDGETS)} default budgets: {sum(counts)} "
          f"({', '.join(map(str, counts))}) in {elapsed * 1e3:.0f} ms (goal < 1000 ms)")

    n, d, loss = chinchilla_runs()
    t0 = time.perf_counter()
    fit_parametric_loss(n, d, loss)
    point = time.perf_counter() - t0
    t0 = time.perf_counter()
    fit = fit_parametric_loss(n, d, loss, bootstrap=args.bootstrap, seed=0)
    total = time.perf_counter() - t0
    t0 = time.perf_counter()
    before = straightforward_fit(n, d, loss, args.bootstrap, seed=0)
    straight = time.perf_counter() - t0
    print(f"Approach 3 on {len(n)} Chinchilla runs with {args.bootstrap} bootstrap resamples:")
    print(f"  straightforward (one L-BFGS-B per start and resample): {straight:.1f} s")
    print(f"  vectorised: {total:.1f} s (point fit alone {point:.2f} s) -> "
          f"{straight / total:.1f}x faster (goal < 10 s)")
    spread = before[1:].std(axis=0, ddof=1)
    worst = np.abs(fit.samples() - before[1:]).max(axis=0) / spread
    point_gap = np.abs(np.array([getattr(fit, k) for k in PARAMETERS]) - before[0]) / spread
    print("  largest |vectorised - straightforward| per resample, in bootstrap SEs: "
          + ", ".join(f"{k} {w:.3f}" for k, w in zip(PARAMETERS, worst, strict=True))
          + f"; point fit: {point_gap.max():.2e}")
    for i, name in enumerate(PARAMETERS):
        se = fit.standard_errors[name]
        ref = EPOCH_SE.get(name)
        print(f"  {name:>5} = {getattr(fit, name):9.4f} +/- {se:8.4f} (straightforward "
              f"+/- {spread[i]:8.4f})   Epoch: {EPOCH[name]:9.4f}"
              + (f" +/- {ref}" if ref else ""))


if __name__ == "__main__":
    main()
