"""A comparative study's graph, planned without running: labels, mixtures, validation
sets, the metric and typed train options, and the one-line refusals of bad input."""

from __future__ import annotations

import pytest

from marin.execution import Executor
from marin.scaling_laws.runs import TrainOptionsError, train_step, training_config
from marin.scaling_laws.study import (
    Mixture,
    StudyCorpus,
    StudyInputError,
    isoflop_study,
    run_candidate,
    run_prediction,
)
from marin.scaling_laws.study.graph import fit_study
from marin.training.config import DataComponent, ValidationSet
from tests.helpers.studies import BUDGETS, HELD_OUT, TINY, VOCAB, play_corpus


@pytest.fixture(scope="module")
def corpora(tmp_path_factory) -> dict[str, StudyCorpus]:
    root = tmp_path_factory.mktemp("corpora")
    return {"plays": play_corpus(root / "plays", 0), "docs": play_corpus(root / "docs", 2)}


def _study(corpora, **kwargs):
    labels = {**corpora, "mix": Mixture({"plays": 0.7, "docs": 0.3})}
    options = {"tokenizer_vocab_size": VOCAB, "predict_budget": HELD_OUT, "bootstrap": 10,
               "train_options": {"compute_dtype": "float32"}, **kwargs}
    return isoflop_study("cmp", labels, BUDGETS, TINY, **options)


def test_every_label_runs_every_candidate_on_its_own_data_and_one_tokenizer(corpora, tmp_path):
    steps = _study(corpora)
    plan = Executor(str(tmp_path / "store")).plan(steps)
    assert all(e.action == "run" for e in plan.entries)
    nodes = {n.step.name: n for n in plan.graph.nodes}
    tokenizer = nodes["cmp/tokenizer"]
    assert tokenizer.step.config.input_paths == (*corpora["plays"].train, *corpora["docs"].train)
    caches = {label: nodes[f"cmp/tokenized/{label}"].output_path for label in corpora}
    runs = [n for n in plan.graph.nodes if n.step.fn is run_candidate]
    per_label = len(runs) // 3
    assert per_label == sum(len(list(TINY.candidates_for_budget(b))) for b in BUDGETS)
    sets = (ValidationSet("plays", caches["plays"]), ValidationSet("docs", caches["docs"]))
    for node in runs:
        config = plan.graph.resolve_config(node)
        label = config.label
        assert config.run_name.startswith(f"cmp-{label}-") and label in node.step.name
        assert config.train.validation == sets
        if label == "mix":
            assert config.train.cache_path is None and config.train.mixture == (
                DataComponent("plays", caches["plays"], 0.7),
                DataComponent("docs", caches["docs"], 0.3))
        else:
            assert config.train.cache_path == caches[label] and config.train.mixture == ()
    shapes = {label: [(c.train.model, c.train.batch_size, c.train.train_steps)
                      for c in (n.step.config for n in runs) if c.label == label]
              for label in ("plays", "docs", "mix")}
    assert shapes["plays"] == shapes["docs"] == shapes["mix"]  # the same candidates
    [fit] = [n for n in plan.graph.nodes if n.step.fn is fit_study]
    assert fit.step.config.labels == ("plays", "docs", "mix")
    assert fit.step.config.metric == "macro_bpb"
    predictions = [n.step.config.label for n in plan.graph.nodes if n.step.fn is run_prediction]
    assert predictions == ["plays", "docs", "mix"]
    assert all(n.step.resumable for n in plan.graph.nodes
               if n.step.fn in (run_candidate, run_prediction))


def test_a_metric_on_one_set_and_named_sets(corpora):
    study = _study(corpora, validation={"shakespeare": "plays"}, metric="shakespeare/loss")
    [fit] = [s for s in study.steps if s.fn is fit_study]
    assert study.fit is fit and fit.config.metric == study.metric == "shakespeare/loss"
    run = next(s for s in study.steps if s.fn is run_candidate)
    assert [v.name for v in run.config.train.validation] == ["shakespeare"]


@pytest.mark.parametrize("kwargs, words", [
    ({"mix": Mixture({"plays": -0.5, "docs": 1.0})}, "corpora['mix'] gives 'plays' the "
     "weight -0.5; weights must be finite numbers of 0 or more"),
    ({"mix": Mixture({"plays": 0.0, "docs": 0.0})}, "corpora['mix']'s weights sum to 0"),
    ({"mix": Mixture({"plays": 0.5, "dogs": 0.5})}, "corpora['mix'] weights 'dogs', which is "
     "no corpus of the study (a mixture weights corpora, not other mixtures); did you mean "
     "'docs'?"),
    ({"metric": "macro_bqb"}, "metric='macro_bqb' is not recorded by the study's runs; did "
     "you mean 'macro_bpb'?"),
    ({"metric": "poems/bpb"}, "metric='poems/bpb' is not recorded by the study's runs"),
    ({"validation": {"held": "poems"}}, "validation['held'] names 'poems', which is no corpus "
     "of the study"),
    ({"train_options": {"compute_dtipe": "float32"}}, "train_options['compute_dtipe'] is not a "
     "TrainLmConfig field; did you mean 'compute_dtype'?"),
    ({"train_options": {"batch_size": 8}}, "train_options['batch_size'] is set by the "
     "candidate"),
    ({"budgets": (1e3,)}, "1e+03 FLOPs with CompletedAdamhHeuristic"),
    ({"baseline": "poems"}, "baseline='poems' is no label of the study"),
    ({"replicates": -1}, "replicates=-1"),
])
def test_bad_input_is_refused_at_planning_time_in_one_line(corpora, kwargs, words):
    kwargs = dict(kwargs)
    mixture = kwargs.pop("mix", Mixture({"plays": 0.7, "docs": 0.3}))
    budgets = kwargs.pop("budgets", BUDGETS)
    options = {"tokenizer_vocab_size": VOCAB, "predict_budget": HELD_OUT,
               **kwargs}
    with pytest.raises((StudyInputError, TrainOptionsError, ValueError)) as info:
        isoflop_study("cmp", {**corpora, "mix": mixture}, budgets, TINY, **options)
    message = str(info.value)
    assert "\n" not in message and words in message, message
    if budgets != BUDGETS:
        assert "label(s) plays, docs, mix would have no runs there" in message


def test_the_one_builder_serves_train_step_and_checks_options(tmp_path):
    from marin.execution import ExecutorStep

    [candidate, *_] = TINY.candidates_for_budget(BUDGETS[0])
    cache = ExecutorStep("tok", fit_study, None)  # any step stands for the cache here
    step = train_step("train/one", cache, candidate, eval_every=3)
    assert step.resumes and step.resumable is None  # train_lm declares it
    direct = training_config(candidate, "/some/cache", {"eval_every": 3})
    assert step.config.eval_every == direct.eval_every == 3
    assert (step.config.model, step.config.batch_size, step.config.optimizer) == \
        (direct.model, direct.batch_size, direct.optimizer) == \
        (candidate.model_config, candidate.batch_size, candidate.optimizer)
    with pytest.raises(TrainOptionsError, match="did you mean 'eval_every'"):
        train_step("train/two", cache, candidate, eval_evry=3)
