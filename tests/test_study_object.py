"""A study is a value: ``isoflop_study`` returns an ``IsoFlopStudy`` with handles on its fit,
predictions and report, taken by ``executor_main``, ``Executor`` and ``load_study`` as its
steps are. Planned only; nothing trains here."""

from __future__ import annotations

import json
import shutil

import pytest

from marin.execution import Executor, Plan, executor_main
from marin.scaling_laws.run_status import RunStatus
from marin.scaling_laws.study import (
    IsoFlopStudy,
    Mixture,
    PredictionConfig,
    StudyCorpus,
    StudyFitConfig,
    StudyReportConfig,
    isoflop_study,
    load_study,
    study_outputs,
)
from marin.scaling_laws.study.artifacts import ArtifactError
from tests.helpers.corpus import plays
from tests.helpers.studies import BUDGETS, HELD_OUT, TINY, VOCAB


@pytest.fixture(scope="module")
def corpora(tmp_path_factory) -> dict[str, StudyCorpus]:
    """Two corpora of one play each for training and one for validation."""
    root = tmp_path_factory.mktemp("corpora")
    texts, out = plays(4), {}
    for k, label in enumerate(("plays", "docs")):
        for folder, text in (("train", texts[2 * k]), ("validation", texts[2 * k + 1])):
            (root / label / folder).mkdir(parents=True)
            shutil.copy(text, root / label / folder / f"{text.stem}.txt")
        out[label] = StudyCorpus(train=(str(root / label / "train"),),
                                 validation=(str(root / label / "validation"),))
    return out


def _study(corpora, **kwargs) -> IsoFlopStudy:
    labels = {**corpora, "mix": Mixture({"plays": 0.7, "docs": 0.3})}
    options = {"tokenizer_vocab_size": VOCAB, "predict_budget": HELD_OUT, "bootstrap": 10,
               "train_options": {"compute_dtype": "float32"}, **kwargs}
    return isoflop_study("cmp", labels, BUDGETS, TINY, **options)


def test_the_study_holds_its_steps_and_a_handle_on_each_that_matters(corpora):
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


def test_executor_main_and_the_executor_take_a_study_as_its_steps(corpora, tmp_path,
                                                                 capsys):
    study = _study(corpora)
    prefix = str(tmp_path / "store")
    plan = executor_main(study, args=["--dry-run", "--prefix", prefix])
    assert isinstance(plan, Plan)
    listed = Executor(prefix).plan(list(study.steps))
    assert [e.node.key for e in plan.entries] == [e.node.key for e in listed.entries]
    assert [e.node.key for e in Executor(prefix).plan(study).entries] == \
        [e.node.key for e in listed.entries]


def test_load_study_reads_the_handles_placed_under_the_prefix(corpora, tmp_path):
    study = _study(corpora)
    prefix = str(tmp_path / "store")
    graph = Executor(prefix).graph(study)
    out = study_outputs(graph, study)
    assert out.fit == graph.node_of(study.fit).output_path
    assert out.report == graph.node_of(study.report).output_path
    assert out.predictions == tuple((label, graph.node_of(s).output_path)
                                    for label, s in study.predictions.items())
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


# -- typed train options and heuristic -------------------------------------------------------

def _keys(study, prefix: str) -> dict[str, str]:
    return {n.step.name: n.key for n in Executor(prefix).graph(study).nodes}


def test_typed_train_options_give_the_configs_and_keys_a_mapping_gives(corpora,
                                                                      tmp_path):
    from marin.scaling_laws.runs import training_config
    from marin.scaling_laws.train_options import TrainOptions

    options = TrainOptions(compute_dtype="float32", eval_batches=2, seed=3)
    assert options.as_dict() == {"seed": 3, "compute_dtype": "float32", "eval_batches": 2}
    typed = _study(corpora, train_options=options)
    mapped = _study(corpora, train_options={"compute_dtype": "float32", "eval_batches": 2,
                                            "seed": 3})
    prefix = str(tmp_path / "store")
    assert _keys(typed, prefix) == _keys(mapped, prefix)
    for run in typed.runs:  # the one builder, given the options as a mapping, agrees
        c = run.config
        reference = training_config(_candidate_of(c), c.train.mixture or c.train.cache_path,
                                    {"eval_every": c.train.eval_every, "seed": c.train.seed,
                                     "compute_dtype": "float32", "eval_batches": 2,
                                     "validation": c.train.validation})
        assert c.train == reference
        assert c.train.compute_dtype == "float32" and c.train.eval_batches == 2
    assert all(p.config.train_options == {"seed": 3, "compute_dtype": "float32",
                                          "eval_batches": 2, "validation":
                                          p.config.train_options["validation"]}
               for p in typed.predictions.values())


def _candidate_of(config):
    from marin.scaling_laws.candidates import nearest_candidate
    from marin.scaling_laws.study import study_candidates

    [candidates] = study_candidates(TINY, [config.budget]).values()
    model = config.train.model
    [found] = [c for c in candidates if (c.model_config.hidden_dim, c.model_config.num_layers)
               == (model.hidden_dim, model.num_layers)]
    assert nearest_candidate(candidates, found.params) is found
    return found


@pytest.mark.parametrize("build, words", [
    (lambda T: T.of({"eval_batchs": 2}), "train_options['eval_batchs'] is not a TrainLmConfig "
     "field; did you mean 'eval_batches'?"),
    (lambda T: T.of({"model": None}), "train_options['model'] is set by the candidate"),
    (lambda T: T.of({"validation": ()}), "train_options['validation'] is set by the study; "
     "use isoflop_study(validation=...)"),
    (lambda T: T(eval_batches="2"), "train_options.eval_batches='2' must be an integer; give "
     "e.g. eval_batches=4"),
    (lambda T: T(async_checkpoints=1), "train_options.async_checkpoints=1 must be true or "
     "false"),
    (lambda T: T(seed=True), "train_options.seed=True must be an integer"),
    (lambda T: T.of(["compute_dtype"]), "train_options is a list; give a TrainOptions"),
])
def test_a_bad_train_option_is_refused_when_built_in_one_line(build, words):
    from marin.scaling_laws.train_options import TrainOptions, TrainOptionsError

    with pytest.raises(TrainOptionsError) as info:
        build(TrainOptions)
    message = str(info.value)
    assert "\n" not in message and words in message, message


def test_every_train_option_is_a_train_lm_config_field_the_candidate_leaves_open():
    import dataclasses

    from marin.scaling_laws.train_options import FROM_CANDIDATE, FROM_STUDY, TrainOptions
    from marin.training.config import TrainLmConfig

    options = {f.name for f in dataclasses.fields(TrainOptions)}
    fields = {f.name for f in dataclasses.fields(TrainLmConfig)}
    assert options == fields - set(FROM_CANDIDATE) - set(FROM_STUDY)


def test_a_heuristic_must_be_a_scaling_heuristic(corpora):
    from marin.scaling_laws.study import StudyInputError

    with pytest.raises(StudyInputError, match="heuristic=dict is no ScalingHeuristic: give one "
                       "with a candidates_for_budget"):
        isoflop_study("cmp", corpora, BUDGETS, {"vocab_size": 384})
