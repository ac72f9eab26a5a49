"""The comparative fit: compute multipliers with a joint bootstrap, on one core.

    python bench/bench_study_fit.py [--labels 10] [--runs 100] [--bootstrap 1000]

Synthetic labels (5 budgets x 20 runs each by default: ``tests.test_comparison``'s exact
parabolas around a power law, noise 0.005, every label the first with its compute scaled by
a known factor), compared with ``compare_labels`` against the first at
three target tiers (goal: 10 labels x 100 runs with 1,000 resamples in under 10 s). The
straightforward fit, one scipy Huber fit per budget and resample (``fit_budget``) and one
``fit_power_law`` per resample, is measured in the same run on the first ``--naive``
resamples of every label and scaled to the full count; the largest difference between the
two fits' loss-law exponents is printed in units of the bootstrap's standard error.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import zlib
from pathlib import Path

for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")  # one core: the goal is a single-core figure
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402  (after the thread settings)

from marin.scaling_laws import isoflop_analysis as iso  # noqa: E402
from marin.scaling_laws.comparison import compare_labels, loss_law  # noqa: E402
from tests.test_comparison import isoflop_runs  # noqa: E402

GOAL_S = 10.0
BUDGETS = (1e17, 1e18, 1e19, 1e20, 1e21)


def naive_exponents(records: list[iso.RunRow], bootstrap: int, count: int, seed: int
                    ) -> np.ndarray:
    """The loss law's exponent on the first ``count`` resamples, one scipy fit at a time.
    The resamples are drawn as ``loss_law`` draws them (per budget, in order)."""
    rng = np.random.default_rng(seed)
    groups = list(iso.group_by_budget(records).items())
    weights = [rng.multinomial(len(runs), np.full(len(runs), 1 / len(runs)), size=bootstrap)
               for _, runs in groups]
    out = []
    for r in range(count):
        minima = []
        for (budget, runs), w in zip(groups, weights, strict=True):
            drawn = [run for run, k in zip(runs, w[r], strict=True) for _ in range(k)]
            try:
                minima.append(iso.fit_budget(budget, drawn).optimal_loss)
            except (iso.ScalingFitError, np.linalg.LinAlgError, ValueError):
                minima.append(np.nan)
        law = iso.fit_power_law(np.array([b for b, _ in groups]), np.array(minima), "loss")
        out.append(law.exponent)
    return np.array(out)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--labels", type=int, default=10)
    parser.add_argument("--runs", type=int, default=100, help="runs per label")
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--naive", type=int, default=40,
                        help="resamples per label fitted the straightforward way")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    per_budget = args.runs // len(BUDGETS)
    factors = np.geomspace(1, 4, args.labels)
    records = {f"label{i}": isoflop_runs(f, rng, budgets=BUDGETS, per_budget=per_budget)
               for i, f in enumerate(factors)}
    targets = [1e21, 1e22, 1e23]

    t0 = time.perf_counter()
    rows = compare_labels(records, "label0", targets, bootstrap=args.bootstrap, seed=0)
    fast = time.perf_counter() - t0
    print(f"compare_labels: {args.labels} labels x {per_budget * len(BUDGETS)} runs, "
          f"{args.bootstrap} resamples, {len(targets)} targets: {fast:.2f} s "
          f"({fast / GOAL_S:.1%} of the {GOAL_S:.0f} s goal)")
    truth = dict(zip(records, factors, strict=True))
    errors = [max(abs(r.multiplier / truth[r.label] - 1) for r in rows if r.target_budget == t)
              for t in targets]
    print("  largest error against the true factor, by target: "
          + ", ".join(f"{t:.0e}: {e:.1%}" for t, e in zip(targets, errors, strict=True))
          + f" (swept up to {BUDGETS[-1]:.0e}; one baseline, so its error is shared)")

    t0 = time.perf_counter()
    gaps, naive_count = [], min(args.naive, args.bootstrap)
    for label, runs in records.items():
        seed = zlib.crc32(f"0/{label}/approach2".encode())  # compare_labels' stream
        naive = naive_exponents(runs, args.bootstrap, naive_count, seed)
        law = loss_law(runs, bootstrap=args.bootstrap, seed=seed)
        exponents = -law.gamma[1:]
        both = np.isfinite(naive) & np.isfinite(exponents[:naive_count])
        gaps.append(np.max(np.abs(naive[both] - exponents[:naive_count][both]))
                    / np.nanstd(exponents, ddof=1))
    naive_s = (time.perf_counter() - t0) * args.bootstrap / naive_count
    print(f"  straightforward loop (scipy per budget and resample), {naive_count} resamples "
          f"per label scaled to {args.bootstrap}: {naive_s:.1f} s -> vectorised is "
          f"{naive_s / fast:.0f}x faster")
    print(f"  largest |vectorised - straightforward| loss-law exponent per resample: "
          f"{max(gaps):.2e} bootstrap standard errors")


if __name__ == "__main__":
    main()
