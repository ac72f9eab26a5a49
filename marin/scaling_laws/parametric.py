"""The parametric loss L(N, D) = E + A / N^alpha + B / D^beta (Hoffmann et al., Approach 3).

    fit = fit_parametric_loss(params, tokens, loss, bootstrap=4000)
    fit.E, fit.A, fit.B, fit.alpha, fit.beta       # point estimates
    fit.standard_errors["alpha"]                   # from the bootstrap
    fit.predict_optimal(3e19)                      # N_opt, D_opt and their intervals
    fit = fit_parametric_loss(params, tokens, loss, flops=flops)   # budgets as the runs count

FLOP accounting: a budget C is the runs' own training FLOPs. Given each run's ``flops``, the
fit also learns the FLOPs per token as a power of the parameter count,
``flops / tokens = flops_coefficient * N ** flops_exponent`` (a least-squares line in log-log
space), and ``predict_optimal(C)`` minimises L(N, D) along ``C = flops_coefficient *
N ** flops_exponent * D``. For runs from ``marin.scaling_laws.candidates`` (three forward
passes, attention and the LM head included, as the trainer counts them) that is the
accounting the candidates and Approach 2 use, so both approaches predict N_opt for the same
C. Without ``flops`` the coefficient is 6 and the exponent 1: C = 6 N D (Hoffmann et al.).

Fitted as Besiroglu et al. (2024, "Chinchilla scaling: a replication attempt") fit it: in
log-sum-exp form, log L = LSE(a - alpha log N, b - beta log D, e) with A = exp(a),
B = exp(b), E = exp(e); a Huber loss with delta = 1e-3 on the residuals of log L; L-BFGS
from a grid of starting points (alpha, beta in 0..2 by 0.5; e in -1..1.5 by 0.5; a, b in
0..25 by 5: 4,500 points). The objective is evaluated at every grid point at once and
L-BFGS starts from the best ``starts`` of them (all of them with ``starts=None``): the
minima found agree, at a fraction of the time. Standard errors come from refitting on
bootstrap resamples of the runs, each started from the full-data optimum.

Design note: the L-BFGS runs are vectorised. All starts, and then all resamples (each a row
of counts weighting the runs), are minimised together by one batched L-BFGS in numpy, so
each iteration is a few array operations over every fit still running. The resamples start
from the point fit with its inverse Hessian as their initial curvature, which cuts their
iterations about fivefold; 4,000 resamples of 240 runs take a few seconds where one scipy
L-BFGS-B call per resample took over 20 s, and they land on the same minima (a test
compares them on a small case; ``bench/bench_scaling.py`` on Chinchilla).
"""

from __future__ import annotations

import itertools
import math
import sys
from collections.abc import Sequence

import numpy as np
from scipy.optimize import minimize
from scipy.special import logsumexp

from marin.scaling_laws.values import (
    MIN_RUNS_PARAMETRIC,
    PARAMETERS,
    Approach3,
    OptimalAllocation,
    optimal_allocation,
)

__all__ = ["HUBER_DELTA", "LEVEL", "PARAMETERS", "Approach3", "OptimalAllocation",
           "ParametricFit", "fit_parametric_loss", "flops_per_token_law", "optimal_allocation"]

HUBER_DELTA = 1e-3
LEVEL = 0.95  # of the bootstrap intervals of the parameters

_LOG_MAX = math.log(sys.float_info.max)  # e ** x is a float below this


ParametricFit = Approach3  # its older name


def flops_per_token_law(params: np.ndarray, tokens: np.ndarray, flops: np.ndarray
                        ) -> tuple[float, float]:
    """(k, e) with ``flops / tokens = k * params ** e``, a least-squares line in log-log
    space; e = 1 (k their geometric mean) when the runs have only one size."""
    log_n = np.log(params)
    log_f = np.log(flops / tokens)
    if np.ptp(log_n) < 1e-9:
        return float(np.exp(np.mean(log_f - log_n))), 1.0
    exponent, intercept = np.polyfit(log_n, log_f, 1)
    return float(math.exp(intercept)), float(exponent)


