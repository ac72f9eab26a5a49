"""A study held out at several budgets (2x and 8x past the fit): one checked prediction per
label per budget, the nearest keeping the step and key it has alone, each read back in
budget order, and pre-registered (written before its run starts)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from marin.execution import Executor
from marin.scaling_laws import CompletedAdamhHeuristic
from marin.scaling_laws.run_status import RunStatus
from marin.scaling_laws.study import StudyCorpus, StudyInputError, isoflop_study, study_outputs
from marin.scaling_laws.study.analysis import fit_labels
from marin.scaling_laws.study.artifacts import (
    FIT,
    PREDICTION,
    Prediction,
    write_artifact,
    write_rows,
)
from marin.scaling_laws.study.reading import load_study
from marin.scaling_laws.study.steps import study_result
from marin.scaling_laws.values import RunRow

TINY = CompletedAdamhHeuristic(
    vocab_size=300, seq_len=16, hardware="cpu", devices=1, min_hidden=8, max_hidden=24,
    hidden_step=8, head_dim=8, large_step_budget=1e30, target_steps=10**9, min_batch_size=4,
    max_batch_size=4, min_train_steps=6, budget_tolerance=0.1, reference_batch_size=4,
    reference_tokens=1e4, min_tokens_per_param=0.01, max_tokens_per_param=400)
BUDGETS = (6e7, 1.2e8)


def _corpus(root: Path) -> StudyCorpus:
    for split in ("train", "validation"):
        (root / split).mkdir(parents=True)
        (root / split / "a.txt").write_text("the quick brown fox jumps over the lazy dog\n" * 50)
    return StudyCorpus(train=(str(root / "train"),), validation=(str(root / "validation"),))


def test_each_held_out_budget_gets_its_own_check_and_the_nearest_keeps_its_key(tmp_path):
    corpora = {"a": _corpus(tmp_path / "a"), "b": _corpus(tmp_path / "b")}
    one = isoflop_study("s", corpora, BUDGETS, TINY, tokenizer_vocab_size=300,
                        predict_budget=2.4e8)
    two = isoflop_study("s", corpora, BUDGETS, TINY, tokenizer_vocab_size=300,
                        predict_budget=(9.6e8, 2.4e8))
    assert set(two.further_predictions) == {"a", "b"}
    for label in ("a", "b"):
        (far,) = two.further_predictions[label]
        assert far.config.budget == 9.6e8 and far.name == f"s/prediction/{label}-9.6e8"
        assert two.predictions[label].config.budget == 2.4e8
    prefix = str(tmp_path / "store")
    plan_one = {e.name: e.node.output_path for e in Executor(prefix).plan(one).entries}
    plan_two = {e.name: e.node.output_path for e in Executor(prefix).plan(two).entries}
    # the fit, the runs and the nearest predictions are the steps of the study held out once
    for name, path in plan_one.items():
        if name != "s/report":
            assert plan_two[name] == path, name
    assert set(plan_two) - set(plan_one) == {"s/prediction/a-9.6e8", "s/prediction/b-9.6e8"}
    out = study_outputs(Executor(prefix).graph(two), two)
    assert [label for label, _ in out.predictions] == ["a", "a", "b", "b"]


@pytest.mark.parametrize("budgets, words", [
    ((1.2e8, 2.4e8), "must exceed the largest swept budget"),
    ((2.4e8, 2.4e8), "names a budget twice"),
])
def test_a_held_out_budget_inside_the_sweep_or_named_twice_is_refused(tmp_path, budgets, words):
    with pytest.raises(StudyInputError, match=words) as info:
        isoflop_study("s", _corpus(tmp_path / "c"), BUDGETS, TINY, predict_budget=budgets)
    assert "\n" not in str(info.value)


def _rows(label: str) -> list[RunRow]:
    rows = []
    for budget in (1e15, 2e15, 4e15):
        for i, n in enumerate((2e4, 5e4, 1e5, 2e5, 5e5)):
            d = budget / (6 * n)
            rows.append(RunRow(run=f"{label}-{budget:g}-{i}", params=n, tokens=d, flops=budget,
                               budget=budget, label=label,
                               loss=1.8 + 400 / n**0.34 + 2000 / d**0.28))
    return rows


def _prediction(label: str, budget: float, loss: float) -> Prediction:
    return Prediction(label=label, budget=budget, run_name=f"{label}-{budget:g}", group="g",
                      status=RunStatus.OK, predicted_loss=loss, achieved_loss=loss * 1.01,
                      error_percent=-0.99, fit_key="fit-0a1b2c3d",
                      registered_at="2026-12-02T06:00:00.000000+00:00",
                      run_started_at="2026-12-02T06:00:00.000100+00:00")


def test_predictions_read_back_nearest_first_per_label_and_print_in_that_order(tmp_path):
    rows = _rows("a") + _rows("b")
    fit = tmp_path / "fit-0a1b2c3d"
    fits = fit_labels(rows, ["a", "b"], metric="loss", holdout_budget=8e15, bootstrap=0)
    write_artifact(str(fit), FIT, fits)
    write_rows(str(fit), rows)
    folders = []
    for label, budget in (("a", 3.2e16), ("b", 8e15), ("a", 8e15), ("b", 3.2e16)):
        folder = tmp_path / f"prediction-{label}-{budget:g}"
        write_artifact(str(folder), PREDICTION, _prediction(label, budget, 2.0 + budget / 1e17))
        folders.append((label, str(folder)))
    result = study_result("t", str(fit), folders)
    assert {label: p.budget for label, p in result.predictions.items()} == {"a": 8e15,
                                                                           "b": 8e15}
    assert [(p.label, p.budget) for p in result.further] == [("a", 3.2e16), ("b", 3.2e16)]
    assert [p.budget for p in result.checks_of("a")] == [8e15, 3.2e16]

    from marin.scaling_laws.study.report import markdown
    from marin.scaling_laws.study.summary import summary_lines

    lines = summary_lines(result)
    held = [line for line in lines if "held-out" in line]
    assert [line.split(":")[0] for line in held] == ["a", "a", "b", "b"]
    assert "held-out 8e+15" in held[0] and "held-out 3.2e+16" in held[1]
    report = markdown(result, [])
    assert report.count("pre-registered: written 2026-12-02T06:00:00.000000+00:00 from fit "
                        "`fit-0a1b2c3d`, before its run started") == 4
    # a study.json with further checks reads back as written
    from marin.scaling_laws.study.artifacts import StudyResult

    data = json.loads(json.dumps(result.to_json()))
    assert StudyResult.from_json(data, where="study.json") == result
    assert replace(result, further=()).checks_of("a") == [result.predictions["a"]]


def test_a_study_folder_reads_each_held_out_check(tmp_path):
    """``load_study(folder)``: the newest of each prediction step, the further ones too."""
    rows = _rows("default")
    study = tmp_path / "study"
    fit = study / "fit-0a1b2c3d"
    write_artifact(str(fit), FIT, fit_labels(rows, ["default"], metric="loss", bootstrap=0))
    write_rows(str(fit), rows)
    write_artifact(str(study / "prediction-1a2b3c4d"), PREDICTION,
                   _prediction("default", 8e15, 2.1))
    write_artifact(str(study / "prediction-3.2e16-5e6f7a8b"), PREDICTION,
                   _prediction("default", 3.2e16, 2.05))
    found = load_study(str(study))
    assert found.predictions["default"].budget == 8e15
    assert [p.budget for p in found.further] == [3.2e16]
