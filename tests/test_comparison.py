"""Compute multipliers between labels, on runs drawn from known laws: label "b" is label "a"
with its compute scaled by a known factor k, so the true multiplier is k at every loss."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest
from scipy.optimize import minimize_scalar

from marin.scaling_laws.comparison import ComputeMultiplier, compare_labels, loss_law
from marin.scaling_laws.isoflop_analysis import (
    RunRecord,
    fit_budget,
    fit_parabolas,
    parabola_minimum,
)
from tests.helpers.synthetic_runs import BUDGETS, GAMMA, K, isoflop_runs

E, A, B, ALPHA, BETA = 1.7, 400.0, 1100.0, 0.34, 0.28


def parametric_runs(factor: float, rng: np.random.Generator | None, sigma: float = 0.0,
                    isoflop: bool = False) -> list[RunRecord]:
    """Runs of ``E + A/N^alpha + B/(D/factor)^beta`` (data worth 1/factor: compute scaled by
    the factor along the compute-optimal curve), C = 6 N D. Not on IsoFLOPs (every run its
    own budget, so Approach 2 has no parabola) unless ``isoflop``."""
    if isoflop:
        shapes = [(n, budget / (6 * n)) for budget in BUDGETS
                  for n in math.sqrt(budget / 120) * np.geomspace(0.25, 4, 7)]
    else:
        shapes = [(n, tpp * n) for n in np.geomspace(1e6, 3e8, 8) for tpp in (5, 20, 80)]
    out = []
    for n, d in shapes:
        loss = E + A / n**ALPHA + B * (factor / d) ** BETA
        loss += rng.normal(0, sigma) if rng is not None else 0.0
        out.append(RunRecord(params=n, tokens=d, flops=6 * n * d, loss=loss,
                             budget=6 * n * d if isoflop else None))
    return out


def optimal_loss(budget: float) -> float:
    """Label "a"'s compute-optimal loss at ``budget``, by a 1-D search over N."""
    found = minimize_scalar(lambda log_n: E + A * np.exp(-ALPHA * log_n)
                            + B * (6 * np.exp(log_n) / budget) ** BETA,
                            bounds=(0, 60), method="bounded", options={"xatol": 1e-10})
    return float(found.fun)


def test_the_inversion_is_exact_on_noiseless_runs():
    k = 3.0
    records = {"a": isoflop_runs(1.0, None), "b": isoflop_runs(k, None),
               "c": isoflop_runs(1 / 2, None)}
    rows = compare_labels(records, "a", [1e20, 1e22], bootstrap=0)
    assert [(r.label, r.target_budget) for r in rows] == [
        ("b", 1e20), ("b", 1e22), ("c", 1e20), ("c", 1e22)]
    for row, truth in zip(rows, [k, k, 0.5, 0.5], strict=True):
        assert row.multiplier == pytest.approx(truth, rel=1e-9)
        assert row.loss == pytest.approx(K * row.target_budget**-GAMMA, rel=1e-12)
        assert row.source == "approach2" and row.reason == ""
        assert row.resamples == 0 and all(math.isnan(v) for v in row.interval)
        assert not row.excludes_one
    reverse = compare_labels(records, "b", [1e21], bootstrap=0)
    assert reverse[0].multiplier == pytest.approx(1 / k, rel=1e-9)


@pytest.mark.parametrize("k", [1.0, 3.0])
def test_the_joint_bootstrap_interval_covers_the_true_multiplier(k):
    estimates, covered, excluded = [], 0, 0
    for rep in range(100):
        rng = np.random.default_rng(rep)
        records = {"a": isoflop_runs(1.0, rng), "b": isoflop_runs(k, rng)}
        (row,) = compare_labels(records, "a", [1e21], bootstrap=400, seed=rep)
        estimates.append(row.multiplier)
        covered += row.interval[0] <= k <= row.interval[1]
        excluded += row.excludes_one
        assert row.resamples > 350
    assert covered >= 90
    assert np.median(estimates) == pytest.approx(k, rel=0.03)
    if k == 1.0:
        assert excluded <= 10  # the interval excludes 1 when it misses it
    else:
        assert excluded == 100  # a threefold difference is plain at this noise


