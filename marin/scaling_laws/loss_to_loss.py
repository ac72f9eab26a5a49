"""Loss-to-loss fits: ``L_y = K * (L_x - E_x) ** kappa + E_y`` across runs (Brandfonbrener
et al. 2024), with a bootstrap over runs.

    law = fit_loss_to_loss(x_runs, y_runs)          # the i-th runs of each are one pair
    law = fit_test_to_test(plays_rows, docs_rows, label="plays")    # two metrics, one label
    law = fit_train_to_train(rows, "plays", "mix")  # two labels at matched compute
    law.predict(2.9).interval                       # L_y at L_x = 2.9, 95% interval

A run is a ``RunRow`` (its ``loss``) or a plain number. Test-to-test pairs the two
validation metrics of each run of one label: ``x_rows`` and ``y_rows`` are the same runs
read with two metrics (``read_run_folders(folder, metric="plays/bpb")`` and
``metric="docs/bpb"``), paired by run name. Train-to-train pairs two labels' runs trained at
the same compute: the same budget and model shape (hidden size and layers; the parameter
count when a row has no shape), each label's first seed; a run of ``y_label`` without its
``x_label`` twin is an error, while ``x_label`` may have been swept further.

The fit (variable projection): for a fixed ``E_x`` and ``kappa`` the law is linear in ``K``
and ``E_y``, which weighted least squares of ``L_y`` on ``(L_x - E_x) ** kappa`` give in
closed form (with ``E_y >= 0``: an irreducible loss is not negative). So the search is
over (``E_x``, ``kappa``) alone: the best point of a grid with ``K > 0`` starts a
Levenberg-Marquardt refinement in ``logit(E_x / min L_x)`` and ``log kappa``, which keeps
``E_x`` between 0 and the smallest ``L_x`` and ``kappa`` positive. Eliminating the two
linear parameters is what makes it converge: with all four free, the steps crawl along the
curved valley in which ``E_x``, ``kappa`` and ``E_y`` trade off. An ``E_x`` left at either
end of its range, or an ``E_y`` at 0, is reported as not identified. The bootstrap
resamples the runs and refits every resample at once (each a row of counts weighting the
runs), started from the full data's optimum; a prediction interval adds to each
resample's law one rescaled residual of the fit, so it covers a new run's scatter as well
as the law's uncertainty.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np

from marin.scaling_laws.loss_to_loss_values import (
    LOSS_TO_LOSS_PARAMETERS,
    LossToLoss,
    LossToLossError,
)
from marin.scaling_laws.run_status import RunStatus
from marin.scaling_laws.values import RunRow

__all__ = ["MIN_RUNS_LOSS_TO_LOSS", "LossToLoss", "LossToLossError", "fit_loss_to_loss",
           "fit_test_to_test", "fit_train_to_train"]

MIN_RUNS_LOSS_TO_LOSS = 6  # four parameters and two degrees of freedom for the scatter
_LAW = "L_y = K * (L_x - E_x)^kappa + E_y"
_MAX_ITER = 300
_EDGE = 1e-4  # E_x within this fraction of min L_x from 0 or from min L_x is at its bound


def fit_loss_to_loss(x_runs: Sequence[RunRow | float], y_runs: Sequence[RunRow | float], *,
                     bootstrap: int = 1000, seed: int = 0, x_name: str = "",
                     y_name: str = "") -> LossToLoss:
    """Fit ``L_y = K * (L_x - E_x) ** kappa + E_y`` to paired runs (``x_runs[i]`` and
    ``y_runs[i]`` are one run's, or one pair's, two losses); ``bootstrap`` resamples of the
    runs give the standard errors and prediction intervals (0: none)."""
    x, y = _losses(x_runs, "x_runs"), _losses(y_runs, "y_runs")
    if len(x) != len(y):
        raise LossToLossError(f"x_runs has {len(x)} runs and y_runs {len(y)}: give the two "
                              "losses of each pair at the same index")
    if len(x) < MIN_RUNS_LOSS_TO_LOSS:
        raise LossToLossError(f"the loss-to-loss fit needs at least {MIN_RUNS_LOSS_TO_LOSS} "
                              f"paired runs, got {len(x)}; pair more runs (more budgets or "
                              "model sizes)")
    if np.ptp(x) <= 1e-9 * np.max(x):
        raise LossToLossError(f"the fit of {_LAW} did not converge: every run has L_x = "
                              f"{x[0]:.6g}; pair runs whose losses differ")
    order = np.argsort(x, kind="stable")  # the fit does not depend on the runs' order
    x, y = x[order], y[order]
    floor = float(x.min())
    found, done = _fit(x, y, np.ones((1, len(x))), floor, None)
    if not np.all(np.isfinite(found[0])):
        raise LossToLossError(f"the fit of {_LAW} did not converge: no law with K > 0 fits "
                              f"the {len(x)} runs, so L_y does not rise with L_x; pair the "
                              "losses of the same runs (or matched runs)")
    if not done[0]:
        raise LossToLossError(f"the fit of {_LAW} did not converge in {_MAX_ITER} "
                              f"iterations on {len(x)} runs; pair runs over a wider range "
                              "of L_x")
    K, kappa, E_x, E_y = _natural(found[0], floor)
    fraction = float(_sigmoid(found[0][0]))
    residuals = y - (K * (x - E_x) ** kappa + E_y)
    scale = math.sqrt(len(x) / (len(x) - 4))
    law = {"K": K, "kappa": kappa, "E_x": E_x, "E_y": E_y, "runs": len(x),
           "residual_sd": float(np.sqrt(np.mean(residuals ** 2)) * scale),
           "loss_x_range": (floor, float(x.max())), "x_name": x_name, "y_name": y_name,
           "at_bound": (("E_x",) if not _EDGE < fraction < 1 - _EDGE else ())
           + (("E_y",) if E_y <= 0 else ())}
    if bootstrap:
        law.update(_bootstrap(x, y, found[0], floor, residuals * scale, bootstrap, seed))
    return LossToLoss(**law)


def fit_test_to_test(x_rows: Sequence[RunRow], y_rows: Sequence[RunRow], *,
                     label: str | None = None, **options) -> LossToLoss:
    """The law between two validation metrics of one label's runs: ``x_rows`` and
    ``y_rows`` are the same runs read with the two metrics, paired by run name (runs of
    ``label`` only, when given; runs whose status is not ok are left out)."""
    def keep(rows: Sequence[RunRow]) -> list[RunRow]:
        return [r for r in rows if r.status is RunStatus.OK and label in (None, r.label)]

    x_by, y_by = (_by_key(keep(rows), lambda r: r.run, name) for rows, name in
                  ((x_rows, "x_rows"), (y_rows, "y_rows")))
    for a, b, a_name, b_name in ((x_by, y_by, "x_rows", "y_rows"),
                                 (y_by, x_by, "y_rows", "x_rows")):
        missing = [run for run in a if run not in b]
        if missing:
            raise LossToLossError(f"run {missing[0]!r} of {a_name} is not in {b_name}: read "
                                  "both metrics from the same runs")
    runs = sorted(x_by)
    return fit_loss_to_loss([x_by[r] for r in runs], [y_by[r] for r in runs], **options)


def fit_train_to_train(rows: Sequence[RunRow], x_label: str, y_label: str,
                       **options) -> LossToLoss:
    """The law between two labels' losses at matched compute: each run of ``y_label`` is
    paired with the run of ``x_label`` of its budget and model shape (first seeds only;
    runs whose status is not ok are left out)."""
    def of(label: str) -> dict[Hashable, RunRow]:
        picked = [r for r in rows if r.label == label and r.status is RunStatus.OK
                  and r.replicate_of is None]
        if not picked:
            known = sorted({r.label for r in rows})
            raise LossToLossError(f"no ok run of label {label!r}; the runs' labels are "
                                  f"{', '.join(known) or 'none'}")
        return _by_key(picked, _compute_key, f"label {label!r}")

    x_by, y_by = of(x_label), of(y_label)
    unpaired = [key for key in y_by if key not in x_by]
    if unpaired:
        run = y_by[unpaired[0]]
        raise LossToLossError(f"run {run.run!r} of {y_label!r} (budget {run.budget:.3g}, "
                              f"{_shape(run)}) has no run of {x_label!r} at that budget and "
                              f"shape; sweep {x_label!r} over the same candidates")
    keys = sorted(y_by, key=str)
    options = {"x_name": x_label, "y_name": y_label, **options}
    return fit_loss_to_loss([x_by[k] for k in keys], [y_by[k] for k in keys], **options)


def _compute_key(row: RunRow) -> Hashable:
    if row.budget is None:
        raise LossToLossError(f"run {row.run!r} has no budget; train-to-train pairs runs by "
                              "budget and shape, so read runs that have one")
    if row.hidden_dim is not None and row.num_layers is not None:
        return row.budget, row.hidden_dim, row.num_layers
    return row.budget, float(f"{row.params:.6g}")


def _shape(row: RunRow) -> str:
    if row.hidden_dim is not None and row.num_layers is not None:
        return f"hidden {row.hidden_dim}, {row.num_layers} layers"
    return f"{row.params:.3g} parameters"


def _by_key(rows: Sequence[RunRow], key: Callable[[RunRow], Hashable],
            where: str) -> dict[Hashable, RunRow]:
    found: dict[Hashable, RunRow] = {}
    for row in rows:
        k = key(row)
        if k in found:
            raise LossToLossError(f"{where}: runs {found[k].run!r} and {row.run!r} would both "
                                  "be paired with one run; give each run once")
        found[k] = row
    return found


def _losses(runs: Sequence[RunRow | float], where: str) -> np.ndarray:
    values = np.array([r.loss if isinstance(r, RunRow) else r for r in runs], dtype=float)
    bad = np.flatnonzero(~(np.isfinite(values) & (values > 0)))
    if bad.size:
        i = int(bad[0])
        run = runs[i].run if isinstance(runs[i], RunRow) else ""
        raise LossToLossError(f"{where}[{i}]{f' (run {run!r})' if run else ''} has loss "
                              f"{float(values[i])}, not a finite positive number; leave out runs "
                              "that diverged or lack the metric")
    return values


def _natural(theta: np.ndarray, floor: float) -> tuple[float, float, float, float]:
    """(K, kappa, E_x, E_y) of theta = (logit(E_x / min L_x), log kappa, K, E_y)."""
    s, v, K, E_y = (float(t) for t in theta)
    return K, math.exp(v), floor * float(_sigmoid(s)), E_y


def _sigmoid(s: Any) -> Any:
    return 0.5 * (1 + np.tanh(0.5 * s))


def _projected(shape: np.ndarray, x: np.ndarray, y: np.ndarray, weights: np.ndarray,
               floor: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each row's (logit(E_x / min L_x), log kappa) (k, 2) and weights (k, n): K and
    E_y >= 0 by weighted least squares of L_y on ``(L_x - E_x) ** kappa``, and the
    residuals. The problem is a convex quadratic in (K, E_y): where its minimum has
    E_y < 0, the constrained one lies on E_y = 0 (a line through the origin)."""
    t = x - floor * _sigmoid(shape[:, :1])
    z = t ** np.exp(shape[:, 1:])
    sw, sz, sy = weights.sum(1), (weights * z).sum(1), weights @ y
    szz, szy = (weights * z * z).sum(1), (weights * z) @ y
    K = (szy - sz * sy / sw) / (szz - sz ** 2 / sw)
    E_y = (sy - K * sz) / sw
    negative = E_y < 0
    K, E_y = np.where(negative, szy / szz, K), np.where(negative, 0.0, E_y)
    return K, E_y, K[:, None] * z + E_y[:, None] - y


