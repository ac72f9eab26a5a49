"""The IsoFLOP study graph: a reduced study end to end, the 3e19 plan offline, the fit's
handling of failed runs and thin budgets, and reruns."""

from __future__ import annotations

import csv
import datetime
import io
import json
import math
import socket
from pathlib import Path

import numpy as np
import pytest

from marin.execution import Executor, executor_main
from marin.execution.experiments import load_experiment
from marin.models.config import TransformerConfig
from marin.scaling_laws.candidates import nearest_candidate
from marin.scaling_laws.isoflop_analysis import DEFAULT_BUDGETS
from marin.scaling_laws.scaling_heuristics import CompletedAdamhHeuristic
from marin.scaling_laws.study import (
    CandidateRunConfig,
    IsoFlopStudy,
    RunOutcome,
    StudyCorpus,
    StudyFitConfig,
    StudyReportConfig,
    StudyRun,
    budget_tag,
    fit_study,
    isoflop_study,
    load_study,
    next_tiers,
    print_study_summary,
    run_candidate,
    run_prediction,
    study_outputs,
    write_study_report,
)
from marin.training.config import TrainLmConfig
from marin.training.summary import RunSummary
from tests.conftest import ROOT
from tests.helpers.studies import BUDGETS, HELD_OUT, TINY, VOCAB
from tests.helpers.studies import plays_corpus as _corpus


def _study(corpus: StudyCorpus, heuristic=TINY, replicates: int = 1) -> IsoFlopStudy:
    return isoflop_study("study", corpus, BUDGETS, heuristic, tokenizer_vocab_size=VOCAB,
                         predict_budget=HELD_OUT, bootstrap=10, replicates=replicates,
                         train_options={"compute_dtype": "float32", "eval_batches": 2})