def test_a_label_keeps_its_resamples_when_another_label_is_added():
    rng = np.random.default_rng(5)
    records = {"a": isoflop_runs(1.0, rng), "b": isoflop_runs(2.0, rng)}
    (alone,) = compare_labels(records, "a", [1e21], bootstrap=200, seed=3)
    more = compare_labels({**records, "c": isoflop_runs(4.0, rng)}, "a", [1e21],
                          bootstrap=200, seed=3)
    assert more[0] == alone
    other_seed = compare_labels(records, "a", [1e21], bootstrap=200, seed=4)[0]
    assert other_seed.interval != alone.interval


def test_without_parabolas_it_falls_back_to_approach3_and_says_why():
    k = 2.5
    records = {"a": parametric_runs(1.0, None), "b": parametric_runs(k, None)}
    rows = compare_labels(records, "a", [1e20, 1e22], bootstrap=0)
    for row in rows:
        assert row.source == "approach3"
        assert "Approach 2 failed for 'a'" in row.reason and "parabola" in row.reason
        assert row.multiplier == pytest.approx(k, rel=1e-4)
        assert row.loss == pytest.approx(optimal_loss(row.target_budget), rel=1e-4)
    rng = np.random.default_rng(0)
    noisy = {"a": parametric_runs(1.0, rng, 0.003), "b": parametric_runs(k, rng, 0.003)}
    (row,) = compare_labels(noisy, "a", [1e20], bootstrap=100)
    assert row.interval[0] <= k <= row.interval[1] and row.excludes_one
    assert row.resamples == 100


def test_approach3_on_request_recovers_k_where_the_power_law_drifts():
    """With an irreducible loss the pure power law bends the multiplier towards 1 far out;
    Approach 3's curve is the true shape here."""
    k = 2.5
    records = {"a": parametric_runs(1.0, None, isoflop=True),
               "b": parametric_runs(k, None, isoflop=True)}
    (power_law,) = compare_labels(records, "a", [1e22], bootstrap=0)
    (curve,) = compare_labels(records, "a", [1e22], bootstrap=0, approach="approach3")
    assert curve.source == "approach3" and curve.reason == ""
    assert curve.multiplier == pytest.approx(k, rel=1e-3)
    assert abs(power_law.multiplier - k) > 0.2


def _minimum_tolerance(optimum) -> float:
    """How close ``fit_budget``'s minimum loss is to the exact Huber fit's: it stops where
    scipy's least_squares does (its default xtol=1e-8, each coefficient good to about that
    relative error), and ``c - b^2/4a`` cancels, so the minimum is good to xtol times its
    condition number for relative errors in (a, b, c)."""
    a, b, c = optimum.coefficients
    return 1e-8 * (b * b / (4 * a) + b * b / (2 * a) + abs(c)) / optimum.optimal_loss


