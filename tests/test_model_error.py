"""The model error: backtests that read a law's bend, pooled over labels, and prediction
intervals that cover held-out runs of laws that bend, on simulated studies (numpy only, no
training): a law whose log-loss curves in ln C, and one with an irreducible loss that a
power law cannot follow."""

from __future__ import annotations

import math

import numpy as np
import pytest

from marin.scaling_laws.calibration import (
    NoiseEstimate,
    approach2_extrapolations,
    calibrated_interval,
    noise_from_residuals,
)
from marin.scaling_laws.isoflop_analysis import RunRecord
from marin.scaling_laws.model_error import Extrapolation, curvature_factor, model_error_from
from tests.helpers.synthetic_runs import isoflop_runs

BUDGETS = (2.5e10, 5e10, 1e11)  # the main job's ladder, and its held-out budget
HELD_OUT = 2e11
SIGMA = 0.005
PIVOT = 5e10


def bent_law(kappa: float):
    """An optimal loss whose log bends by ``kappa / 2 * (ln C/PIVOT)^2``: a power law for
    kappa = 0."""
    return lambda c: 3.0 * (c / PIVOT) ** -0.08 * math.exp(kappa / 2 * math.log(c / PIVOT) ** 2)


def irreducible_law(floor: float):
    """``E + K C^-0.25``: an irreducible loss, which bends every label's log-log line the
    same way."""
    return lambda c: floor + (3.0 - floor) * (c / PIVOT) ** -0.25


def sweep(law, rng: np.random.Generator | None) -> list[RunRecord]:
    """Each budget's runs on a parabola in ln tokens whose minimum is ``law(budget)``."""
    return isoflop_runs(1.0, rng, SIGMA, budgets=BUDGETS, law=law)


def held_out_prediction(records: list[RunRecord], noise: NoiseEstimate
                        ) -> tuple[float, tuple[float, float]]:
    """Approach 2's loss law at HELD_OUT and its 95% fit interval, computed here with
    numpy's least squares (the reference): each budget's parabola minimum with its
    delta-method variance, a line through their logs."""
    log_minima, variances = [], []
    for budget in BUDGETS:
        runs = [r for r in records if r.budget == budget]
        x = np.log([r.tokens for r in runs])
        x = x - x.mean()
        design = np.vander(x, 3)
        a, b, c = np.linalg.lstsq(design, [r.loss for r in runs], rcond=None)[0]
        minimum = c - b * b / (4 * a)
        grad = np.array([b * b / (4 * a * a), -b / (2 * a), 1.0])
        log_minima.append(math.log(minimum))
        variances.append(noise.std**2 * grad @ np.linalg.inv(design.T @ design) @ grad
                         / minimum**2)
    x = np.log(BUDGETS)
    line = np.polyfit(x, log_minima, 1)
    weights = (1 / 3 + (x - x.mean()) * (math.log(HELD_OUT) - x.mean())
               / np.sum((x - x.mean()) ** 2))
    point = math.exp(np.polyval(line, math.log(HELD_OUT)))
    half = 1.96 * point * math.sqrt(float(np.sum(weights**2 * np.array(variances))))
    return point, (point - half, point + half)


def coverage(make_laws, reps: int, seed: int) -> tuple[float, float, float]:
    """Repeated three-label studies: the fraction of held-out runs inside their interval
    with the model error and without it, and the median half-width (relative)."""
    rng = np.random.default_rng(seed)
    hits = plain = 0
    widths = []
    for _ in range(reps):
        laws = make_laws(rng)
        sweeps = [sweep(law, rng) for law in laws]
        noises = [noise_from_residuals(s) for s in sweeps]
        error = model_error_from([e for i, (s, n) in enumerate(zip(sweeps, noises, strict=True))
                                  for e in approach2_extrapolations(s, f"label{i}", n)])
        assert error.dof == 3
        for law, records, noise in zip(laws, sweeps, noises, strict=True):
            point, fit_interval = held_out_prediction(records, noise)
            achieved = law(HELD_OUT) + rng.normal(0, SIGMA)
            low, high = calibrated_interval(point, fit_interval, noise,
                                            model_std=point * error.std_at(BUDGETS, HELD_OUT),
                                            model_dof=error.dof)
            hits += low <= achieved <= high
            widths.append((high - low) / 2 / point)
            low, high = calibrated_interval(point, fit_interval, noise)
            plain += low <= achieved <= high
    runs = 3 * reps
    return hits / runs, plain / runs, float(np.median(widths))


