"""Scaling-law fits: Epoch AI's Chinchilla replication reproduced, IsoFLOP fits on data
drawn from a known law, refusals, plots."""

from __future__ import annotations

import csv
import json
import logging
import math
import os
import struct
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from marin.scaling_laws.isoflop_analysis import (
    ScalingFitError,
    fit_budget,
    fit_isoflops,
)
from marin.scaling_laws.parametric import _objective, fit_parametric_loss
from marin.scaling_laws.plots import write_isoflop_plots, write_scaling_plots
from marin.scaling_laws.scaling_heuristics import CompletedAdamhHeuristic
from marin.scaling_laws.study.artifacts import StudyFits
from tests.conftest import ROOT
from tests.helpers.synthetic_runs import EPOCH, chinchilla_isoflop_runs, true_optimum

DATA = Path(__file__).parent / "data" / "chinchilla_svg_extracted_data.csv"
# Besiroglu et al. (2024), Table 1: their fit to these points and its standard errors.
EPOCH_SE = {"E": 0.026, "alpha": 0.015, "beta": 0.021}


def chinchilla_runs(exclude_highest_loss: int = 5) -> tuple[np.ndarray, ...]:
    rows = list(csv.DictReader(DATA.open()))
    n = np.array([float(r["Model Size"]) for r in rows])
    c = np.array([float(r["Training FLOP"]) for r in rows])
    loss = np.array([float(r["loss"]) for r in rows])
    keep = np.argsort(loss)[: len(loss) - exclude_highest_loss]
    return n[keep], c[keep] / (6 * n[keep]), loss[keep]


@pytest.fixture(scope="module")
def chinchilla_fit():
    n, d, loss = chinchilla_runs()
    assert len(n) == 240
    return fit_parametric_loss(n, d, loss, bootstrap=300, seed=1)


def test_chinchilla_parametric_fit_lands_within_epochs_standard_errors(chinchilla_fit):
    for name, se in EPOCH_SE.items():
        assert abs(getattr(chinchilla_fit, name) - EPOCH[name]) < se, name
    # A and B are poorly identified on their own; their ratios to Epoch's stay modest.
    assert 0.8 < chinchilla_fit.A / EPOCH["A"] < 1.25
    assert 0.8 < chinchilla_fit.B / EPOCH["B"] < 1.25


def test_bootstrap_standard_errors_are_epochs_size(chinchilla_fit):
    for name, se in EPOCH_SE.items():
        assert 0.6 * se < chinchilla_fit.standard_errors[name] < 1.5 * se, name


def test_predict_optimal_obeys_c_equals_6nd_and_names_the_nearest_candidate(chinchilla_fit):
    heuristic = CompletedAdamhHeuristic(vocab_size=50257)
    best = chinchilla_fit.predict_optimal(3e19, heuristic=heuristic)
    assert 6 * best.params * best.tokens == pytest.approx(3e19)
    low, high = best.params_interval
    assert low < best.params < high
    candidate = best.nearest_candidate
    assert candidate is not None and candidate.budget == 3e19
    others = list(heuristic.candidates_for_budget(3e19))
    assert all(abs(math.log(candidate.params / best.params))
               <= abs(math.log(c.params / best.params)) for c in others)
    # Exponents from the closed form: N_opt grows as C^(beta / (alpha + beta)).
    bigger = chinchilla_fit.predict_optimal(3e21)
    exponent = math.log(bigger.params / best.params) / math.log(100)
    f = chinchilla_fit
    assert exponent == pytest.approx(f.beta / (f.alpha + f.beta))


