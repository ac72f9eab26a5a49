"""The parametric loss L(N, D) = E + A / N^alpha + B / D^beta (Hoffmann et al., Approach 3).

    fit = fit_parametric_loss(params, tokens, loss, bootstrap=4000)
    fit.E, fit.A, fit.B, fit.alpha, fit.beta       # point estimates
    fit.standard_errors["alpha"]                   # from the bootstrap
    fit.predict_optimal(3e19)                      # N_opt, D_opt and their intervals

Fitted as Besiroglu et al. (2024, "Chinchilla scaling: a replication attempt") fit it: in
log-sum-exp form, log L = LSE(a - alpha log N, b - beta log D, e) with A = exp(a),
B = exp(b), E = exp(e); a Huber loss with delta = 1e-3 on the residuals of log L; L-BFGS
from a grid of starting points (alpha, beta in 0..2 by 0.5; e in -1..1.5 by 0.5; a, b in
0..25 by 5: 4,500 points). The objective is evaluated at every grid point at once and
L-BFGS starts from the best ``starts`` of them (all of them with ``starts=None``): the
minima found agree, at a fraction of the time. Standard errors come from refitting on
bootstrap resamples of the runs, each started from the full-data optimum.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.optimize import minimize
from scipy.special import logsumexp

HUBER_DELTA = 1e-3
PARAMETERS = ("E", "A", "B", "alpha", "beta")


@dataclass(frozen=True)
class OptimalAllocation:
    budget: float
    params: float
    tokens: float
    params_interval: tuple[float, float]
    tokens_interval: tuple[float, float]
    nearest_candidate: Any = None  # a CandidateConfig when a heuristic was given


@dataclass
class ParametricFit:
    E: float
    A: float
    B: float
    alpha: float
    beta: float
    objective: float
    standard_errors: dict[str, float] = field(default_factory=dict)
    bootstrap_samples: np.ndarray | None = None  # rows of (E, A, B, alpha, beta)

    def loss(self, params: float | np.ndarray, tokens: float | np.ndarray) -> np.ndarray:
        return self.E + self.A / np.asarray(params) ** self.alpha \
            + self.B / np.asarray(tokens) ** self.beta

    def predict_optimal(self, budget: float, level: float = 0.95,
                        heuristic: Any = None) -> OptimalAllocation:
        """Compute-optimal N and D for ``budget`` (C = 6 N D), with a bootstrap interval at
        ``level``, and the heuristic's candidate nearest to N_opt when one is given."""
        n, d = _optimal(self.A, self.B, self.alpha, self.beta, budget)
        n_range, d_range = (n, n), (d, d)
        if self.bootstrap_samples is not None and len(self.bootstrap_samples) >= 2:
            s = self.bootstrap_samples
            ns, ds = _optimal(s[:, 1], s[:, 2], s[:, 3], s[:, 4], budget)
            tail = (1 - level) / 2 * 100
            low_n, high_n = np.percentile(ns, [tail, 100 - tail])
            low_d, high_d = np.percentile(ds, [tail, 100 - tail])
            n_range, d_range = (float(low_n), float(high_n)), (float(low_d), float(high_d))
        nearest = None
        if heuristic is not None:
            from marin.scaling_laws.isoflop_analysis import nearest_candidate

            nearest = nearest_candidate(list(heuristic.candidates_for_budget(budget)), n)
        return OptimalAllocation(budget, float(n), float(d), n_range, d_range, nearest)

    def as_dict(self) -> dict[str, float]:
        return {name: getattr(self, name) for name in PARAMETERS}


def _optimal(A, B, alpha, beta, budget: float):
    """Hoffmann et al. eq. (4): N_opt = G (C/6)^a, D_opt = G^-1 (C/6)^b."""
    g = (alpha * A / (beta * B)) ** (1 / (alpha + beta))
    a = beta / (alpha + beta)
    b = alpha / (alpha + beta)
    return g * (budget / 6) ** a, (budget / 6) ** b / g


def _objective(theta: np.ndarray, log_n: np.ndarray, log_d: np.ndarray,
               log_l: np.ndarray) -> tuple[float, np.ndarray]:
    """Huber loss of log-loss residuals and its gradient; theta = (a, b, e, alpha, beta)."""
    a, b, e, alpha, beta = theta
    t_n = a - alpha * log_n
    t_d = b - beta * log_d
    top = np.maximum(np.maximum(t_n, t_d), e)
    w_n, w_d, w_e = np.exp(t_n - top), np.exp(t_d - top), np.exp(e - top)
    total = w_n + w_d + w_e
    r = top + np.log(total) - log_l
    abs_r = np.abs(r)
    small = abs_r <= HUBER_DELTA
    value = np.where(small, 0.5 * r * r, HUBER_DELTA * (abs_r - 0.5 * HUBER_DELTA)).sum()
    dr = np.where(small, r, HUBER_DELTA * np.sign(r)) / total  # times softmax weights below
    g_n, g_d = dr * w_n, dr * w_d
    grad = np.array([g_n.sum(), g_d.sum(), (dr * w_e).sum(), -(g_n @ log_n), -(g_d @ log_d)])
    return float(value), grad


