"""A study is a value: ``isoflop_study`` returns an ``IsoFlopStudy`` with handles on its fit,
predictions and report, taken by ``executor_main``, ``Executor`` and ``load_study`` as its
steps are. Planned only; nothing trains here."""

from __future__ import annotations

import json

import pytest

from marin.execution import Executor, Plan, executor_main
from marin.scaling_laws.run_status import RunStatus
from marin.scaling_laws.study import (
    IsoFlopStudy,
    PredictionConfig,
    StudyFitConfig,
    StudyReportConfig,
    load_study,
    study_outputs,
)
from marin.scaling_laws.study.artifacts import ArtifactError
from tests.test_study_planning import _study, corpora  # noqa: F401 (a fixture)


def test_the_study_holds_its_steps_and_a_handle_on_each_that_matters(corpora):  # noqa: F811
    study = _study(corpora)
    assert isinstance(study, IsoFlopStudy)
    assert study.name == "cmp" and study.labels == ("plays", "docs", "mix")
    assert study.metric == study.fit.config.metric == "macro_bpb"
    assert isinstance(study.fit.config, StudyFitConfig)
    assert isinstance(study.report.config, StudyReportConfig) and study.steps[-1] is study.report
    assert list(study.predictions) == ["plays", "docs", "mix"]
    for label, step in study.predictions.items():
        assert isinstance(step.config, PredictionConfig) and step.config.label == label
    held = {id(s) for s in study.steps}
    assert {id(study.fit), id(study.report), *map(id, study.predictions.values()),
            *map(id, study.runs), id(study.tokenizer)} <= held
    assert len(study.runs) == len({s.name for s in study.steps if "/runs/" in s.name})
    # without a held-out budget there is no prediction step, and no handle
    assert _study(corpora, predict_budget=None).predictions == {}


def test_executor_main_and_the_executor_take_a_study_as_its_steps(corpora, tmp_path,  # noqa: F811
                                                                 capsys):
    study = _study(corpora)
    prefix = str(tmp_path / "store")
    plan = executor_main(study, args=["--dry-run", "--prefix", prefix])
    assert isinstance(plan, Plan)
    listed = Executor(prefix).plan(list(study.steps))
    assert [e.node.key for e in plan.entries] == [e.node.key for e in listed.entries]
    assert [e.node.key for e in Executor(prefix).plan(study).entries] == \
        [e.node.key for e in listed.entries]


def test_load_study_reads_the_handles_placed_under_the_prefix(corpora, tmp_path):  # noqa: F811
    study = _study(corpora)
    prefix = str(tmp_path / "store")
    graph = Executor(prefix).graph(study)
    out = study_outputs(graph, study)
    assert out.fit == graph.node_of(study.fit).output_path
    assert out.report == graph.node_of(study.report).output_path
    assert out.predictions == {label: graph.node_of(s).output_path
                               for label, s in study.predictions.items()}
    assert out == study_outputs(graph)  # a graph of bare steps finds the same by their configs
    with pytest.raises(ArtifactError, match=r"fit\.json") as info:  # not fitted yet
        load_study(study, prefix)
    assert out.fit in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(TypeError, match="give the prefix the study ran under"):
        load_study(study)



# -- a run's status --------------------------------------------------------------------------

def test_a_runs_status_is_a_run_status_read_and_written_as_todays_strings(tmp_path):
    from marin.scaling_laws.study.analysis import missing_row
    from marin.scaling_laws.study.artifacts import (
        OUTCOME,
        RunOutcome,
        read_outcome,
        write_artifact,
    )
    from marin.scaling_laws.study.configs import StudyRun
    from marin.scaling_laws.study.fitting import clean_rows

    outcome = RunOutcome(run_name="r", group="g", label="plays", budget=1e9,
                         status=RunStatus.DIVERGED, reason="loss went to nan", hidden_dim=8,
                         num_layers=1, summary=None)
    path = write_artifact(str(tmp_path / "run"), OUTCOME, outcome)
    with open(path) as f:
        assert json.load(f)["status"] == "diverged"
    back = read_outcome(str(tmp_path / "run"))
    assert back.status is RunStatus.DIVERGED and back == outcome
    row = back.row("macro_bpb")
    assert row.status is RunStatus.DIVERGED
    ok = RunOutcome(run_name="s", group="g", label="plays", budget=1e9, status=RunStatus.OK,
                    reason=None, hidden_dim=8, num_layers=1, summary=None)
    assert ok.row("macro_bpb").status is RunStatus.NO_LOSS  # ok, but no metric recorded
    missing = missing_row(StudyRun("m", "g", 1e9, str(tmp_path / "m"), "plays"))
    assert missing.status is RunStatus.MISSING
    used, excluded = clean_rows([row, missing])
    assert used == [] and [e.status for e in excluded] == [RunStatus.DIVERGED,
                                                            RunStatus.MISSING]
    assert [f"{e.status}" for e in excluded] == ["diverged", "missing"]


def test_a_status_no_run_can_have_is_refused_naming_the_file(tmp_path):
    from marin.scaling_laws.study.artifacts import ArtifactError, read_outcome

    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "outcome.json").write_text(json.dumps({
        "format": "marin.study.run_outcome", "version": 2, "run_name": "r", "group": "g",
        "label": "plays", "budget": 1e9, "status": "exploded", "reason": None,
        "hidden_dim": 8, "num_layers": 1, "summary": None}))
    with pytest.raises(ArtifactError) as info:
        read_outcome(str(folder))
    message = str(info.value)
    assert str(folder / "outcome.json") in message and "'exploded' is no RunStatus" in message
    assert "diverged" in message and "\n" not in message
