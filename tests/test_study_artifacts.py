"""The study's typed files: round trips, files of the previous (unversioned) format, and
one-line refusals of files of another format or version."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from marin.scaling_laws.study import load_study
from marin.scaling_laws.study.artifacts import (
    ArtifactError,
    LabelComparison,
    Prediction,
    RunOutcome,
    StudyFits,
    read_fits,
    read_outcome,
    read_prediction,
)
from marin.training.summary import RunSummary

# What the study wrote before its files had a format (the shapes of its outcome.json,
# fit.json and prediction.json, with figures of a small run).
OLD_SUMMARY = {"params": 5848, "tokens": 2304, "flops": 6.1e7, "train_loss": 5.9,
               "final_step_loss": 5.8, "eval_loss": 5.71, "eval_bpb": 2.3, "steps": 36,
               "batch_size": 4, "seq_len": 16}
OLD_OUTCOME = {"run_name": "study-6e7-h8-l1", "group": "study-6e7", "budget": 6e7,
               "status": "ok", "reason": None, "summary": OLD_SUMMARY, "hidden_dim": 8,
               "num_layers": 1, "eval_losses": [6.2, 5.9, 5.71]}
LAW = {"exponent": 0.4, "coefficient": 2.0, "exponent_se": 0.05, "log_coefficient_se": 0.3}
OLD_FIT = {
    "runs": 7, "used": 6,
    "excluded": [{"run": "r7", "budget": 1.2e8, "status": "diverged", "reason": "nan at 3"}],
    "budgets": [{"budget": b, "coefficients": [0.1, -2.0, 15.0], "optimal_tokens": 2e4,
                 "optimal_tokens_interval": [1.5e4, 2.5e4], "optimal_params": 6e3,
                 "optimal_loss": 5.6, "points": 3} for b in (6e7, 1.2e8)],
    "budgets_not_fitted": [],
    "approach2": {q: {**LAW, "quantity": q} for q in ("params", "tokens", "loss")},
    "approach3": {"E": 2.0, "A": 100.0, "B": 300.0, "alpha": 0.5, "beta": 0.4,
                  "objective": 1e-5, "standard_errors": {"E": 0.1}, "flops_coefficient": 8.0,
                  "flops_exponent": 1.0, "bootstrap_samples": [[2.0, 100.0, 300.0, 0.5, 0.4]] * 3},
    "predictions": [{"budget": 3e8, "approach2": {"params": 9e3, "params_interval": [8e3, 1e4],
                                                  "tokens": 3e4, "tokens_interval": None,
                                                  "loss": 5.4}}],
    "holdout": None}
OLD_PREDICTION = {
    "budget": 2.4e8, "run_name": "study-2.4e8-heldout-predicted", "group": "study-2.4e8-heldout",
    "predicted": OLD_FIT["predictions"][0] | {"budget": 2.4e8}, "size_from": "approach2",
    "candidate": {"hidden_dim": 16, "num_layers": 1, "params": 9e3, "tokens": 3e4,
                  "flops": 2.4e8, "batch_size": 4, "train_steps": 400},
    "predicted_loss": 5.42, "predicted_loss_interval": [5.40, 5.44], "loss_from": "approach3",
    "status": "ok", "reason": None, "achieved_loss": 5.45, "summary": OLD_SUMMARY,
    "error_percent": -0.55, "within_interval": False}


def _write(folder: Path, name: str, data) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps(data))
    return folder


def test_files_of_the_previous_format_read_as_the_default_label(tmp_path):
    outcome = read_outcome(str(_write(tmp_path / "run", "outcome.json", OLD_OUTCOME)))
    assert (outcome.label, outcome.run_name, outcome.status) == ("default", "study-6e7-h8-l1",
                                                                 "ok")
    row = outcome.row("loss")
    assert (row.loss, row.first_eval_loss, row.params) == (5.71, 6.2, 5848.0)

    fits = read_fits(str(_write(tmp_path / "fit", "fit.json", OLD_FIT)))
    assert fits.labels == ("default",) and fits.metric == "loss"
    fit = fits.fits["default"]
    assert fit.approach2.params.exponent == 0.4 and fit.approach2.tokens.exponent_se == 0.05
    assert fit.approach3.alpha == 0.5 and len(fit.approach3.bootstrap_samples) == 3
    assert [(e.run, e.status, e.reason) for e in fit.excluded] == [("r7", "diverged",
                                                                    "nan at 3")]
    assert fit.predictions[0].approach2.tokens_interval is None

    prediction = read_prediction(str(_write(tmp_path / "p", "prediction.json", OLD_PREDICTION)))
    assert (prediction.label, prediction.achieved_loss, prediction.within_interval) == \
        ("default", 5.45, False)
    assert prediction.candidate.hidden_dim == 16
    assert prediction.optimum.best[0] == "approach2"

    # a study folder of the previous format: fit-*, prediction-*, no study.json
    study_dir = tmp_path / "study"
    _write(study_dir / "fit-1a2b3c4d", "fit.json", OLD_FIT)
    (study_dir / "fit-1a2b3c4d" / "runs.csv").write_text(
        "run,group,budget,hidden_dim,num_layers,params,tokens,flops,loss,train_loss,"
        "first_eval_loss,status,reason\nstudy-6e7-h8-l1,study-6e7,6e7,8,1,5848,2304,6.1e7,5.71,"
        "5.9,6.2,ok,\n")
    _write(study_dir / "prediction-5e6f7a8b", "prediction.json", OLD_PREDICTION)
    study = load_study(str(study_dir))
    assert study.labels == ("default",)
    assert study.predictions["default"].achieved_loss == 5.45
    assert [(r.run, r.label, r.loss) for r in study.runs] == [("study-6e7-h8-l1", "default",
                                                              5.71)]


def test_a_runs_table_keeps_its_status_strings_and_refuses_an_unknown_one():
    from marin.scaling_laws.rows import row_from_columns, rows_csv
    from marin.scaling_laws.run_status import RunStatus

    columns = {"run": "r1", "params": "4e4", "tokens": "1e6", "loss": "3.2"}
    row = row_from_columns({**columns, "status": "diverged", "reason": "nan"}, "t.csv", "row 1")
    assert row.status is RunStatus.DIVERGED
    assert row_from_columns(columns, "t.csv", "row 1").status is RunStatus.OK
    written = rows_csv([row]).splitlines()
    header, line = written[0].split(","), written[1].split(",")
    assert line[header.index("status")] == "diverged"
    with pytest.raises(ArtifactError, match=r"t.csv, row 2: status='exploded' is not a run "
                                            r"status; known: ok, diverged"):
        row_from_columns({**columns, "status": "exploded"}, "t.csv, row 2", "row 2")


@pytest.mark.parametrize("data, words", [
    ({"runs": 3, "budgets": [], "params_fit": {}, "parametric": {}},
     "was written by `marin scaling fit` before fit files had a format; rerun"),
    ({"format": "marin.study.fits", "version": 9, "metric": "loss"},
     "is of format 'marin.study.fits' version 9; a StudyFits is 'marin.study.fits' version 4"),
    ({"format": "marin.study.prediction", "version": 2}, "a StudyFits is"),
    ({"hello": 1}, "is not a study's fit.json of any known format"),
])
def test_a_fit_file_of_another_format_is_refused_in_one_line_naming_it(tmp_path, data, words):
    folder = _write(tmp_path / "fit", "fit.json", data)
    with pytest.raises(ArtifactError) as info:
        read_fits(str(folder))
    message = str(info.value)
    assert "\n" not in message and words in message and str(folder / "fit.json") in message


def test_a_half_written_file_is_named_with_the_fix(tmp_path):
    (tmp_path / "outcome.json").write_text('{"format": "marin.study.run_outcome", "vers')
    with pytest.raises(ArtifactError, match=r"outcome.json is not valid JSON .*rerun it"):
        read_outcome(str(tmp_path))


def test_artifacts_round_trip_through_strict_json():
    summary = RunSummary(params=10, tokens=20, flops=30.0, steps=1, batch_size=1, seq_len=4,
                         train_loss=math.nan, final_step_loss=1.0, macro_bpb=2.0)
    outcome = RunOutcome(run_name="r", group="g", label="plays", budget=1e9, status="ok",
                         reason=None, hidden_dim=8, num_layers=1, summary=summary,
                         curves={"macro_bpb": (3.0, 2.0)})
    text = json.dumps(outcome.to_json(), allow_nan=False)  # NaN is written as "nan"
    back = RunOutcome.from_json(json.loads(text))
    assert back.summary.metric("macro_bpb") == 2.0 and math.isnan(back.summary.train_loss)
    assert back.curves == {"macro_bpb": (3.0, 2.0)} and back.label == "plays"
    comparison = LabelComparison("plays", "docs", 1e12, 3.1, math.inf, (2.0, math.inf),
                                 True, "approach2")
    assert LabelComparison.from_json(json.loads(json.dumps(comparison.to_json()))) == comparison
    fits = StudyFits(metric="macro_bpb", labels=("plays",), fits={}, comparisons=(comparison,))
    assert StudyFits.from_json(json.loads(json.dumps(fits.to_json()))) == fits
    prediction = Prediction(label="plays", budget=1e9, run_name="p", group="g", status="ok",
                            predicted_loss_interval=(1.0, 2.0))
    assert Prediction.from_json(prediction.to_json()) == prediction
    with pytest.raises(ArtifactError, match="expected a number, got 'x'"):
        Prediction.from_json({**prediction.to_json(), "budget": "x"}, where="p.json")


def test_files_of_the_version_before_the_model_error_still_read(tmp_path):
    """``fit.json`` and ``prediction.json`` of version 2 (before the backtests of the
    prediction's law, the pooled model error and the interval's terms) read with none."""
    from marin.scaling_laws.model_error import ModelError
    from marin.scaling_laws.study.artifacts import StudyFit

    fit = StudyFit(label="plays", metric="macro_bpb", runs=3, used=3)
    fits = StudyFits(metric="macro_bpb", labels=("plays",), fits={"plays": fit},
                     model_error=ModelError(0.01, 3, ("plays", "docs", "mix"), 6, 0.012))
    new = ("extrapolations", "why_no_extrapolation", "model_error", "why_no_model_error")
    data = fits.to_json()
    old = {k: v for k, v in data.items() if k not in new} | {"version": 2}
    old["fits"] = {"plays": {k: v for k, v in data["fits"]["plays"].items() if k not in new}
                   | {"version": 2}}
    back = read_fits(str(_write(tmp_path / "fit", "fit.json", old)))
    assert back.model_error is None and back.fits["plays"].extrapolations == ()
    assert back.fits["plays"] == fit
    assert StudyFits.from_json(json.loads(json.dumps(data))) == fits
    prediction = Prediction(label="plays", budget=1e9, run_name="p", group="g", status="ok",
                            noise_dof=8, model_error_std=0.02, model_error_dof=3,
                            interval_terms=("fit", "noise", "model error"))
    data = prediction.to_json()
    old = {k: v for k, v in data.items() if k not in (
        "noise_dof", "model_error_std", "model_error_dof", "interval_terms")} | {"version": 2}
    back = read_prediction(str(_write(tmp_path / "prediction", "prediction.json", old)))
    assert back.model_error_std is None and back.interval_terms == ()
    assert Prediction.from_json(data) == prediction