def _grid_start(x: np.ndarray, y: np.ndarray, weights: np.ndarray, floor: float
                ) -> np.ndarray:
    """Per row of ``weights``, the best (E_x, kappa) with K > 0 of a grid, as
    (logit(E_x / min L_x), log kappa); NaN where no grid point has K > 0."""
    fractions = 1 - np.geomspace(1e-3, 0.999, 40)
    grid = np.array([(math.log(f / (1 - f)), math.log(kappa)) for f in fractions
                     for kappa in np.geomspace(0.1, 5.0, 40)])
    k = len(weights)
    shapes = np.repeat(grid[None], k, axis=0).reshape(-1, 2)
    K, _, r = _projected(shapes, x, y, np.repeat(weights, len(grid), axis=0), floor)
    sse = np.where(K > 0, (np.repeat(weights, len(grid), axis=0) * r * r).sum(1), np.inf)
    sse = sse.reshape(k, len(grid))
    best = np.argmin(sse, axis=1)
    start = grid[best]
    start[~np.isfinite(sse[np.arange(k), best])] = np.nan
    return start


def _fit(x: np.ndarray, y: np.ndarray, weights: np.ndarray, floor: float,
         start: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Levenberg-Marquardt in (logit(E_x / min L_x), log kappa), K and E_y solved at every
    point, on every row of ``weights`` at once, from ``start`` (k, 2) or the grid's best;
    returns theta (k, 4) and whether each converged (a relative decrease of the squared
    error below 1e-10, or no step that decreases it)."""
    with np.errstate(all="ignore"):
        shape = _grid_start(x, y, weights, floor) if start is None else start.copy()
        k = len(shape)

        def sse_of(at: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            _, _, r = _projected(at, x, y, weights[rows], floor)
            return r, (weights[rows] * r * r).sum(1)

        r, sse = sse_of(shape, np.arange(k))
        damping = np.full(k, 1e-3)
        active = np.isfinite(sse)
        done = np.zeros(k, bool)
        for _ in range(_MAX_ITER):
            rows = np.flatnonzero(active)
            if not rows.size:
                break
            w, res = weights[rows], r[rows]
            jac = np.stack([(sse_of(shape[rows] + h, rows)[0] - res) / 1e-7
                            for h in 1e-7 * np.eye(2)], axis=-1)
            jw = (jac * w[:, :, None]).transpose(0, 2, 1)
            a, g = jw @ jac, (jw @ res[:, :, None])[:, :, 0]
            diag = np.einsum("kii->ki", a)
            lhs = a + (damping[rows, None] * np.maximum(diag, 1e-12))[:, :, None] * np.eye(2)
            trial = shape[rows] - _solve(lhs, g)
            r_t, sse_t = sse_of(trial, rows)
            better = np.isfinite(sse_t) & (sse_t < sse[rows])
            gain = (sse[rows] - sse_t) / np.maximum(sse[rows], 1e-300)
            moved = rows[better]
            shape[moved], r[moved], sse[moved] = trial[better], r_t[better], sse_t[better]
            damping[moved] /= 3
            damping[rows[~better]] *= 4
            finished = (better & (gain < 1e-10)) | (~better & (damping[rows] > 1e12))
            done[rows[finished]] = True
            active[rows[finished]] = False
        K, E_y, _ = _projected(shape, x, y, weights, floor)
    return np.column_stack([shape, K, E_y]), done


def _solve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Each system a[i] s = b[i]; NaN for a singular one."""
    out = np.full(b.shape, np.nan)
    ok = np.isfinite(a).all((1, 2)) & np.isfinite(b).all(1)
    ok[ok] = np.abs(np.linalg.det(a[ok])) > 1e-300
    if ok.any():
        out[ok] = np.linalg.solve(a[ok], b[ok][:, :, None])[:, :, 0]
    return out


def _bootstrap(x: np.ndarray, y: np.ndarray, theta: np.ndarray, floor: float,
               residuals: np.ndarray, count: int, seed: int) -> dict:
    """The resamples' fields of a ``LossToLoss``: each resample's parameters (every finite
    fit, one still creeping along a flat valley included), their standard errors, and one
    rescaled residual per resample (the scatter)."""
    rng = np.random.default_rng(seed)
    n = len(x)
    idx = rng.integers(0, n, (count, n))
    weights = np.zeros((count, n))
    np.add.at(weights, (np.arange(count)[:, None], idx), 1.0)
    found, _ = _fit(x, y, weights, floor, np.tile(theta[:2], (count, 1)))
    ok = np.isfinite(found).all(1)
    natural = np.array([_natural(t, floor) for t in found[ok]]).reshape(-1, 4)
    noise = rng.choice(residuals, size=len(natural))
    with np.errstate(over="ignore"):  # a free parameter's resamples may be huge: se inf
        errors = {} if len(natural) < 2 else {
            name: float(np.std(natural[:, i], ddof=1))
            for i, name in enumerate(LOSS_TO_LOSS_PARAMETERS)}
    return {"bootstrap_samples": tuple(tuple(float(v) for v in row) for row in natural),
            "noise": tuple(float(v) for v in noise), "standard_errors": errors}