@pytest.mark.slow
def test_a_reduced_study_runs_end_to_end_and_its_analysis_matches_the_runs(tmp_path):
    corpus = _corpus(tmp_path / "data", count=3)
    steps = _study(corpus)
    prefix = str(tmp_path / "store")
    result = Executor(prefix, max_concurrent=2).run(steps)
    assert result.ok, result.summary()
    out = study_outputs(result.plan.graph)
    study = load_study(result)
    assert study.labels == ("default",) and study.metric == "macro_bpb"
    assert load_study(steps, prefix).to_json() == study.to_json() == \
        load_study(str(tmp_path / "store" / "study")).to_json()

    # the summary comes from this result; a dry run's plan prints none (not the older run's)
    summary = io.StringIO()
    print_study_summary(result, file=summary)
    assert f"report: {out.report}/report.md" in summary.getvalue()
    after_dry_run = io.StringIO()
    print_study_summary(Executor(prefix).plan(steps), file=after_dry_run)
    assert after_dry_run.getvalue() == ""

    # runs.csv holds every run, with the figures of its own summary.json (bits per byte);
    # the middle candidate of each budget has a seed replicate
    train = [s for s in steps.steps if s.fn is run_candidate]
    assert len(train) == sum(len(list(TINY.candidates_for_budget(b))) + 1 for b in BUDGETS) == 8
    replicas = [s.config for s in train if s.config.replicate_of is not None]
    assert [(c.budget, c.train.model.hidden_dim, c.train.seed) for c in replicas] == \
        [(b, 16, 1) for b in BUDGETS]
    with open(Path(out.fit) / "runs.csv") as f:
        rows = {r["run"]: r for r in csv.DictReader(f)}
    assert set(rows) == {s.config.run_name for s in train} == {r.run for r in study.runs}
    graph_paths = {n.step.config.run_name: n.output_path for n in
                   Executor(prefix).plan(steps).graph.nodes if n.step.fn is run_candidate}
    for name, path in graph_paths.items():
        stored = json.loads((Path(path) / "summary.json").read_text())
        row = rows[name]
        assert row["status"] == "ok"
        assert float(row["params"]) == stored["params"]
        assert float(row["tokens"]) == stored["tokens"]
        assert float(row["loss"]) == pytest.approx(stored["eval/bpb"], rel=1e-12)
        assert float(row["first_eval_loss"]) > float(row["loss"])  # the metric fell

    # every budget: the parabola through its runs (three points: the exact parabola)
    fit = study.fits["default"]
    assert fit.used == len(rows) - len(replicas) and fit.excluded == ()
    assert fit.budgets_not_fitted == ()
    assert [b.budget for b in fit.budgets] == list(BUDGETS)
    for b in fit.budgets:
        runs = [r for r in rows.values() if float(r["budget"]) == b.budget
                and not r["replicate_of"]]
        x = np.log([float(r["tokens"]) for r in runs])
        y = np.array([float(r["loss"]) for r in runs])
        a, linear, _ = np.polyfit(x, y, 2)
        assert b.points == len(runs) == 3
        assert math.log(b.optimal_tokens) == pytest.approx(-linear / (2 * a), rel=1e-6)
    assert fit.approach2 is not None and fit.approach3 is not None
    # the noise: the spread of each replicate pair (n - 1 = 1 degree of freedom per pair)
    pairs = [(float(rows[c.replicate_of]["loss"]), float(rows[r.config.run_name]["loss"]))
             for r, c in ((s, s.config) for s in train if s.config.replicate_of)]
    assert fit.noise.source == "replicates" and fit.noise.dof == len(pairs)
    assert fit.noise.std == pytest.approx(
        math.sqrt(sum((a - b) ** 2 / 2 for a, b in pairs) / len(pairs)), rel=1e-9)

    # the checked prediction trained the heuristic's candidate nearest the predicted size
    prediction = study.predictions["default"]
    report = (Path(out.report) / "report.md").read_text()
    assert prediction.status == "ok" and prediction.candidate is not None
    source, optimum = prediction.optimum.best
    assert source == prediction.size_from == "approach2"
    assert optimum.params == pytest.approx(fit.approach2.params.predict(HELD_OUT))
    nearest = nearest_candidate(list(TINY.candidates_for_budget(HELD_OUT)), optimum.params)
    assert prediction.candidate.params == nearest.params
    predicted_run = Path(dict(out.predictions)["default"]) / "run"
    stored = json.loads((predicted_run / "summary.json").read_text())
    assert prediction.achieved_loss == pytest.approx(stored["eval/bpb"])
    assert prediction.error_percent == pytest.approx(
        100 * (prediction.predicted_loss - stored["eval/bpb"]) / stored["eval/bpb"])
    low, high = prediction.predicted_loss_interval
    fit_low, fit_high = prediction.fit_interval
    assert low < fit_low and fit_high < high  # the run-to-run noise widens the fit's spread
    assert prediction.within_interval == (low <= prediction.achieved_loss <= high)
    # pre-registered: written from this fit before its run's first step (the trainer's clock)
    assert prediction.fit_key == Path(out.fit).name
    records = [json.loads(line) for line in
               (predicted_run / "metrics.jsonl").read_text().splitlines()]
    first_step = next(r for r in records if "wall_time" in r)
    registered = datetime.datetime.fromisoformat(prediction.registered_at).timestamp()
    assert registered < datetime.datetime.fromisoformat(prediction.run_started_at).timestamp() \
        < first_step["wall_time"]
    # two budgets leave no backtest (one left out leaves a single budget): no model error
    assert fit.extrapolations == () and "2 budget(s)" in fit.why_no_extrapolation
    assert study.model_error is None and prediction.interval_terms == ("fit", "noise")
    assert "no model error (no backtest could be made" in summary.getvalue()
    assert f"error {prediction.error_percent:+.2f}%" in report
    assert "estimated from seed replicates of the same candidates" in report
    for name in rows:
        assert name in report
    for stem in ("isoflops", "scaling", "prediction"):
        assert f"({stem}.png)" in report and (Path(out.report) / f"{stem}.html").exists()

    # a rerun skips everything; one more candidate re-runs the fit and what follows it only
    again = Executor(prefix, max_concurrent=2).run(steps)
    assert again.by_state() == {"skipped": len(again.steps)}
    wider_heuristic = TINY.with_overrides(max_hidden=32)
    wider = _study(corpus, wider_heuristic)
    plan = {e.name: e for e in Executor(prefix).plan(wider).entries}
    assert plan["study/fit"].action == "run" and "config changed" in plan["study/fit"].reason
    new_runs = [e for e in plan.values() if e.action == "run" and e.node.step.fn is run_candidate]
    added = {s.config.run_name for s in wider.steps if s.fn is run_candidate} - set(rows)
    assert any("-h32-" in name for name in added)
    assert {e.node.step.config.run_name for e in new_runs} == added
    assert {e.name for e in plan.values() if e.action == "run"} == \
        {e.name for e in new_runs} | {"study/fit", "study/prediction", "study/report"}


def _synthetic_run(folder: Path, name: str, budget: float, params: float, loss: float,
                   status: str = "ok", reason: str | None = None) -> StudyRun:
    """A run's outcome.json as a candidate step writes it, with figures drawn from a law."""
    folder.mkdir(parents=True)
    tokens = budget / (6 * params)
    summary = None if status != "ok" else RunSummary(
        params=int(params), tokens=int(tokens), flops=budget, steps=10, batch_size=4,
        seq_len=16, train_loss=loss + 0.01, final_step_loss=loss + 0.01, eval_loss=loss,
        eval_bpb=loss / 2, macro_loss=loss, macro_bpb=loss / 2)
    outcome = RunOutcome(run_name=name, group=f"g-{budget_tag(budget)}", label="default",
                         budget=budget, status=status, reason=reason, hidden_dim=64,
                         num_layers=2, summary=summary,
                         curves={"loss": (loss + 1, loss)} if summary else {})
    (folder / "outcome.json").write_text(json.dumps(outcome.to_json()))
    return StudyRun(name, f"g-{budget_tag(budget)}", budget, str(folder))