@pytest.mark.parametrize("fitted, target", [((1.0, 2.0), 4.0), ((1e17, 1e18, 1e19), 1e21),
                                            ((2.5e10, 5e10, 1e11), 2e11), ((2.0, 4.0), 1.0),
                                            ((1.0, 3.0, 4.0, 9.0), 2.0)])
def test_curvature_factor_is_a_least_squares_lines_miss_of_a_parabola(fitted, target):
    x, at = np.log(fitted), math.log(target)
    expected = np.polyval(np.polyfit(x, x**2 / 2, 1), at) - at**2 / 2
    assert curvature_factor(fitted, target) == pytest.approx(expected, rel=1e-9, abs=1e-12)


def test_approach2_backtests_read_a_known_bend():
    noise = NoiseEstimate(SIGMA, "replicates", 8)
    for kappa in (0.03, -0.02):
        found = approach2_extrapolations(sweep(bent_law(kappa), None), "a", noise)
        assert [(e.budget, e.fitted_budgets) for e in found] == [
            (BUDGETS[0], BUDGETS[1:]), (BUDGETS[-1], BUDGETS[:-1])]
        for e in found:
            assert e.log_error == pytest.approx(kappa * e.curvature_factor, rel=1e-6)
            assert e.runs == 7 and e.noise_std > 0


def test_pooled_curvature_is_the_labels_rms_less_the_noise():
    kappas = (0.01, -0.02, 0.03)
    found = [e for i, k in enumerate(kappas) for e in approach2_extrapolations(
        sweep(bent_law(k), None), f"l{i}", NoiseEstimate(SIGMA, "replicates", 8))]
    error = model_error_from(found)
    assert (error.dof, error.labels, error.extrapolations) == (3, ("l0", "l1", "l2"), 6)
    assert error.raw_curvature == pytest.approx(math.sqrt(np.mean(np.square(kappas))), rel=1e-6)
    noise = np.mean([(found[2 * i].noise_std / abs(found[2 * i].curvature_factor)) ** 2
                     for i in range(3)])
    assert error.curvature == pytest.approx(math.sqrt(error.raw_curvature**2 - noise))
    quiet = model_error_from([Extrapolation("a", 1e11, (1e10, 3e10), "approach2", 5, 3.0, 3.0,
                                            0.001, 0.01, -1.2)])
    assert quiet.curvature == 0.0 and quiet.dof == 1  # within the noise: no bend is added
    assert error.std_at(BUDGETS, HELD_OUT) == pytest.approx(
        error.curvature * 5 / 3 * math.log(2) ** 2)


def test_the_interval_adds_the_model_error_with_its_own_quantile():
    noise = NoiseEstimate(std=0.01, source="residuals", dof=8)
    t8, t3 = 2.306004135033371, 3.182446305284263  # Student's t, 97.5th percentile (tables)
    low, high = calibrated_interval(2.0, (1.97, 2.01), noise, model_std=0.02, model_dof=3)
    assert low == pytest.approx(2.0 - math.sqrt(0.03**2 + (t8 * 0.01) ** 2 + (t3 * 0.02) ** 2))
    assert high == pytest.approx(2.0 + math.sqrt(0.01**2 + (t8 * 0.01) ** 2 + (t3 * 0.02) ** 2))
    assert calibrated_interval(2.0, (1.97, 2.01), noise, model_std=0.0) == \
        calibrated_interval(2.0, (1.97, 2.01), noise)


@pytest.mark.parametrize("case, make_laws, low, high", [
    # each label bends by its own curvature, large against the noise (a held-out label's
    # own bend is part of the pooled estimate, so the t quantile errs wide here: 99%)
    ("large bends", lambda rng: [bent_law(k) for k in rng.normal(0, 0.02, 3)], 0.95, 1.0),
    # bends about as large as the noise's share of the backtests
    ("small bends", lambda rng: [bent_law(k) for k in rng.normal(0, 0.005, 3)], 0.91, 0.99),
    # a power law fitted to E + K C^-0.25: every label bends the same way
    ("irreducible", lambda rng: [irreducible_law(f) for f in rng.uniform(1.8, 2.4, 3)],
     0.95, 1.0),
    # power laws: the model error should add little
    ("well specified", lambda rng: [bent_law(0.0)] * 3, 0.93, 0.985),
])
def test_intervals_with_the_model_error_cover_held_out_runs(case, make_laws, low, high):
    with_model, without, width = coverage(make_laws, reps=300, seed=11)
    assert low <= with_model <= high, (case, with_model, without, width)
    if case in ("large bends", "irreducible"):
        assert without < 0.5  # the fit's spread and the noise alone miss the bend
        assert width < 0.06
    elif case == "well specified":
        assert width < 0.01  # about the noise's: the term adds little where nothing bends


