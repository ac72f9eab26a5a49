"""Run-to-run noise and calibrated intervals, on simulated studies with a known noise; the
model error's one-line refusals and JSON (its statistics: ``test_model_error.py``)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

from marin.scaling_laws.calibration import (
    BacktestResult,
    NoiseEstimate,
    approach2_extrapolations,
    backtest,
    calibrated_interval,
    coverage,
    noise_from_replicates,
    noise_from_residuals,
    why_no_backtest,
)
from marin.scaling_laws.model_error import (
    Extrapolation,
    ModelError,
    curvature_factor,
    model_error_from,
)
from tests.helpers.synthetic_runs import BUDGETS, GAMMA, K, isoflop_runs

SIGMA = 0.005


def test_replicates_recover_the_known_std_within_chi_square():
    rng = np.random.default_rng(0)
    sizes = [2, 3, 1, 4]  # a group of one has no spread: 1 + 2 + 0 + 3 degrees of freedom
    ratios = []
    for _ in range(400):
        groups = [rng.normal(3.0 + i, SIGMA, n) for i, n in enumerate(sizes)]
        noise = noise_from_replicates(groups)
        assert noise.source == "replicates" and noise.dof == 6
        ratios.append(noise.std**2 / SIGMA**2)
    # dof * s^2 / sigma^2 is chi-square(6): its mean is 6, its variance 12
    assert np.mean(ratios) == pytest.approx(1.0, abs=4 * math.sqrt(2 / 6 / 400))
    inside = np.mean([stats.chi2.ppf(0.025, 6) <= 6 * r <= stats.chi2.ppf(0.975, 6)
                      for r in ratios])
    assert inside == pytest.approx(0.95, abs=0.035)


def test_residuals_recover_the_known_std_with_the_parabolas_dof():
    rng = np.random.default_rng(1)
    ratios = []
    for _ in range(300):
        runs = isoflop_runs(1.0, rng, SIGMA, per_budget=7)
        runs += isoflop_runs(1.0, rng, SIGMA, budgets=(1e21,), per_budget=3)  # no residuals
        noise = noise_from_residuals(runs)
        assert noise.source == "residuals" and noise.dof == 4 * (7 - 3)
        ratios.append(noise.std**2 / SIGMA**2)
    # with n - 1 instead of n - 3 per budget the mean would be 4/6 of the truth
    assert np.mean(ratios) == pytest.approx(1.0, abs=4 * math.sqrt(2 / 16 / 300))


@pytest.mark.parametrize("fit_sd, dof", [(0.0005, 3), (0.004, 3), (0.004, 12)])
def test_calibrated_intervals_cover_one_new_run_at_the_nominal_level(fit_sd, dof):
    """Repeated studies: the fit's estimate is off by N(0, fit_sd), its 95% interval says
    so; the noise is estimated from `dof` replicate pairs; one new run lands off by SIGMA."""
    rng = np.random.default_rng(7)
    truth, hits, fit_only, plain_z = 3.0, 0, 0, 0
    reps = 3000
    for _ in range(reps):
        point = truth + rng.normal(0, fit_sd)
        fit_interval = (point - 1.96 * fit_sd, point + 1.96 * fit_sd)
        noise = noise_from_replicates([truth + rng.normal(0, SIGMA, 2) for _ in range(dof)])
        achieved = truth + rng.normal(0, SIGMA)
        low, high = calibrated_interval(point, fit_interval, noise)
        hits += low <= achieved <= high
        fit_only += fit_interval[0] <= achieved <= fit_interval[1]
        plain_z += abs(achieved - point) <= 1.96 * math.hypot(fit_sd, noise.std)
    assert 0.945 <= hits / reps <= 0.98
    assert fit_only / reps < 0.85  # the fit's own interval misses the run's noise
    if dof == 3 and fit_sd < SIGMA:
        assert plain_z / reps < 0.93  # a normal quantile ignores that the noise is estimated


def test_calibrated_interval_adds_the_noise_to_each_side():
    noise = NoiseEstimate(std=0.01, source="replicates", dof=3)
    t = 3.182446305284263  # Student's t, 97.5th percentile, 3 dof (tables)
    assert calibrated_interval(2.0, None, noise) == pytest.approx((2.0 - t * 0.01,
                                                                   2.0 + t * 0.01))
    low, high = calibrated_interval(2.0, (1.97, 2.01), noise)
    assert low == pytest.approx(2.0 - math.hypot(0.03, t * 0.01))
    assert high == pytest.approx(2.0 + math.hypot(0.01, t * 0.01))
    assert calibrated_interval(2.0, (1.9, math.inf), noise)[1] == math.inf
    exact = NoiseEstimate(std=0.0, source="replicates", dof=4)
    assert calibrated_interval(2.0, (1.99, 2.02), exact) == pytest.approx((1.99, 2.02))


def test_backtests_cover_the_largest_budget_at_the_nominal_level():
    rng = np.random.default_rng(3)
    results, errors = [], []
    for rep in range(300):
        runs = isoflop_runs(1.0, rng, SIGMA)
        result = backtest(runs, f"study{rep % 3}", noise_from_residuals(runs))
        assert result is not None and result.budget == BUDGETS[-1]
        results.append(result)
        errors.append(result.error_percent)
    by_label = coverage(results)
    assert sorted(by_label) == ["study0", "study1", "study2"]
    overall = np.mean([r.within_interval for r in results])
    assert 0.92 <= overall <= 0.98
    assert abs(np.mean(errors)) < 3 * np.std(errors) / math.sqrt(len(errors))
    truth = K * BUDGETS[-1] ** -GAMMA
    predicted = np.array([r.predicted_loss for r in results])
    assert np.mean(predicted) == pytest.approx(truth, rel=1e-3)


def test_backtest_is_none_with_a_reason_when_it_cannot_be_made():
    two_budgets = isoflop_runs(1.0, None, budgets=BUDGETS[:2])
    assert backtest(two_budgets, "a", NoiseEstimate(0.01, "residuals", 4)) is None
    assert "1 smaller budget(s)" in why_no_backtest(two_budgets)
    thin_top = isoflop_runs(1.0, None) + isoflop_runs(1.0, None, budgets=(1e22,),
                                                       per_budget=2)
    assert backtest(thin_top, "a", NoiseEstimate(0.01, "residuals", 4)) is None
    assert "largest budget, 1e+22" in why_no_backtest(thin_top)
    assert why_no_backtest([]) is not None and backtest([], "a", NoiseEstimate(
        0.01, "residuals", 4)) is None
    assert why_no_backtest(isoflop_runs(1.0, None)) is None


@pytest.mark.parametrize("call, words", [
    (lambda: noise_from_replicates([[3.0], [2.9]]), ["groups", "2 or more runs"]),
    (lambda: noise_from_replicates([[3.0, math.nan]]), ["groups", "NaN"]),
    (lambda: noise_from_residuals(isoflop_runs(1.0, None, per_budget=3)),
     ["records", "more than 3 runs"]),
    (lambda: calibrated_interval(3.0, (3.1, 3.0), NoiseEstimate(0.01, "replicates", 2)),
     ["fit_interval=", "low <= high"]),
    (lambda: calibrated_interval(3.0, None, NoiseEstimate(0.01, "replicates", 0)),
     ["noise=", "dof >= 1"]),
    (lambda: calibrated_interval(math.nan, None, NoiseEstimate(0.01, "replicates", 2)),
     ["point="]),
    (lambda: calibrated_interval(3.0, None, NoiseEstimate(0.01, "replicates", 2), level=1.5),
     ["level=1.5"]),
    (lambda: calibrated_interval(2.0, None, NoiseEstimate(0.01, "replicates", 3),
                                 model_std=-0.1, model_dof=3), ["model_std=-0.1", "dof >= 1"]),
    (lambda: calibrated_interval(2.0, None, NoiseEstimate(0.01, "replicates", 3),
                                 model_std=0.1), ["model_dof=None"]),
    (lambda: curvature_factor([1e10], 1e11), ["fitted_budgets=", "2 or more distinct"]),
    (lambda: curvature_factor([1e10, 2e10], 0.0), ["budget=0.0"]),
    (lambda: model_error_from([]), ["extrapolations", "3 or more budgets"]),
    (lambda: model_error_from([Extrapolation("a", 1e11, (1e10, 3e10), "approach2", 5, 3.0,
                                             math.nan, math.nan, 0.01, -1.2)]),
     ["extrapolations", "non-finite"]),
])
def test_bad_input_gets_one_line_naming_the_argument(call, words):
    with pytest.raises(ValueError) as info:
        call()
    assert "\n" not in str(info.value)
    for word in words:
        assert word in str(info.value)


def test_results_round_trip_through_json():
    noise = noise_from_replicates([[3.0, 3.01], [2.5, 2.52, 2.49]])
    runs = isoflop_runs(1.0, np.random.default_rng(0))
    result = backtest(runs, "plays", noise)
    extrapolation = approach2_extrapolations(runs, "plays", noise)[0]
    error = model_error_from([extrapolation])
    for original, cls in ((noise, NoiseEstimate), (result, BacktestResult),
                          (extrapolation, Extrapolation), (error, ModelError)):
        data = json.loads(json.dumps(original.to_json(), allow_nan=False))
        assert data["format_version"] == cls.FORMAT
        assert cls.from_json(data) == original
        with pytest.raises(ValueError, match="format_version None"):
            cls.from_json({k: v for k, v in data.items() if k != "format_version"})


def test_a_truncated_result_names_its_missing_fields():
    data = NoiseEstimate(0.01, "replicates", 3).to_json()
    del data["dof"]
    with pytest.raises(ValueError, match=r"missing field\(s\) dof"):
        NoiseEstimate.from_json(data)
