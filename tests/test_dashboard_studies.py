"""The dashboard shows a study as a study: one row per study on the Studies page (name,
labels, metric, each held-out prediction with its error and whether it is inside its
interval, a link to the report), and the fit step's page renders every label's typed fit.
The study's files are written by real steps under a real prefix, served by a real server,
read over HTTP and in Chromium."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from marin.scaling_laws.run_status import RunStatus
from marin.scaling_laws.study.artifacts import Prediction, StudyFit, StudyFits, StudyResult
from marin.scaling_laws.study.laws import Approach2, Optimum, TargetPrediction
from marin.scaling_laws.values import Approach3, PowerLaw
from tests.dashboard_support import browser, get, run_file_steps, running_dashboard

LABELS = ("plays", "docs")


def _fit(label: str, exponent: float) -> StudyFit:
    law = PowerLaw(exponent=exponent, coefficient=0.25, exponent_se=0.012,
                   log_coefficient_se=0.1, quantity="params")
    return StudyFit(label=label, metric="macro_bpb", runs=9, used=8,
                    approach2=Approach2(params=law, tokens=PowerLaw(1 - exponent, 0.7, 0.02,
                                                                    0.1, "tokens"),
                                        loss=PowerLaw(-0.05, 9.0, 0.003, 0.1, "loss")),
                    approach3=Approach3(E=1.69, A=406.4, B=410.7, alpha=0.34, beta=0.28,
                                        objective=0.01),
                    holdout=TargetPrediction(3e12, approach2=Optimum(1.5e6, 3.3e5, 2.125)))


def _prediction(label: str, achieved: float, interval: tuple[float, float]) -> Prediction:
    predicted = 2.0
    return Prediction(label=label, budget=3e12, run_name=f"{label}-heldout", group="g",
                      status=RunStatus.OK, predicted_loss=predicted,
                      predicted_loss_interval=interval, achieved_loss=achieved,
                      error_percent=100.0 * (predicted - achieved) / achieved,
                      within_interval=interval[0] <= achieved <= interval[1])


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    prefix = tmp_path_factory.mktemp("studies") / "store"
    fits = StudyFits(metric="macro_bpb", labels=LABELS,
                     fits={"plays": _fit("plays", 0.52), "docs": _fit("docs", 0.47)})
    predictions = {"plays": _prediction("plays", 2.05, (1.9, 2.1)),
                   "docs": _prediction("docs", 2.5, (1.9, 2.1))}
    result = StudyResult(title="IsoFLOP study cmp", metric="macro_bpb", labels=LABELS,
                         fits=fits.fits, predictions=predictions)
    keys = run_file_steps(prefix, {
        "cmp/fit": {"fit.json": json.dumps(fits.to_json()), "runs.csv": "run\n"},
        "cmp/report": {"study.json": json.dumps(result.to_json()),
                       "report.md": "# IsoFLOP study cmp\n"},
        # a fit whose report has not run yet: the row comes from its fit.json
        "early/fit": {"fit.json": json.dumps(StudyFits(
            metric="macro_loss", labels=("default",),
            fits={"default": _fit("default", 0.5)}).to_json())},
    })
    with running_dashboard(str(prefix)) as url:
        yield {"url": url, "keys": keys, "predictions": predictions, "fits": fits}


def _cells(html: str, study: str) -> str:
    [row] = re.findall(rf'<tr data-study="{study}">(.*?)</tr>', html, re.S)
    return row


def test_the_studies_page_has_one_row_per_study_with_its_findings(served):
    status, html, _ = get(served["url"] + "/studies")
    assert status == 200
    assert html.count("<tr data-study=") == 2  # two studies: not one row per step
    row = _cells(html, "cmp")
    assert "plays, docs" in row and "macro_bpb" in row
    for label, p in served["predictions"].items():
        assert f"{p.error_percent:+.2f}%" in row
        assert re.search(rf'data-label="{label}">{label}: .*?data-field="within">'
                         rf'{"inside" if p.within_interval else "outside"}<', row, re.S)
    report = served["keys"]["cmp/report"]
    assert f'href="/study?step={report}">report</a>' in row
    early = _cells(html, "early")
    assert "macro_loss" in early and ">-</td>" in early  # no report yet


def test_the_fit_page_renders_every_labels_typed_fit(served):
    key = served["keys"]["cmp/fit"]
    status, html, _ = get(f"{served['url']}/study?step={key}")
    assert status == 200 and 'id="fits"' in html
    assert '"format": "marin.study.fit"' not in html  # not the raw file
    for label, fit in served["fits"].fits.items():
        [block] = re.findall(rf'<div class="fit" data-label="{label}">(.*?)</div>', html, re.S)
        a2 = fit.approach2.params
        assert f"{a2.exponent:.3f} &plusmn; {a2.exponent_se:.3f}" in block
        assert f"{fit.approach3.alpha:.3f}" in block and f"{fit.approach3.E:.4g}" in block
        assert f"N = {fit.holdout.approach2.params:.3g}" in block


@pytest.mark.slow
def test_in_the_browser_a_study_row_leads_to_its_report_and_fit(served):
    with browser() as chromium:
        page = chromium.new_page()
        page.goto(served["url"] + "/studies")
        row = page.locator("tr[data-study='cmp']")
        assert row.locator("[data-field=labels]").inner_text() == "plays, docs"
        docs = row.locator(".prediction[data-label='docs']")
        assert docs.locator("[data-field=within]").inner_text() == "outside"
        assert docs.locator("[data-field=error]").inner_text() == \
            f"{served['predictions']['docs'].error_percent:+.2f}%"
        row.locator("[data-field=report] a").click()
        page.wait_for_selector("#report")
        assert page.locator("#comparison tr[data-label='plays']").count() == 1
        page.goto(served["url"] + "/studies")
        page.locator("tr[data-study='cmp'] [data-field=name] a").click()
        page.wait_for_selector("#fits")
        plays = page.locator(".fit[data-label='plays'] [data-field=a2-params]").inner_text()
        assert "0.520" in plays and "0.012" in plays
        page.close()


def test_a_fit_json_of_no_study_is_a_row_that_says_so(tmp_path: Path):
    keys = run_file_steps(tmp_path / "store", {"odd/fit": {"fit.json": '{"runs": 1}'}})
    with running_dashboard(str(tmp_path / "store")) as url:
        _, html, _ = get(url + "/studies")
        row = _cells(html, keys["odd/fit"])
        assert f"{keys['odd/fit']}/fit.json is not a study&#39;s fit.json" in row
        _, page, _ = get(f"{url}/study?step={keys['odd/fit']}")
        assert 'id="fits"' not in page  # shown as the JSON it is
        [raw] = re.findall(r'<pre class="json" id="fit">(.*?)</pre>', page, re.S)
        assert json.loads(raw.replace("&#34;", '"').replace("&quot;", '"')) == {"runs": 1}