def test_vectorised_bootstrap_matches_one_scipy_fit_per_resample():
    """The batched refit of every resample against the straightforward loop: one L-BFGS-B
    run per resample from the point fit, on an objective written out independently."""
    from scipy.optimize import minimize
    from scipy.special import huber, logsumexp

    runs = chinchilla_isoflop_runs(noise=0.01, seed=2)
    n, d, loss = (np.log([getattr(r, k) for r in runs]) for k in ("params", "tokens", "loss"))
    fit = fit_parametric_loss(np.exp(n), np.exp(d), np.exp(loss), bootstrap=30, seed=5)

    def objective(theta, i):  # theta = (log A, log B, log E, alpha, beta)
        a, b, e, alpha, beta = theta
        lse = logsumexp([a - alpha * n[i], b - beta * d[i], np.full(len(i), e)], axis=0)
        return huber(1e-3, lse - loss[i]).sum()

    def gradient(theta, i):
        return _objective(theta, n[i], d[i], loss[i])[1]

    start = np.array([math.log(fit.A), math.log(fit.B), math.log(fit.E), fit.alpha, fit.beta])
    every = np.arange(len(n))
    numeric = [(objective(start + 1e-6 * u, every) - objective(start - 1e-6 * u, every)) / 2e-6
               for u in np.eye(5)]
    assert gradient(start + 0.01, every) == pytest.approx(
        [(objective(start + 0.01 + 1e-6 * u, every) - objective(start + 0.01 - 1e-6 * u, every))
         / 2e-6 for u in np.eye(5)], rel=1e-4)
    assert np.abs(numeric).max() < 1e-6  # the point fit is a minimum
    resamples = np.random.default_rng(5).integers(0, len(n), (30, len(n)))
    reference, reference_values = [], []
    for i in resamples:
        result = minimize(objective, start, args=(i,), jac=gradient, method="L-BFGS-B",
                          options={"maxiter": 1000, "gtol": 1e-10, "ftol": 1e-15})
        x = result.x
        reference.append([math.exp(x[2]), math.exp(x[0]), math.exp(x[1]), x[3], x[4]])
        reference_values.append(result.fun)
    reference = np.array(reference)
    samples = fit.samples()
    spread = reference.std(axis=0, ddof=1)
    assert np.all(np.abs(samples - reference).max(axis=0) < 0.05 * spread)
    for k, name in enumerate(("E", "A", "B", "alpha", "beta")):
        assert fit.standard_errors[name] == pytest.approx(spread[k], rel=0.02), name
    for x, i, value in zip(samples, resamples, reference_values, strict=True):
        theta = np.array([math.log(x[1]), math.log(x[2]), math.log(x[0]), x[3], x[4]])
        assert objective(theta, i) <= value * (1 + 1e-6)  # as low as the reference's minimum


def test_isoflop_fits_recover_a_known_law():
    analysis = fit_isoflops(chinchilla_isoflop_runs())
    for fit in analysis.budgets:
        n_true, d_true = true_optimum(fit.budget)
        assert fit.optimal_tokens == pytest.approx(d_true, rel=0.05)
        assert fit.optimal_params == pytest.approx(n_true, rel=0.05)
    expected = EPOCH["beta"] / (EPOCH["alpha"] + EPOCH["beta"])
    assert analysis.params_fit.exponent == pytest.approx(expected, abs=0.01)
    assert analysis.tokens_fit.exponent == pytest.approx(1 - expected, abs=0.01)
    n_true, _ = true_optimum(1e21)
    assert float(analysis.params_fit.predict(1e21)) == pytest.approx(n_true, rel=0.1)


def test_the_robust_parabola_shrugs_off_one_bad_run():
    runs = [r for r in chinchilla_isoflop_runs(budgets=(1e19,))]
    clean = fit_budget(1e19, runs)
    broken = list(runs)
    broken[4] = replace(runs[4], loss=runs[4].loss + 0.5)  # a diverged run at the optimum
    robust = fit_budget(1e19, broken)
    assert robust.optimal_tokens == pytest.approx(clean.optimal_tokens, rel=0.1)


