"""A reduced comparative study run for real: three labels (two corpora and a mixture of
both), every run scoring both validation sets; then ``load_study``, the report, ``marin
scaling fit`` and the dashboard's study page read the same runs and agree.

The study is the README's main job, reduced (``tests/helpers/readme_study.py``), which the
session runs once for these tests and the README's (``readme_study`` in conftest.py)."""

from __future__ import annotations

import contextlib
import json
import math
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from experiments import isoflop_tiny
from marin.execution import Executor
from marin.scaling_laws.codec import encode
from marin.scaling_laws.study import (
    load_study,
    run_candidate,
    study_outputs,
)
from marin.scaling_laws.study.artifacts import StudyFits
from marin.scaling_laws.study.summary import comparison_line, law_text
from tests.conftest import ROOT
from tests.helpers.readme_study import BUDGETS, HEURISTIC, reduced_study

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def comparative(readme_study):
    """The reduced main job's graph, its prefix, and the executor's result of running it
    again here, which skips every step (its corpora are named relative to its folder)."""
    root, _ = readme_study
    with contextlib.chdir(root):
        steps = reduced_study()
        prefix = str(root / "local_store")
        result = Executor(prefix).run(steps)
    assert result.ok and all(e.action == "skip" for e in result.plan.entries), \
        result.summary()
    return steps, prefix, result


def test_every_label_is_fitted_predicted_and_compared(comparative):
    steps, prefix, result = comparative
    study = load_study(result)
    assert study.labels == ("plays", "docs", "mix") and study.metric == "macro_bpb"
    # the same result whichever way it is found (as JSON: NaN figures compare equal there)
    assert load_study(steps, prefix).to_json() == study.to_json() == \
        load_study(f"{prefix}/{isoflop_tiny.NAME}").to_json()
    for label in study.labels:
        fit = study.fits[label]
        assert sorted([b.budget for b in fit.budgets] +
                      [b.budget for b in fit.budgets_not_fitted]) == list(BUDGETS), label
        assert all(b.reason for b in fit.budgets_not_fitted)
        assert fit.approach3 is not None
        assert fit.used == sum(len(list(HEURISTIC.candidates_for_budget(b))) for b in BUDGETS)
        prediction = study.predictions[label]
        assert prediction.status == "ok" and prediction.achieved_loss is not None, label
        assert prediction.candidate is not None
    # each run scored both sets; its metric is their mean bits per byte
    for node in Executor(prefix).plan(steps).graph.nodes:
        if node.step.fn is run_candidate:
            stored = json.loads((Path(node.output_path) / "summary.json").read_text())
            sets = [stored["eval/plays/bpb"], stored["eval/docs/bpb"]]
            assert stored["eval/macro_bpb"] == pytest.approx(sum(sets) / 2, rel=1e-9)
            row = next(r for r in study.runs if r.run == node.step.config.run_name)
            assert row.loss == pytest.approx(stored["eval/macro_bpb"], rel=1e-12)
    # the mixture drew from both corpora by weight; epochs say how often each was seen
    mix_runs = [n for n in Executor(prefix).plan(steps).graph.nodes
                if n.step.fn is run_candidate and n.step.config.label == "mix"]
    drawn = json.loads((Path(mix_runs[0].output_path) / "summary.json").read_text())[
        "tokens_by_component"]
    assert set(drawn) == {"plays", "docs"} and min(drawn.values()) > 0
    epochs = {e.budget: e.by_corpus for e in study.fits["mix"].epochs}
    assert set(epochs) == set(BUDGETS) and set(epochs[BUDGETS[0]]) == {"plays", "docs"}
    # the baseline is the first label: the others compared with it at the next two tiers
    assert study.baseline == "plays"
    tiers = [p.budget for p in study.fits["plays"].predictions[:2]]
    # a label whose loss does not fall with compute (its loss exponent's 95% interval
    # reaches 0, read here from the fit) is not compared, and says so
    # (without Approach 2 there is no such exponent, and Approach 3's form falls)
    stalled = {label for label in ("docs", "mix")
               if (a2 := study.fits[label].approach2) is not None
               and a2.loss.exponent + 1.96 * a2.loss.exponent_se >= 0}
    assert {n.label for n in study.not_compared} == stalled
    assert all("does not improve on macro_bpb" in n.reason for n in study.not_compared)
    assert {(c.label, c.target_budget) for c in study.comparisons} == {
        (label, tier) for label in ("docs", "mix") if label not in stalled for tier in tiers}
    assert study.comparisons, "no label was compared"
    for c in study.comparisons:
        assert c.baseline == "plays" and c.compute_multiplier > 0
        low, high = c.interval
        assert low <= c.compute_multiplier <= high or math.isnan(low)
        # an interval the bootstrap could not give (NaN) excludes nothing
        assert c.excludes_one == (not math.isnan(low) and not (low <= 1 <= high))
    # (the reduced study's bootstrap may find no resample with a minimum for a label; the
    # bootstrap's own intervals are checked in tests/test_comparison.py)


def test_the_report_and_marin_scaling_fit_agree_with_load_study(comparative, tmp_path):
    _, _, result = comparative
    study = load_study(result)
    out = study_outputs(result.plan.graph)
    report = (Path(out.report) / "report.md").read_text()
    for label in study.labels:
        fit = study.fits[label]
        assert f"## Label {label}" in report
        if fit.approach2 is not None:
            assert law_text(fit.approach2.params, "N_opt") in report
        assert f"{fit.approach3.alpha:.3f}" in report
    for c in study.comparisons:
        assert comparison_line(c) in report
    assert "## Epochs per budget" in report

    tier = study.comparisons[0].target_budget
    cli = subprocess.run([sys.executable, "-m", "marin.cli", "scaling", "fit",
                          f"{out.fit}/runs.csv", "--bootstrap", "20", "--target", str(tier),
                          "--json", "--out", str(tmp_path / "cli")],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert cli.returncode == 0, cli.stderr
    fits = StudyFits.from_json(json.loads(cli.stdout)["fit"])
    assert fits.labels == study.labels
    for label in study.labels:
        ours, theirs = study.fits[label], fits.fits[label]
        # the same pipeline on the same rows: the same fit, but for the targets and the
        # epochs (a table has no corpora) and the metric's name (the table's column)
        assert replace(theirs, predictions=(), holdout=None, metric=ours.metric).to_json() == \
            replace(ours, predictions=(), holdout=None, epochs=()).to_json()
        [at_tier] = theirs.predictions
        assert encode(at_tier) == encode(next(p for p in ours.predictions if p.budget == tier))
    assert [c.to_json() for c in fits.comparisons] == \
        [c.to_json() for c in study.comparisons if c.target_budget == tier]
    written = StudyFits.from_json(json.loads((tmp_path / "cli" / "fit.json").read_text()))
    assert written.to_json() == fits.to_json()


def test_the_dashboard_study_page_shows_the_comparison(comparative):
    from tests.dashboard_support import get, running_dashboard

    _, prefix, result = comparative
    study = load_study(result)
    out = study_outputs(result.plan.graph)
    key = out.report.rstrip("/").removeprefix(prefix.rstrip("/") + "/")
    with running_dashboard(prefix) as url:
        status, page, _ = get(f"{url}/study?step={key}")
    assert status == 200
    for c in study.comparisons:
        assert f'data-label="{c.label}" data-tier="{c.target_budget}"' in page
        assert f'<td data-field="multiplier">{c.compute_multiplier:.3g}</td>' in page
    for label in study.labels:
        p = study.predictions[label]
        assert f"{p.error_percent:+.2f}%" in page