def _objective(theta: np.ndarray, log_n: np.ndarray, log_d: np.ndarray,
               log_l: np.ndarray) -> tuple[float, np.ndarray]:
    """Huber loss of log-loss residuals and its gradient; theta = (a, b, e, alpha, beta).
    One row of ``_batched_objective``, for scipy's minimiser."""
    values, grads = _batched_objective(np.asarray(theta)[None, :], log_n, log_d, log_l, None)
    return float(values[0]), grads[0]


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
    found, values = _batched_lbfgs(
        grid, lambda x, rows: _batched_objective(x, log_n, log_d, log_l, None))
    best = int(np.nanargmin(values))
    return found[best], float(values[best])


def _resample_weights(n: int, count: int, seed: int) -> np.ndarray:
    """Each bootstrap resample (n runs drawn with replacement) as counts per run (count, n)."""
    idx = np.random.default_rng(seed).integers(0, n, (count, n))
    flat = (idx + n * np.arange(count)[:, None]).ravel()
    return np.bincount(flat, minlength=count * n).reshape(count, n).astype(float)


def _bootstrap(theta: np.ndarray, log_n: np.ndarray, log_d: np.ndarray, log_l: np.ndarray,
               count: int, seed: int) -> np.ndarray:
    """Refit every resample at once, each started from the full-data optimum ``theta``."""
    weights = _resample_weights(len(log_n), count, seed)
    out, _ = _batched_lbfgs(
        np.tile(theta, (count, 1)),
        lambda x, rows: _batched_objective(x, log_n, log_d, log_l, weights[rows]),
        h0=_inverse_hessian(theta, log_n, log_d, log_l))
    return out


def _batched_objective(theta: np.ndarray, log_n: np.ndarray, log_d: np.ndarray,
                       log_l: np.ndarray, weights: np.ndarray | None
                       ) -> tuple[np.ndarray, np.ndarray]:
    """``_objective`` of many fits at once: theta (k, 5), each row weighting the runs by its
    row of ``weights`` (k, n) (a bootstrap resample's counts), or all by one (None)."""
    a, b, e, alpha, beta = (theta[:, i:i + 1] for i in range(5))
    t_n = a - alpha * log_n
    t_d = b - beta * log_d
    top = np.maximum(np.maximum(t_n, t_d), e)
    w_n, w_d, w_e = np.exp(t_n - top), np.exp(t_d - top), np.exp(e - top)
    total = w_n + w_d + w_e
    r = top + np.log(total) - log_l
    abs_r = np.abs(r)
    small = abs_r <= HUBER_DELTA
    huber = np.where(small, 0.5 * r * r, HUBER_DELTA * (abs_r - 0.5 * HUBER_DELTA))
    dr = np.where(small, r, HUBER_DELTA * np.sign(r)) / total
    if weights is not None:
        huber *= weights
        dr *= weights
    g_n, g_d = dr * w_n, dr * w_d
    grad = np.column_stack([g_n.sum(1), g_d.sum(1), (dr * w_e).sum(1), -(g_n @ log_n),
                            -(g_d @ log_d)])
    return huber.sum(1), grad