def test_fewer_than_three_points_in_a_budget_is_refused():
    runs = chinchilla_isoflop_runs(budgets=(1e19,))[:2]
    with pytest.raises(ScalingFitError, match=r"budget 1e\+19 has 2 run\(s\); a parabola "
                       "needs at least 3"):
        fit_budget(1e19, runs)


def test_nan_and_infinite_losses_are_dropped_with_a_counted_warning(caplog):
    runs = chinchilla_isoflop_runs()
    runs[0] = replace(runs[0], loss=math.nan)
    runs[10] = replace(runs[10], loss=math.inf)
    with caplog.at_level(logging.WARNING, logger="marin.scaling_laws"):
        analysis = fit_isoflops(runs)
    assert len(analysis.dropped) == 2
    assert "dropped 2 run(s) with NaN, infinite or non-positive values" in caplog.text
    assert sum(b.points for b in analysis.budgets) == len(runs) - 2


def _png_size(path: Path) -> tuple[int, int]:
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", header[16:24])


def test_plots_are_written_as_png_and_interactive_html(tmp_path: Path):
    runs = chinchilla_isoflop_runs(noise=0.003, seed=3)
    analysis = fit_isoflops(runs)
    files = write_isoflop_plots(analysis, runs, tmp_path / "isoflops")
    files += write_scaling_plots(analysis, tmp_path / "scaling", target=1e21)
    for f in files:
        assert f.stat().st_size > 10_000, f
    width, height = _png_size(tmp_path / "isoflops.png")
    assert width >= 800 and height >= 600
    page = (tmp_path / "scaling.html").read_text()
    assert "plotly" in page and "1e+21" in page


@pytest.mark.slow  # real `marin` processes
def test_scaling_fit_command_end_to_end(tmp_path: Path):
    runs = chinchilla_isoflop_runs(noise=0.002, seed=5)
    table = tmp_path / "runs.jsonl"
    table.write_text("\n".join(json.dumps({"params": r.params, "tokens": r.tokens,
                                           "flops": r.flops, "loss": r.loss,
                                           "budget": r.budget}) for r in runs))
    out = subprocess.run([sys.executable, "-m", "marin.cli", "scaling", "fit", str(table),
                          "--target", "3e19", "--out", str(tmp_path / "plots"), "--bootstrap",
                          "50", "--json"], capture_output=True, text=True, cwd=ROOT,
                         timeout=300, env={**os.environ})
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    n_true, _ = true_optimum(3e19)
    fits = StudyFits.from_json(report["fit"])
    [target] = fits.fits["default"].predictions
    assert target.budget == 3e19
    assert target.approach3.params == pytest.approx(n_true, rel=0.15)
    assert target.approach2.params == pytest.approx(n_true, rel=0.15)
    assert report["nearest_candidates"]["default"]["budget"] == 3e19
    assert {Path(f).name for f in report["files"]} == {
        "isoflops.png", "isoflops.html", "scaling.png", "scaling.html", "fit.json"}
    assert StudyFits.from_json(json.loads((tmp_path / "plots" / "fit.json").read_text())) == fits