def test_approach3_backtests_read_a_bend_as_a_line_would():
    """L(N, D) cannot follow a bend in ln C either: on a law with a known curvature, its
    backtests and its extrapolation to the held-out budget miss by about kappa * g."""
    from dataclasses import replace

    from marin.scaling_laws.study.artifacts import RunRow
    from marin.scaling_laws.study.extrapolation import extrapolations_of
    from marin.scaling_laws.study.fitting import fit_label

    kappa = 0.03

    def loss(n: float, d: float) -> float:
        c = 6 * n * d
        return (2.5 + 300 / n**0.7 + 2000 / d**0.7) * math.exp(
            kappa / 2 * math.log(c / PIVOT) ** 2)

    rows = []
    for budget in BUDGETS:
        for n in math.sqrt(budget / 120) * np.geomspace(0.3, 3, 6):
            d = budget / (6 * n)
            rows.append(RunRow(run=f"r{len(rows)}", budget=budget, params=n, tokens=d,
                               flops=budget, loss=loss(n, d)))
    fit = replace(fit_label(rows, bootstrap=0), noise=NoiseEstimate(SIGMA, "replicates", 8))
    found, why = extrapolations_of(fit, rows)
    assert why is None and [e.predictor for e in found] == ["approach3", "approach3"]
    for e in found:
        assert 0.8 < e.log_error / (kappa * e.curvature_factor) < 1.2
    n = math.sqrt(HELD_OUT / 120)
    d = HELD_OUT / (6 * n)
    missed = math.log(float(fit.approach3.loss(n, d)) / loss(n, d))
    assert 0.8 < missed / (kappa * curvature_factor(BUDGETS, HELD_OUT)) < 1.2


def test_the_fit_pools_every_labels_backtests_into_its_prediction_intervals():
    """``fit_labels`` (the study's fit step and ``marin scaling fit``): each label's
    backtests of its Approach 3 law, one ``ModelError`` over the three labels, and the
    held-out interval made of the fit's spread, the noise and that error."""
    from marin.scaling_laws.study.analysis import fit_labels, prediction_interval
    from marin.scaling_laws.study.artifacts import RunRow
    from marin.scaling_laws.study.fitting import predicted_loss

    rng = np.random.default_rng(5)
    rows = [RunRow(run=f"{label}-{i}", label=label, budget=r.budget, params=r.params,
                   tokens=r.tokens, flops=r.flops, loss=r.loss)
            for label, kappa in (("a", 0.02), ("b", -0.01), ("c", 0.0))
            for i, r in enumerate(sweep(bent_law(kappa), rng))]
    fits = fit_labels(rows, ["a", "b", "c"], metric="loss", holdout_budget=HELD_OUT,
                      bootstrap=0)
    found = [e for label in "abc" for e in fits.fits[label].extrapolations]
    assert [(e.label, e.predictor, e.budget) for e in found] == [
        (label, "approach3", b) for label in "abc" for b in (BUDGETS[0], BUDGETS[-1])]
    assert fits.model_error == model_error_from(found) and fits.model_error.dof == 3
    fit = fits.fits["a"]
    optimum = fit.holdout.approach3
    loss, fit_interval, source = predicted_loss(fit, HELD_OUT, optimum.params, optimum.tokens)
    interval, parts = prediction_interval(fits, "a", loss, fit_interval, HELD_OUT, source)
    assert parts.terms == ("fit", "noise", "model error") and parts.noise == fit.noise
    assert parts.model_std == pytest.approx(loss * fits.model_error.std_at(BUDGETS, HELD_OUT))
    assert interval == calibrated_interval(loss, fit_interval, fit.noise,
                                           model_std=parts.model_std, model_dof=3)