def test_failed_runs_are_excluded_and_named_and_thin_budgets_are_reported(tmp_path):
    """Runs drawn from a known L(N, D) = E + A/N^a + B/D^b: one diverged, one budget left
    with two runs. The fit excludes and names them, and the per-budget optima it finds
    agree with the law's own optimum."""
    E, A, B, alpha, beta = 1.7, 400.0, 1200.0, 0.34, 0.28

    def law(n: float, d: float) -> float:
        return E + A / n**alpha + B / d**beta

    runs = []
    for budget in (1e17, 1e18, 1e19):
        for i, n in enumerate(np.geomspace(3e6, 3e8, 7) * (budget / 1e17) ** 0.5):
            runs.append(_synthetic_run(tmp_path / f"r{budget:.0e}-{i}", f"run-{budget:.0e}-{i}",
                                       budget, float(n), law(n, budget / (6 * n))))
    runs.append(_synthetic_run(tmp_path / "diverged", "run-diverged", 1e18, 1e7, math.nan,
                               "diverged", "the loss became nan at step 12"))
    for i, n in enumerate((1e7, 1e8)):
        runs.append(_synthetic_run(tmp_path / f"thin-{i}", f"run-thin-{i}", 1e20, n,
                                   law(n, 1e20 / (6 * n))))
    fits = fit_study(StudyFitConfig(runs=tuple(runs), targets=next_tiers(1e19, 2),
                                    metric="loss", bootstrap=10,
                                    output_path=str(tmp_path / "fit")))
    fit = fits.fits["default"]

    assert fit.used == len(runs) - 1
    assert [(e.run, e.budget, e.status, e.reason) for e in fit.excluded] == [
        ("run-diverged", 1e18, "diverged", "the loss became nan at step 12")]
    assert [b.budget for b in fit.budgets_not_fitted] == [1e20]
    assert "2 usable run(s)" in fit.budgets_not_fitted[0].reason
    g = (alpha * A / (beta * B)) ** (1 / (alpha + beta))
    for b in fit.budgets:
        n_true = g * (b.budget / 6) ** (beta / (alpha + beta))
        assert b.optimal_params == pytest.approx(n_true, rel=0.15)
    assert fit.approach2.params.exponent == pytest.approx(beta / (alpha + beta), abs=0.03)
    assert fit.approach3.alpha == pytest.approx(alpha, rel=0.05)
    assert [p.budget for p in fit.predictions] == [3e19, 1e20]

    report = write_study_report(StudyReportConfig(
        title="synthetic", fit_path=str(tmp_path / "fit"), output_path=str(tmp_path / "rep")))
    text = Path(report).read_text()
    assert "`run-diverged` (1e+18 FLOPs): diverged: the loss became nan at step 12" in text
    assert "| 1e+20 | 2 | not fitted: 2 usable run(s)" in text
    with open(tmp_path / "fit" / "runs.csv") as f:
        statuses = {r["run"]: r["status"] for r in csv.DictReader(f)}
    assert statuses["run-diverged"] == "diverged" and statuses["run-thin-0"] == "ok"


def test_a_candidate_that_cannot_train_finishes_its_step_with_the_reason(tmp_path):
    """A model whose vocabulary is smaller than the token cache's is a candidate-level
    failure: recorded in outcome.json, not raised, so the fit can name it."""
    from marin.processing.tokenize import TokenizeConfig, tokenize
    from marin.training.hyperparameters import OptimizerHyperparameters

    corpus = _corpus(tmp_path / "data", count=2)
    tokenize(TokenizeConfig(train_paths=corpus.train, validation_paths=corpus.validation,
                            tokenizer="gpt2", cache_path=str(tmp_path / "cache"),
                            num_processes=1))
    train = TrainLmConfig(
        cache_path=str(tmp_path / "cache"),
        model=TransformerConfig(hidden_dim=16, intermediate_dim=32, num_layers=1, num_heads=2,
                                num_kv_heads=2, vocab_size=VOCAB, seq_len=32),
        batch_size=8, train_steps=5, optimizer=OptimizerHyperparameters(
            learning_rate=0.01, adam_learning_rate=0.01, epsilon=1e-8, beta1=0.9, beta2=0.95),
        hardware="cpu", output_path=str(tmp_path / "run"))
    config = CandidateRunConfig(train=train, run_name="too-small-vocab", group="g",
                                label="default", budget=1e9)
    outcome = run_candidate(config)
    assert outcome.status == "invalid_config"
    assert "vocab_size=300" in outcome.reason
    stored = json.loads((tmp_path / "run" / "outcome.json").read_text())
    assert stored["status"] == "invalid_config" and stored["run_name"] == "too-small-vocab"