def test_fit_runs_is_the_library_side_of_the_command(tmp_path: Path):
    """``fit_runs`` (what ``marin scaling fit`` calls) on a table: the optimum at the target
    is the true one, the nearest candidate is the heuristic's closest to it, and the files
    it writes hold the same fits; bad options are refused naming the option."""
    from marin.scaling_laws.scaling_heuristics import load_heuristic
    from marin.scaling_laws.study.run_fits import fit_runs, nearest_candidates, write_fit_files

    runs = chinchilla_isoflop_runs(noise=0.002, seed=5)
    table = tmp_path / "runs.jsonl"
    table.write_text("\n".join(json.dumps({"params": r.params, "tokens": r.tokens,
                                           "flops": r.flops, "loss": r.loss,
                                           "budget": r.budget}) for r in runs))
    fitted = fit_runs(str(table), target=3e19, bootstrap=20)
    assert len(fitted.rows) == len(runs) and fitted.fits.labels == ("default",)
    [target] = fitted.fits.fits["default"].predictions
    assert target.approach3.params == pytest.approx(true_optimum(3e19)[0], rel=0.15)
    heuristic = load_heuristic("completed-adamh")
    nearest = nearest_candidates(fitted, heuristic)["default"]
    best = target.best[1].params
    assert nearest is not None and all(abs(math.log(nearest.params / best))
                                       <= abs(math.log(c.params / best))
                                       for c in heuristic.candidates_for_budget(3e19))
    files = write_fit_files(fitted, str(tmp_path / "plots"))
    assert all(Path(f).stat().st_size > 0 for f in files)
    assert StudyFits.from_json(json.loads((tmp_path / "plots" / "fit.json").read_text())) \
        == fitted.fits
    assert nearest_candidates(fit_runs(str(table), bootstrap=0), heuristic) == {}
    for options, field in (({"target": -1.0}, "--target"), ({"bootstrap": -1}, "--bootstrap")):
        with pytest.raises(ValueError, match=field):
            fit_runs(str(table), **options)