def test_the_vectorised_parabolas_are_fit_budgets_huber_fits():
    rng = np.random.default_rng(2)
    runs = isoflop_runs(1.0, rng, sigma=0.01, budgets=(1e19,), per_budget=9)
    runs[3] = replace(runs[3], loss=runs[3].loss + 0.2)  # the Huber loss must shrug it off
    x, y = np.log([r.tokens for r in runs]), np.array([r.loss for r in runs])
    reference = fit_budget(1e19, runs)
    coef = fit_parabolas(x, y)
    assert coef[0] == pytest.approx(reference.coefficients, rel=1e-6)
    assert parabola_minimum(coef)[0] == pytest.approx(reference.optimal_loss,
                                                      rel=_minimum_tolerance(reference))

    def huber(c):  # scipy's loss="huber" with f_scale=0.01, up to a constant factor
        r = np.abs(y - np.polyval(c, x))
        return np.sum(np.where(r <= 0.01, r * r, 0.02 * r - 0.01**2))

    assert huber(coef[0]) <= huber(np.array(reference.coefficients)) * (1 + 1e-12)
    plain = fit_parabolas(x, y, huber_delta=None)[0]
    assert plain == pytest.approx(np.polyfit(x, y, 2), rel=1e-9)
    # a weighting is the same fit as the runs repeated by their weights
    w = np.array([[2, 1, 0, 1, 3, 1, 0, 1, 2], [0, 0, 5, 0, 0, 0, 4, 0, 0]])
    rows = fit_parabolas(x, y, w)
    repeated = [r for r, n in zip(runs, w[0], strict=True) for _ in range(n)]
    weighted = fit_budget(1e19, repeated)
    assert parabola_minimum(rows)[0] == pytest.approx(weighted.optimal_loss,
                                                      rel=_minimum_tolerance(weighted))
    assert np.isnan(rows[1]).all()  # two distinct sizes: no parabola


def test_loss_law_refits_resamples_as_one_array():
    rng = np.random.default_rng(1)
    law = loss_law(isoflop_runs(1.0, rng), bootstrap=300, seed=0)
    assert law.gamma.shape == (301,)
    assert -law.gamma[0] == pytest.approx(-GAMMA, abs=0.01)
    assert np.nanstd(law.gamma) > 0


@pytest.mark.parametrize("call, words", [
    (lambda r: compare_labels(r, "z", [1e20]), ["baseline='z'", "'a'", "pass one of them"]),
    (lambda r: compare_labels(r, "a", [0.0]), ["targets=", "positive"]),
    (lambda r: compare_labels(r, "a", [-1e20]), ["targets=", "positive"]),
    (lambda r: compare_labels(r, "a", []), ["targets=", "positive"]),
    (lambda r: compare_labels(r, "a", [1e20], bootstrap=-1), ["bootstrap=-1"]),
    (lambda r: compare_labels(r, "a", [1e20], level=95), ["level=95", "0.95"]),
    (lambda r: compare_labels(r, "a", [1e20], approach="chinchilla"), ["approach="]),
    (lambda r: compare_labels({"a": r["a"]}, "a", [1e20]), ["records", "2 or more labels"]),
    (lambda r: compare_labels({**r, "thin": r["a"][:4]}, "a", [1e20], bootstrap=0),
     ["records['thin']", "add runs for this label"]),
])
def test_bad_input_gets_one_line_naming_the_argument(call, words):
    records = {"a": isoflop_runs(1.0, None), "b": isoflop_runs(2.0, None)}
    with pytest.raises(ValueError) as info:
        call(records)
    message = str(info.value)
    assert "\n" not in message
    for word in words:
        assert word in message


def test_results_round_trip_through_json_with_infinities():
    rng = np.random.default_rng(0)
    records = {"a": isoflop_runs(1.0, rng), "b": isoflop_runs(2.0, rng)}
    row = compare_labels(records, "a", [1e21], bootstrap=50)[0]
    never = ComputeMultiplier("a", "b", 1e21, 1.2, math.inf, (3.0, math.inf), True,
                              "approach3", reason="Approach 2 failed for 'b': ...")
    empty = ComputeMultiplier("a", "b", 1e21, 1.2, 2.0, (math.nan, math.nan), False,
                              "approach2")
    for original in (row, never, empty):
        text = json.dumps(original.to_json(), allow_nan=False)  # strict JSON
        back = ComputeMultiplier.from_json(json.loads(text))
        assert back.to_json() == original.to_json()
    assert ComputeMultiplier.from_json(json.loads(json.dumps(row.to_json()))) == row
    with pytest.raises(ValueError, match="format_version 99"):
        ComputeMultiplier.from_json({**row.to_json(), "format_version": 99})
    truncated = row.to_json()
    del truncated["interval"], truncated["source"]
    with pytest.raises(ValueError, match=r"missing field\(s\) interval, source"):
        ComputeMultiplier.from_json(truncated)
