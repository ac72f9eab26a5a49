"""Runs drawn from known scaling laws, for fit tests that need no training.

    runs = isoflop_runs(1.0, np.random.default_rng(0))   # optimal loss K * C^-GAMMA
    runs = chinchilla_isoflop_runs(noise=0.01)           # losses from Epoch's Chinchilla law
    n_opt, d_opt = true_optimum(1e19)                    # that law's compute-optimal N, D
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from marin.scaling_laws.isoflop_analysis import RunRecord

BUDGETS = (1e17, 1e18, 1e19, 1e20)
K, GAMMA, CURVATURE = 40.0, 0.08, 0.04  # optimal loss 40 * C^-0.08; 0.04 per (ln tokens)^2
# Epoch AI's replication of Chinchilla's parametric law
EPOCH = {"E": 1.8172, "A": 482.01, "B": 2085.43, "alpha": 0.3478, "beta": 0.3658}


def isoflop_runs(factor: float, rng: np.random.Generator | None, sigma: float = 0.005,
                 budgets: tuple[float, ...] = BUDGETS, per_budget: int = 7,
                 law: Callable[[float], float] | None = None) -> list[RunRecord]:
    """An IsoFLOP sweep whose loss is an exact parabola in ln tokens around each budget's
    optimum, with the optimal loss ``K * (C / factor)^-GAMMA`` (a pure power law: the
    Approach 2 law is the true law) or ``law(C)``, plus Gaussian noise of ``sigma``. The
    candidates sit where label "a"'s optimum is, whatever the factor, as a study's shared
    candidates do."""
    out = []
    for budget in budgets:
        center = 0.5 * math.log(budget / 6)
        optimum = law(budget) if law is not None else K * (budget / factor) ** -GAMMA
        for offset in np.linspace(-1.5, 1.5, per_budget):
            tokens = math.exp(center + offset)
            noise = rng.normal(0, sigma) if rng is not None else 0.0
            loss = optimum + CURVATURE * offset**2 + noise
            out.append(RunRecord(params=budget / (6 * tokens), tokens=tokens, flops=budget,
                                 loss=loss, budget=budget))
    return out


def chinchilla_isoflop_runs(budgets=(1e18, 3e18, 1e19, 3e19), noise: float = 0.0,
                            seed: int = 0) -> list[RunRecord]:
    """Runs on IsoFLOP curves (C = 6ND) with losses from Epoch's Chinchilla law, spanning a
    factor of 4 either side of each budget's optimum (off-centre spans bias Approach 2)."""
    rng = np.random.default_rng(seed)
    runs = []
    for c in budgets:
        n_opt, _ = true_optimum(c)
        for n in n_opt * np.geomspace(1 / 4, 4, 9):
            d = c / (6 * n)
            loss = EPOCH["E"] + EPOCH["A"] / n ** EPOCH["alpha"] + EPOCH["B"] / d ** EPOCH["beta"]
            runs.append(RunRecord(params=float(n), tokens=float(d), flops=c,
                                  loss=float(loss * (1 + noise * rng.normal())), budget=c))
    return runs


def true_optimum(c: float) -> tuple[float, float]:
    """The compute-optimal (N, D) of Epoch's law at C = 6ND."""
    a, b, al, be = EPOCH["A"], EPOCH["B"], EPOCH["alpha"], EPOCH["beta"]
    g = (al * a / (be * b)) ** (1 / (al + be))
    return g * (c / 6) ** (be / (al + be)), (c / 6) ** (al / (al + be)) / g