def test_scaling_candidates_command(tmp_path: Path):
    out = subprocess.run([sys.executable, "-m", "marin.cli", "scaling", "candidates",
                          "--budget", "3e19", "--hardware", "gpu-h200", "--json"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert rows and all(r["hardware"] == "gpu-h200" for r in rows)
    bad = subprocess.run([sys.executable, "-m", "marin.cli", "scaling", "candidates",
                          "--budget", "3e19", "--heuristic", "nope"], capture_output=True,
                         text=True, cwd=ROOT, timeout=120)
    assert bad.returncode == 2
    assert "no marin.scaling_heuristics plugin named 'nope'; available: completed-adamh" \
        in bad.stderr


def _fit(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "marin.cli", "scaling", "fit", *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env={**os.environ})


def test_fit_reports_every_dropped_row_in_text_json_and_fit_json(tmp_path: Path):
    runs = chinchilla_isoflop_runs()
    table = tmp_path / "runs.jsonl"
    rows = [{"params": r.params, "tokens": r.tokens, "flops": r.flops, "loss": r.loss,
             "budget": r.budget} for r in runs]
    rows[0]["loss"] = rows[5]["loss"] = float("nan")
    table.write_text("\n".join(json.dumps(r) for r in rows))
    out = _fit(str(table), "--bootstrap", "0", "--json", "--out", str(tmp_path / "o"))
    assert out.returncode == 0, out.stderr
    printed = StudyFits.from_json(json.loads(out.stdout)["fit"]).fits["default"]
    assert [e.run for e in printed.excluded] == ["row 1", "row 6"]
    assert all("NaN, infinite or not positive" in e.reason for e in printed.excluded)
    written = StudyFits.from_json(json.loads((tmp_path / "o" / "fit.json").read_text()))
    assert written.fits["default"] == printed
    text = _fit(str(table), "--bootstrap", "0")
    assert f"{len(runs)} runs, 2 dropped" in text.stdout


@pytest.mark.parametrize("args, words", [
    (["--target", "0"], "--target must be a positive"),
    (["--target", "nan"], "--target must be a positive"),
    (["--bootstrap", "-1"], "--bootstrap must be 0"),
])
def test_fit_refuses_bad_numbers_in_one_line(tmp_path: Path, args, words):
    table = tmp_path / "runs.csv"
    table.write_text("params,tokens,loss\n1,2,3\n")
    out = _fit(str(table), *args)
    assert out.returncode == 2 and out.stderr.strip().count("\n") == 0, out.stderr
    assert words in out.stderr


def test_fit_names_a_folder_or_a_malformed_line(tmp_path: Path):
    folder = _fit(str(tmp_path))
    assert folder.returncode == 2 and "holds no run: none of outcome.json" in folder.stderr
    assert folder.stderr.strip().count("\n") == 0, folder.stderr
    table = tmp_path / "runs.jsonl"
    table.write_text('{"params": 1, "tokens": 2, "loss": 3}\n{"params": 1,\n')
    bad = _fit(str(table))
    assert bad.returncode == 2 and f"{table}, line 2: not valid JSON" in bad.stderr
    assert bad.stderr.strip().count("\n") == 0, bad.stderr


def test_predict_optimal_spends_the_budget_in_the_runs_own_flop_accounting():
    """Runs whose FLOPs per token grow as k N^e (not 6 N): the optimum lies on C = k N^e D
    and is the minimum of L along it, found here by a bounded scalar search."""
    from scipy.optimize import minimize_scalar

    k, e = 9.0, 0.95
    law = dict(E=1.8, A=480.0, B=2000.0, alpha=0.35, beta=0.37)
    rng = np.random.default_rng(3)
    n = np.geomspace(1e7, 1e9, 30)
    d = n * rng.uniform(5, 50, len(n))
    loss = law["E"] + law["A"] / n ** law["alpha"] + law["B"] / d ** law["beta"]
    fit = fit_parametric_loss(n, d, loss, flops=k * n**e * d)
    assert (fit.flops_coefficient, fit.flops_exponent) == (pytest.approx(k), pytest.approx(e))
    budget = 1e21
    best = fit.predict_optimal(budget)
    assert k * best.params**e * best.tokens == pytest.approx(budget)

    def loss_on_budget(log_n: float) -> float:
        params = math.exp(log_n)
        return float(fit.loss(params, budget / (k * params**e)))

    search = minimize_scalar(loss_on_budget, bounds=(math.log(1e6), math.log(1e12)),
                             method="bounded", options={"xatol": 1e-9})
    assert math.log(best.params) == pytest.approx(search.x, abs=1e-4)
    six_nd = fit_parametric_loss(n, d, loss).predict_optimal(budget)  # no flops: C = 6ND
    assert 6 * six_nd.params * six_nd.tokens == pytest.approx(budget)
    assert abs(math.log(six_nd.params / best.params)) > 0.05  # the accounting matters


def test_a_wide_interval_far_out_is_infinite_not_an_error():
    """A power law with a large exponent error, extrapolated far: the upper bound is
    past the largest float; the interval says so instead of raising OverflowError."""
    from marin.scaling_laws.isoflop_analysis import ScalingFit

    law = ScalingFit(exponent=0.5, coefficient=1.0, exponent_se=20.0, log_coefficient_se=1.0,
                     quantity="params")
    low, high = law.interval(1e21)
    assert high == math.inf
    assert 0 <= low < float(law.predict(1e21))


def test_a_parametric_fit_that_diverges_is_refused_not_an_overflow():
    """Runs where only the smallest model is worse, by a step no power of N follows: the
    fit's A runs past the largest float. ``fit_parametric_loss`` refuses in one line
    (it raised OverflowError, failing a study's fit step on one backtest); the study's
    ``fit_parametric`` gives no law and that reason, so a backtest is left out, not the fit."""
    from marin.scaling_laws.study.fitting import fit_parametric
    from marin.scaling_laws.values import RunRow

    n = np.repeat([1e3, 1.5e3, 2e3], 3)
    d = np.tile([1e6, 2e6, 4e6], 3)
    loss = np.where(n < 1.1e3, 4.0, 3.0) + 0.1 / (d / 1e6) ** 0.3
    with np.errstate(all="ignore"), pytest.raises(ValueError, match="diverged: A = e\\^"):
        fit_parametric_loss(n, d, loss)
    rows = [RunRow(run=f"r{i}", params=float(a), tokens=float(b), flops=6.0 * a * b,
                   loss=float(c)) for i, (a, b, c) in enumerate(zip(n, d, loss, strict=True))]
    law, why = fit_parametric(rows)
    assert law is None and "largest float" in why