def test_the_3e19_study_is_planned_offline_with_the_heuristics_candidates(tmp_path, monkeypatch,
                                                                          capsys):
    def no_network(*args, **kwargs):
        raise AssertionError("the dry run tried to open a network connection")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    module = load_experiment(str(ROOT / "experiments" / "isoflop_3e19.py"))
    options = module.StudyOptions()
    steps = module.build(options)
    plan = Executor(str(tmp_path / "store")).plan(steps)
    assert all(e.action == "run" for e in plan.entries)

    # the experiment's defaults: 8 x gpu-h100
    heuristic = CompletedAdamhHeuristic(vocab_size=50257, hardware="gpu-h100", devices=8)
    expected = {b: list(heuristic.candidates_for_budget(b)) for b in DEFAULT_BUDGETS[:4]}
    assert DEFAULT_BUDGETS[3] == 3e19 and max(expected) == 3e19
    planned: dict[float, list] = {}
    for step in steps.steps:
        if step.fn is run_candidate:
            planned.setdefault(step.config.budget, []).append(step)
    for budget, candidates in expected.items():
        got = [(s.config.train.model, s.config.train.batch_size, s.config.train.train_steps,
                s.config.train.optimizer) for s in planned[budget]]
        assert got == [(c.model_config, c.batch_size, c.train_steps, c.optimizer)
                       for c in candidates]
        assert all(s.config.train.model.vocab_size == 50257 for s in planned[budget])
    every = [c for cs in expected.values() for c in cs]
    totals = plan.totals()
    assert totals["estimated_flops"] == pytest.approx(sum(c.flops for c in every)
                                                      + DEFAULT_BUDGETS[4])
    prediction = next(s for s in steps.steps if s.fn is run_prediction)
    assert totals["estimated_device_hours"] == pytest.approx(
        sum(c.estimated_device_hours for c in every) + prediction.estimate.device_hours)

    printed = module.print_candidates(options)
    assert printed["runs"] == len(every)
    assert printed["flops"] == pytest.approx(sum(c.flops for c in every))
    assert printed["device_hours"] == pytest.approx(sum(c.estimated_device_hours for c in every))
    text = capsys.readouterr().out
    assert f"{len(every)} runs" in text and "device-hours on gpu-h100" in text
    tpu = module.print_candidates(module.StudyOptions(hardware="tpu-v5p"))
    assert tpu["device_hours"] > printed["device_hours"]  # v5p's peak is below H100's


def test_a_real_3e19_run_here_refuses_in_one_line_unless_told_yes(tmp_path, capsys):
    module = load_experiment(str(ROOT / "experiments" / "isoflop_3e19.py"))
    with pytest.raises(SystemExit) as exit_info:
        executor_main(module.experiment, args=["--prefix", str(tmp_path / "store")])
    assert exit_info.value.code == 2
    message = capsys.readouterr().err.strip()
    assert len(message.splitlines()) == 1
    assert "refusing to start" in message and "device-hours" in message
    assert "--backend ray" in message and "--yes" in message
    assert not (tmp_path / "store").exists()
    assert module.local_refusal(module.StudyOptions(yes=True)) is None
    assert module.local_refusal(module.StudyOptions(max_local_device_hours=1e12)) is None


def test_marin_executor_dry_run_prints_the_candidates_then_the_plan(tmp_path, capsys,
                                                                     monkeypatch):
    from marin.cli import main

    monkeypatch.chdir(tmp_path)
    code = main(["executor", "--dry-run", "--prefix", str(tmp_path / "store"),
                 str(ROOT / "experiments" / "isoflop_3e19.py")])
    out = capsys.readouterr().out
    assert code == 0
    runs = sum(len(list(CompletedAdamhHeuristic(vocab_size=50257).candidates_for_budget(b)))
               for b in DEFAULT_BUDGETS[:4])
    assert f"totals: {runs} runs" in out and "candidates on 8 x gpu-h100" in out
    assert out.index("dry run:") < out.index("candidates on")  # the plan, then the table
    assert not (tmp_path / "store").exists()


def test_the_study_steps_that_build_caches_or_train_keep_an_attempts_work(tmp_path):
    """A killed tokenize keeps its finished ranges: its step is resumable, like the runs'."""
    from marin.execution.graph import dependencies_of

    seen, todo = {}, list(_study(_corpus(tmp_path)).steps)
    while todo:
        step = todo.pop()
        if step.name not in seen:
            seen[step.name] = step
            todo.extend(dependencies_of(step))
    assert seen["study/tokenized"].resumes