def _batched_lbfgs(x: np.ndarray, fun, memory: int = 10, max_iter: int = 1000,
                   gtol: float = 1e-10, ftol: float = 1e-15, h0: np.ndarray | None = None
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Minimise k independent problems at once by L-BFGS; ``fun(x, rows)`` returns the
    objectives (k',) and gradients (k', p) of problems ``rows`` at points x (k', p).

    Design note: every array operation covers all problems still running, so the cost per
    iteration is a few numpy calls whatever k is; a problem leaves the batch when it meets
    scipy's L-BFGS-B stopping rules (gradient below ``gtol``, relative decrease below
    ``ftol``) or its line search can make no progress. The line search backtracks from the
    full quasi-Newton step (quadratic interpolation, Armijo condition); curvature pairs with
    s.y <= 0 are skipped, which keeps the inverse Hessian positive definite.
    """
    x = np.array(x, dtype=float)
    k, p = x.shape
    f, g = fun(x, np.arange(k))
    s_mem, y_mem = np.zeros((k, memory, p)), np.zeros((k, memory, p))
    rho = np.zeros((k, memory))
    gamma = np.zeros(k)  # 0: no curvature yet, first step of unit length along -g
    active = np.flatnonzero(np.abs(g).max(1) > gtol)
    for _ in range(max_iter):
        if not active.size:
            break
        ga = g[active]
        d = -_two_loop(ga, s_mem[active], y_mem[active], rho[active], gamma[active], h0)
        slope = np.einsum("ij,ij->i", d, ga)
        uphill = slope >= 0
        if uphill.any():
            d[uphill] = -ga[uphill]
            slope[uphill] = -np.einsum("ij,ij->i", ga[uphill], ga[uphill])
        step = np.where((gamma[active] > 0) | (h0 is not None), 1.0,
                        1.0 / np.linalg.norm(d, axis=1))
        new_x, new_f, new_g = x[active].copy(), f[active].copy(), ga.copy()
        moved = np.zeros(len(active), bool)
        todo = np.arange(len(active))
        for _ in range(30):
            rows = active[todo]
            trial = x[rows] + step[todo, None] * d[todo]
            ft, gt = fun(trial, rows)
            ok = ft <= f[rows] + 1e-4 * step[todo] * slope[todo]
            done_rows = todo[ok]
            new_x[done_rows], new_f[done_rows], new_g[done_rows] = trial[ok], ft[ok], gt[ok]
            moved[done_rows] = True
            todo, ft = todo[~ok], ft[~ok]
            if not todo.size:
                break
            t = step[todo]
            excess = ft - f[active[todo]] - slope[todo] * t
            quadratic = -slope[todo] * t * t / (2 * np.where(excess > 0, excess, np.inf))
            step[todo] = np.clip(np.nan_to_num(quadratic, nan=0.1 * t), 0.1 * t, 0.5 * t)
        s, y = new_x - x[active], new_g - ga
        sy = np.einsum("ij,ij->i", s, y)
        keep = moved & (sy > 1e-10 * np.linalg.norm(s, axis=1) * np.linalg.norm(y, axis=1))
        rows = active[keep]
        s_mem[rows] = np.concatenate([s_mem[rows, 1:], s[keep, None]], axis=1)
        y_mem[rows] = np.concatenate([y_mem[rows, 1:], y[keep, None]], axis=1)
        rho[rows] = np.concatenate([rho[rows, 1:], 1 / sy[keep, None]], axis=1)
        gamma[rows] = sy[keep] / np.einsum("ij,ij->i", y[keep], y[keep])
        old_f = f[active]
        x[active], f[active], g[active] = new_x, new_f, new_g
        scale = np.maximum(np.maximum(np.abs(old_f), np.abs(new_f)), 1.0)
        finished = (~moved | ((old_f - new_f) <= ftol * scale)
                    | (np.abs(new_g).max(1) <= gtol))
        active = active[~finished]
    return x, f


def _inverse_hessian(theta: np.ndarray, log_n: np.ndarray, log_d: np.ndarray,
                     log_l: np.ndarray, h: float = 1e-5) -> np.ndarray:
    """The inverse of the full-data objective's Hessian at ``theta`` (central differences of
    the gradient), its eigenvalues floored to keep it positive definite: the starting
    curvature of every resample's fit, whose optimum lies near ``theta``."""
    points = np.concatenate([theta + h * np.eye(5), theta - h * np.eye(5)])
    _, grads = _batched_objective(points, log_n, log_d, log_l, None)
    hessian = (grads[:5] - grads[5:]) / (2 * h)
    values, vectors = np.linalg.eigh((hessian + hessian.T) / 2)
    values = np.maximum(values, values.max() * 1e-8)
    return (vectors / values) @ vectors.T