def _grid() -> np.ndarray:
    alphas = np.arange(0, 2.01, 0.5)
    es = np.arange(-1, 1.51, 0.5)
    abs_ = np.arange(0, 25.1, 5)
    return np.array([(a, b, e, al, be) for al, be, e, a, b in
                     itertools.product(alphas, alphas, es, abs_, abs_)])


def _grid_objectives(grid: np.ndarray, log_n: np.ndarray, log_d: np.ndarray,
                     log_l: np.ndarray) -> np.ndarray:
    a, b, e, alpha, beta = (grid[:, i:i + 1] for i in range(5))
    terms = np.stack([a - alpha * log_n, b - beta * log_d, np.broadcast_to(e, a.shape
                                                                           ) + 0 * log_n])
    r = logsumexp(terms, axis=0) - log_l
    huber = np.where(np.abs(r) <= HUBER_DELTA, 0.5 * r * r,
                     HUBER_DELTA * (np.abs(r) - 0.5 * HUBER_DELTA))
    return huber.sum(axis=1)


def _lbfgs(start: np.ndarray, log_n, log_d, log_l):
    return minimize(_objective, start, args=(log_n, log_d, log_l), jac=True,
                    method="L-BFGS-B", options={"maxiter": 1000, "gtol": 1e-10,
                                                "ftol": 1e-15})


def _best_fit(log_n, log_d, log_l, starts: int | None) -> tuple[np.ndarray, float]:
    grid = _grid()
    if starts is not None and starts < len(grid):
        scores = _grid_objectives(grid, log_n, log_d, log_l)
        grid = grid[np.argsort(scores)[:starts]]
    best_x, best_f = None, math.inf
    for start in grid:
        result = _lbfgs(start, log_n, log_d, log_l)
        if result.fun < best_f:
            best_x, best_f = result.x, float(result.fun)
    assert best_x is not None
    return best_x, best_f


def _bootstrap(theta: np.ndarray, log_n: np.ndarray, log_d: np.ndarray, log_l: np.ndarray,
               count: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    n = len(log_n)
    out = np.empty((count, len(theta)))
    for i in range(count):
        idx = rng.integers(0, n, n)
        out[i] = _lbfgs(theta, log_n[idx], log_d[idx], log_l[idx]).x
    return out


def fit_parametric_loss(params: Sequence[float], tokens: Sequence[float],
                        loss: Sequence[float], bootstrap: int = 0, seed: int = 0,
                        starts: int | None = 64) -> ParametricFit:
    """Fit E + A/N^alpha + B/D^beta; ``bootstrap`` resamples give standard errors."""
    n_arr, d_arr, l_arr = (np.asarray(v, dtype=float) for v in (params, tokens, loss))
    if not (len(n_arr) == len(d_arr) == len(l_arr)):
        raise ValueError("params, tokens and loss must have the same length")
    finite = np.isfinite(n_arr) & np.isfinite(d_arr) & np.isfinite(l_arr) & (l_arr > 0)
    if finite.sum() < 5:
        raise ValueError(f"the parametric fit needs at least 5 runs with finite values, got "
                         f"{int(finite.sum())}")
    log_n, log_d, log_l = np.log(n_arr[finite]), np.log(d_arr[finite]), np.log(l_arr[finite])
    theta, value = _best_fit(log_n, log_d, log_l, starts)
    fit = _to_fit(theta, value)
    if bootstrap:
        samples = _bootstrap(theta, log_n, log_d, log_l, bootstrap, seed)
        natural = np.column_stack([np.exp(samples[:, 2]), np.exp(samples[:, 0]),
                                   np.exp(samples[:, 1]), samples[:, 3], samples[:, 4]])
        fit.bootstrap_samples = natural
        fit.standard_errors = {name: float(np.std(natural[:, i], ddof=1))
                               for i, name in enumerate(PARAMETERS)}
    return fit


def _to_fit(theta: np.ndarray, value: float) -> ParametricFit:
    a, b, e, alpha, beta = (float(v) for v in theta)
    return ParametricFit(E=math.exp(e), A=math.exp(a), B=math.exp(b), alpha=alpha, beta=beta,
                         objective=value)
