"""What a study says when its runs cannot identify a law: parameters the data leave free
print as "not identified" (never nan), the optimum's size interval is a factor, a label
whose loss does not fall with compute gets no compute multiplier, nor does one asked to
reach a loss below its own irreducible loss, the report's forecasts are the study's own
tiers, and every label keeps one colour, with legends off the data, in every plot.

The fits run on synthetic IsoFLOP curves of a known Chinchilla-form law (fast, exact), and
the plots are drawn by matplotlib and plotly for real and read back from the figures.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace

import matplotlib
import numpy as np
import pytest

from marin.scaling_laws.study.analysis import fit_labels, improves, screen_comparisons
from marin.scaling_laws.study.artifacts import LabelComparison, StudyResult
from marin.scaling_laws.study.report import markdown, study_tiers, tier_losses
from marin.scaling_laws.study.summary import factor_text, label_lines, parameter_text
from marin.scaling_laws.values import Approach3, RunRow

matplotlib.use("Agg")

LAW = {"E": 1.8, "A": 400.0, "B": 2000.0, "alpha": 0.34, "beta": 0.28}
BUDGETS = (1e15, 4e15, 1.6e16)


def _rows(label: str, budgets=BUDGETS, flat: bool = False, noise: float = 0.002,
          seed: int = 0) -> list[RunRow]:
    """Runs on each budget's IsoFLOP curve; ``flat``: a loss that does not fall with compute
    (the same parabola in ln tokens at every budget, plus noise)."""
    rng = np.random.default_rng(seed)
    rows = []
    for c in budgets:
        for i, n in enumerate(np.geomspace(2e4, 2e6, 7) * (c / 1e15) ** 0.5):
            d = c / (6 * n)
            if flat:
                loss = 3.0 + 0.05 * (math.log(d) - math.log(c / 6e5)) ** 2
            else:
                loss = LAW["E"] + LAW["A"] / n ** LAW["alpha"] + LAW["B"] / d ** LAW["beta"]
            rows.append(RunRow(run=f"{label}-{c:g}-{i}", params=float(n), tokens=float(d),
                               flops=c, loss=float(loss * (1 + noise * rng.normal())),
                               budget=c, label=label))
    return rows


def test_a_parameter_the_runs_leave_free_prints_as_not_identified_and_nan_never_prints():
    assert parameter_text("alpha", 0.6857, 0.41) == "alpha=0.6857 (+/- 0.41)"
    assert parameter_text("B", 2.629e4, 4.8e30) == "B=not identified"
    assert parameter_text("A", 163.1, 5.9e5) == "A=not identified"  # 3600x its value
    assert parameter_text("E", 3.0, math.nan) == "E=not identified"
    assert parameter_text("beta", math.nan, 0.1) == "beta=not identified"
    assert parameter_text("E", 3.0, None) == "E=3"
    # the threshold is ten times the value, on either side of it
    assert "not identified" not in parameter_text("A", 10.0, 99.0)
    assert parameter_text("A", 10.0, 101.0) == "A=not identified"

    fits = fit_labels(_rows("plays"), ["plays"], metric="loss", bootstrap=20)
    fit = fits.fits["plays"]
    a3 = replace(fit.approach3, standard_errors={**fit.approach3.standard_errors,
                                                 "B": math.nan, "A": 1e12})
    line = next(x for x in label_lines(replace(fit, approach3=a3), None)
                if x.startswith("Approach 3"))
    assert "A=not identified" in line and "B=not identified" in line
    assert "nan" not in line.lower() and "e+12" not in line


def test_the_optimum_size_interval_is_a_factor_of_its_wider_side():
    assert factor_text(1e4, (5e3, 3e4)) == "\u00d7/\u00f7 3"     # 3x above is wider than 2x below
    assert factor_text(1e4, (2.5e3, 1.5e4)) == "\u00d7/\u00f7 4"
    assert factor_text(1e4, None) == "n/a"
    assert factor_text(1e4, (math.nan, 2e4)) == "n/a"
    assert factor_text(1e4, (0.0, 2e4)) == "n/a"


def test_a_label_whose_loss_does_not_fall_gets_no_compute_multiplier():
    rows = _rows("plays") + _rows("flat", flat=True, seed=1) + _rows("docs", seed=2)
    fits = fit_labels(rows, ["plays", "flat", "docs"], metric="macro_bpb",
                      compare_at=(6.4e16,), bootstrap=40)
    assert improves(fits.fits["plays"]) and improves(fits.fits["docs"])
    assert not improves(fits.fits["flat"])
    assert {c.label for c in fits.comparisons} == {"docs"}
    reasons = [n.reason for n in fits.not_compared]
    assert "flat does not improve on macro_bpb over the budgets swept" in reasons
    result = StudyResult(title="t", metric=fits.metric, labels=fits.labels, fits=fits.fits,
                         comparisons=fits.comparisons, not_compared=fits.not_compared,
                         baseline=fits.baseline)
    report = markdown(result, [])
    assert "compute multiplier of docs against plays" in report
    assert "compute multiplier of flat" not in report
    assert "flat does not improve on macro_bpb over the budgets swept" in report
    # fit.json keeps the verdict: it reads back as written
    from marin.scaling_laws.study.artifacts import StudyFits

    assert StudyFits.from_json(fits.to_json(), where="fit.json").not_compared == \
        fits.not_compared
    # a fit.json of version 3, written before the verdicts, still reads (with none)
    older = {k: v for k, v in fits.to_json().items() if k != "not_compared"}
    assert StudyFits.from_json({**older, "version": 3}, where="fit.json").not_compared == ()


def test_a_stalled_baseline_leaves_every_label_uncompared():
    rows = _rows("flat", flat=True, seed=1) + _rows("plays")
    fits = fit_labels(rows, ["flat", "plays"], metric="loss", compare_at=(6.4e16,),
                      bootstrap=40)
    assert fits.comparisons == ()
    assert [n.label for n in fits.not_compared] == ["flat", "plays"]
    assert "whose loss does not fall with compute" in fits.not_compared[1].reason


def test_a_loss_below_the_labels_irreducible_loss_gets_no_multiplier():
    fits = fit_labels(_rows("plays") + _rows("docs", seed=2), ["plays", "docs"],
                      metric="loss", bootstrap=0)
    a3 = fits.fits["docs"].approach3
    reachable = LabelComparison(baseline="plays", label="docs", target_budget=1e17,
                                loss=a3.E + 0.1, compute_multiplier=1.2, interval=(1.0, 1.4),
                                excludes_one=True, source="approach2")
    beyond = replace(reachable, target_budget=1e21, loss=a3.E - 0.01)
    kept, dropped = screen_comparisons([reachable, beyond], fits.fits, "plays", "loss")
    assert kept == (reachable,)
    assert len(dropped) == 1 and dropped[0].target_budget == 1e21
    assert "below its fitted irreducible loss" in dropped[0].reason


def _result_with_prediction(budget: float) -> StudyResult:
    fits = fit_labels(_rows("plays") + _rows("docs", seed=2), ["plays", "docs"],
                      metric="loss", holdout_budget=budget, bootstrap=20)
    from marin.scaling_laws.run_status import RunStatus
    from marin.scaling_laws.study.artifacts import PredictedCandidate, Prediction

    predictions = {}
    for label, fit in fits.fits.items():
        best = fit.holdout.best[1]
        candidate = PredictedCandidate(hidden_dim=16, num_layers=2, params=best.params,
                                       tokens=best.tokens, flops=budget, batch_size=8,
                                       train_steps=100)
        predictions[label] = Prediction(
            label=label, budget=budget, run_name=f"{label}-held-out", group="g",
            status=RunStatus.OK, optimum=fit.holdout, size_from="approach2",
            candidate=candidate, predicted_loss=3.0, predicted_loss_interval=(2.9, 3.1),
            achieved_loss=3.02, error_percent=-0.66, within_interval=True)
    rows = tuple(_rows("plays") + _rows("docs", seed=2))
    return StudyResult(title="t", metric="loss", labels=fits.labels, fits=fits.fits,
                       predictions=predictions, runs=rows, baseline="plays")


def test_the_reports_forecasts_are_the_studys_held_out_budgets_and_ten_times_past():
    result = _result_with_prediction(6.4e16)
    assert study_tiers(result) == [6.4e16, 6.4e17]
    report = markdown(result, [])
    table = report[report.index("Predicted optimal loss at the study's held-out"):]
    header = table.splitlines()[2]
    assert header == "| label | 6.4e+16 | 6.4e+17 |"
    assert "1e+21" not in report.split("## Epochs")[0].split("## Comparison")[1]
    # the optimum's interval reads as a factor in the summary's prediction line
    assert re.search(r"predicted optimum N = \S+ params \(95% \u00d7/\u00f7 [\d.]+\)", report)


def test_a_loss_law_below_approach_3s_floor_is_flagged():
    result = _result_with_prediction(6.4e16)
    fit = result.fits["plays"]
    a2_far, _, under = tier_losses(fit, 6.4e17)
    assert not under
    raised = replace(fit.approach3, E=a2_far + 0.05)  # a floor above the power law's loss
    fit = replace(fit, approach3=raised)
    assert tier_losses(fit, 6.4e17)[2]
    report = markdown(replace(result, fits={**result.fits, "plays": fit}), [])
    assert "falls below Approach 3's irreducible loss E there (plays at 6.4e+17" in report


def _colors_by_label(ax, labels) -> dict[str, set[str]]:
    """The colours of the artists whose legend entry names each label."""
    from matplotlib.colors import to_hex

    found: dict[str, set[str]] = {label: set() for label in labels}
    handles, names = ax.get_legend_handles_labels()
    for handle, name in zip(handles, names, strict=True):
        label = next((x for x in labels if name.startswith(x)), None)
        if label is None:
            continue
        parts = handle.lines if hasattr(handle, "lines") else [handle]
        for part in parts:
            part = part[0] if isinstance(part, tuple) else part
            if part is None:
                continue
            color = (part.get_color() if hasattr(part, "get_color")
                     else part.get_edgecolor()[0])
            found[label].add(to_hex(color))
    return found


def test_every_label_has_one_colour_in_every_plot_and_legends_sit_off_the_data(tmp_path,
                                                                               monkeypatch):
    import matplotlib.pyplot as plt

    from marin.scaling_laws.study.report_plots import draw_plots

    result = _result_with_prediction(6.4e16)
    figures = []
    monkeypatch.setattr(plt, "close", lambda fig=None: figures.append(fig))
    stems = draw_plots(result, str(tmp_path))
    assert stems == ["isoflops", "scaling", "prediction"]
    colour_of: dict[str, set[str]] = {"plays": set(), "docs": set()}
    for fig in figures:
        fig.canvas.draw()
        for ax in fig.axes:
            for label, colours in _colors_by_label(ax, ["plays", "docs"]).items():
                colour_of[label] |= colours
            legend = ax.get_legend()
            assert legend is not None
            box, area = legend.get_window_extent(), ax.get_window_extent()
            assert box.x0 >= area.x1, "the legend overlaps the axes"
    assert all(len(c) == 1 for c in colour_of.values()), colour_of
    assert colour_of["plays"] != colour_of["docs"]

    # the scaling plot draws each label's held-out optimum with its interval
    scaling = figures[1]
    for ax, quantity in zip(scaling.axes, ("params", "tokens"), strict=True):
        names = ax.get_legend_handles_labels()[1]
        for label in ("plays", "docs"):
            assert f"{label} {quantity} predicted at 6.4e+16 (95%)" in names
        optimum = result.predictions["plays"].optimum.best[1]
        bars = [c for c in ax.collections if c.get_segments()]
        spans = {(round(s[0][1], 3), round(s[1][1], 3)) for c in bars for s in c.get_segments()}
        low, high = (optimum.params_interval if quantity == "params"
                     else optimum.tokens_interval)
        assert (round(low, 3), round(high, 3)) in spans


def test_a_prediction_without_an_interval_still_plots_its_point(tmp_path):
    from marin.scaling_laws.plots import Forecast, write_scaling_overlay

    result = _result_with_prediction(6.4e16)
    fit = result.fits["plays"]
    files = write_scaling_overlay({"plays": (fit.budgets, fit.approach2.params,
                                             fit.approach2.tokens)}, tmp_path / "scaling",
                                  forecasts={"plays": [Forecast(6.4e16, 1e5, 1e7)]})
    assert [f.suffix for f in files] == [".png", ".html"]
    assert "plays params predicted at 6.4e+16" in files[1].read_text()


def test_optima_and_approach3_values_are_what_the_fits_return():
    """The report's tiers use the fits' own numeric methods (no copy of the algebra)."""
    result = _result_with_prediction(6.4e16)
    fit = result.fits["docs"]
    a2, a3, _ = tier_losses(fit, 6.4e17)
    assert a2 == pytest.approx(float(fit.approach2.loss.predict(6.4e17)))
    o = fit.approach3.predict_optimal(6.4e17)
    assert a3 == pytest.approx(float(fit.approach3.loss(o.params, o.tokens)))


def test_a_fit_with_no_optimum_gives_nan_not_a_complex_number():
    bent = Approach3(E=2.0, A=-5.0, B=100.0, alpha=0.3, beta=0.3, objective=0.0)
    optimum = bent.predict_optimal(1e16)
    assert math.isnan(optimum.params) and math.isnan(optimum.tokens)