def _two_loop(g: np.ndarray, s: np.ndarray, y: np.ndarray, rho: np.ndarray,
              gamma: np.ndarray, h0: np.ndarray | None = None) -> np.ndarray:
    """The L-BFGS product H g for each row; empty memory slots (rho = 0) contribute nothing."""
    q = g.copy()
    alphas = np.empty(rho.shape)
    for i in range(rho.shape[1] - 1, -1, -1):
        alphas[:, i] = rho[:, i] * np.einsum("ij,ij->i", s[:, i], q)
        q -= alphas[:, i, None] * y[:, i]
    scale = np.where(gamma[:, None] > 0, gamma[:, None], 1.0)
    r = q @ h0 if h0 is not None else scale * q
    for i in range(rho.shape[1]):
        beta = rho[:, i] * np.einsum("ij,ij->i", y[:, i], r)
        r += (alphas[:, i] - beta)[:, None] * s[:, i]
    return r


def fit_parametric_loss(params: Sequence[float], tokens: Sequence[float],
                        loss: Sequence[float], bootstrap: int = 0, seed: int = 0,
                        starts: int | None = 64, flops: Sequence[float] | None = None
                        ) -> Approach3:
    """Fit E + A/N^alpha + B/D^beta; ``bootstrap`` resamples give standard errors; each
    run's training ``flops`` set the accounting of ``predict_optimal`` (else C = 6 N D)."""
    n_arr, d_arr, l_arr = (np.asarray(v, dtype=float) for v in (params, tokens, loss))
    f_arr = 6 * n_arr * d_arr if flops is None else np.asarray(flops, dtype=float)
    if not (len(n_arr) == len(d_arr) == len(l_arr) == len(f_arr)):
        raise ValueError("params, tokens, loss (and flops) must have the same length")
    finite = np.isfinite(n_arr) & np.isfinite(d_arr) & np.isfinite(l_arr) & (l_arr > 0)
    finite &= np.isfinite(f_arr) & (f_arr > 0) & (n_arr > 0) & (d_arr > 0)
    if finite.sum() < MIN_RUNS_PARAMETRIC:
        raise ValueError(f"the parametric fit needs at least {MIN_RUNS_PARAMETRIC} runs with "
                         f"finite values, got {int(finite.sum())}")
    log_n, log_d, log_l = np.log(n_arr[finite]), np.log(d_arr[finite]), np.log(l_arr[finite])
    theta, value = _best_fit(log_n, log_d, log_l, starts)
    a, b, e, alpha, beta = (float(v) for v in theta)
    for name, log_value in (("A", a), ("B", b), ("E", e)):
        if not (math.isfinite(log_value) and log_value < _LOG_MAX):
            raise ValueError(f"the parametric fit diverged: {name} = e^{log_value:.4g} is past "
                             "the largest float (a run set that does not pin down L(N, D)); "
                             "give runs over more sizes and token counts")
    law: dict = {"E": math.exp(e), "A": math.exp(a), "B": math.exp(b), "alpha": alpha,
                 "beta": beta, "objective": value}
    if flops is not None:
        law["flops_coefficient"], law["flops_exponent"] = flops_per_token_law(
            n_arr[finite], d_arr[finite], f_arr[finite])
    if bootstrap:
        law.update(_bootstrap_law(_bootstrap(theta, log_n, log_d, log_l, bootstrap, seed)))
    return Approach3(**law)


def _bootstrap_law(samples: np.ndarray) -> dict:
    """The resamples' fields of an ``Approach3``: their rows in natural units (E, A, B,
    alpha, beta), standard errors and ``LEVEL`` percentile intervals."""
    natural = np.column_stack([np.exp(samples[:, 2]), np.exp(samples[:, 0]),
                               np.exp(samples[:, 1]), samples[:, 3], samples[:, 4]])
    intervals = {}
    if len(natural) >= 2:
        tail = (1 - LEVEL) / 2 * 100
        for i, name in enumerate(PARAMETERS):
            low, high = np.percentile(natural[:, i], [tail, 100 - tail])
            intervals[name] = (float(low), float(high))
    return {"bootstrap_samples": tuple(tuple(float(v) for v in row) for row in natural),
            "standard_errors": {name: float(np.std(natural[:, i], ddof=1))
                                for i, name in enumerate(PARAMETERS)},
            "intervals": intervals}
