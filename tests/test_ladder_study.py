"""Ladder studies (``isoflop_study(schedule="cooldown")``): the plan of stable runs and
cooldown branches, their learning rates against the from-scratch schedule, the FLOPs they
save, the provenance the fit and the report keep, and a tiny ladder end to end."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

from marin.execution import Executor
from marin.execution.step import OutputPathOf
from marin.scaling_laws.rows import row_from_columns, rows_csv
from marin.scaling_laws.study import (
    StudyCorpus,
    StudyInputError,
    isoflop_study,
    ladder_flops,
    load_study,
    run_candidate,
)
from marin.scaling_laws.study.artifacts import StudyResult
from marin.scaling_laws.study.configs import study_candidates
from marin.scaling_laws.study.report import trained_from
from marin.training.branching import check_branch, kept_steps
from marin.training.hyperparameters import schedule_steps
from marin.training.optimizer import Optimizer, wsd_schedule
from marin.training.summary import RunSummary
from tests.helpers.studies import TINY, VOCAB
from tests.helpers.studies import plays_corpus as _corpus

LADDER_BUDGETS = (6e7, 1.2e8, 2.4e8, 4.8e8)  # each a factor 2 above the last
REMOTE = StudyCorpus(train=("gs://bucket/train",), validation=("gs://bucket/valid",))
# the batch grows with the tokens: a shape's points are at several batch sizes from scratch
GROWING = TINY.with_overrides(target_steps=100, max_batch_size=64)


def _ladder(heuristic=TINY, budgets=LADDER_BUDGETS, corpus=REMOTE, **kw):
    return isoflop_study("ladder", corpus, budgets, heuristic, tokenizer_vocab_size=VOCAB,
                         schedule="cooldown", train_options={"compute_dtype": "float32",
                                                             "eval_batches": 2}, **kw)


def _shape(candidate):
    return candidate.model_config.hidden_dim, candidate.model_config.num_layers


LONG_BUDGETS = tuple(100 * b for b in LADDER_BUDGETS)  # hundreds to thousands of steps


@pytest.mark.parametrize(("heuristic", "budgets"), [
    (TINY, LADDER_BUDGETS), (GROWING, LADDER_BUDGETS), (TINY, LONG_BUDGETS)],
    ids=["fixed-batch", "growing-batch", "long-runs"])
def test_a_ladder_is_one_stable_run_per_shape_and_a_valid_cooldown_per_point(heuristic,
                                                                            budgets):
    study = _ladder(heuristic, budgets)
    candidates = study_candidates(heuristic, budgets)
    shapes: dict[tuple[int, int], list] = {}
    for group in candidates.values():
        for c in group:
            shapes.setdefault(_shape(c), []).append(c)
    stable = {s.name: s for s in study.stable_runs}
    assert sorted(stable) == sorted(f"ladder/stable/h{h}-l{n}" for h, n in shapes)
    assert len(study.runs) == sum(len(g) for g in candidates.values())
    assert study.schedule == "cooldown" and all(s in study.steps for s in study.stable_runs)
    if heuristic is GROWING:  # the batch does differ within a shape, from scratch
        assert any(len({c.batch_size for c in found}) > 1 for found in shapes.values())

    by_run = {s.config.run_name: s for s in study.runs}
    for (hidden, layers), found in shapes.items():
        parent = stable[f"ladder/stable/h{hidden}-l{layers}"].config
        longest = max(found, key=lambda c: c.tokens)
        assert parent.batch_size == longest.batch_size
        assert parent.optimizer.decay_fraction == 0.0
        assert parent.optimizer.learning_rate == longest.optimizer.learning_rate
        # the stable run saves and keeps exactly its branch points, nothing else
        assert parent.checkpoint_every == 0 and parent.checkpoint_keep_every == 0
        branch_points = []
        for c in found:
            step = by_run[f"ladder-{_budget(c)}-h{hidden}-l{layers}"]
            train = step.config.train
            n = round(c.tokens / (longest.batch_size * c.seq_len))
            k = train.init_from.step
            assert (train.train_steps, train.batch_size) == (n, longest.batch_size)
            assert step.config.budget == c.budget and step.config.group == f"ladder-{_budget(c)}"
            assert k == round(0.8 * n)
            assert isinstance(train.init_from.run, OutputPathOf)
            assert train.init_from.run.step.config == parent
            assert train.optimizer.decay_shape == "1-sqrt"
            check_branch(train)  # valid: kept, in the plateau, the parent's model and data
            assert k in kept_steps(parent)
            branch_points.append(k)
        assert parent.train_steps == max(branch_points)
        assert parent.checkpoint_at == tuple(sorted(set(branch_points)))
        assert kept_steps(parent) == sorted(set(branch_points))
        warmup, plateau_end, _ = schedule_steps(parent.train_steps,
                                                parent.optimizer.warmup_fraction, 0.0)
        assert warmup <= min(branch_points) and plateau_end == parent.train_steps


def _budget(candidate) -> str:
    from marin.scaling_laws.study import budget_tag

    return budget_tag(candidate.budget)


def test_every_branch_has_the_learning_rates_of_a_scratch_run_decaying_from_its_branch_point():
    study = _ladder(budgets=LADDER_BUDGETS[:2])
    params = {"w": jnp.zeros((2, 2))}
    for step in study.runs:
        train = step.config.train
        parent = train.init_from.run.step.config
        n, k = train.train_steps, train.init_from.step
        before = Optimizer.of(parent.optimizer, parent.train_steps, params)
        before = before.schedule(before.values(parent.optimizer, parent.train_steps))
        after = Optimizer.of(train.optimizer, n, params, decay_from=k)
        after = after.schedule(after.values(train.optimizer, n, decay_from=k))
        ladder = [before(t) if t < k else after(t) for t in range(n + 1)]
        # from scratch: n steps, the stable run's warmup, the decay from k, of 1-sqrt
        warmup = schedule_steps(parent.train_steps, parent.optimizer.warmup_fraction, 0.0)[0]
        wf, df = (warmup + 0.5) / n, (n - k + 0.5) / n
        assert schedule_steps(n, wf, df) == (warmup, k, n - k)
        scratch = wsd_schedule(jnp.float32(train.optimizer.learning_rate), n, wf, df, "1-sqrt")
        np.testing.assert_array_equal(np.array(ladder), np.array([scratch(t)
                                                                  for t in range(n + 1)]))
        assert float(ladder[-1]) == 0.0
        assert float(ladder[k]) == float(np.float32(train.optimizer.learning_rate))
        # the warmup is no longer than the point's own from scratch
        assert warmup <= schedule_steps(n, 0.1, 0.2)[0]


def test_a_ladder_of_budgets_a_factor_2_apart_costs_at_most_065_of_its_points_from_scratch():
    study = _ladder()
    ladder, scratch = ladder_flops(study)
    candidates = [c for g in study_candidates(TINY, LADDER_BUDGETS).values() for c in g]
    # TINY's batch is fixed: every point has its candidate's steps, so scratch is their sum
    assert scratch == pytest.approx(sum(c.flops for c in candidates), rel=1e-9)
    expected = 0.0
    for shape in {_shape(c) for c in candidates}:
        found = [c for c in candidates if _shape(c) == shape]
        per_step = found[0].flops / found[0].train_steps
        ks = {c.train_steps: round(0.8 * c.train_steps) for c in found}  # g is 1 here
        expected += per_step * (max(ks.values()) + sum(n - k for n, k in ks.items()))
    assert ladder == pytest.approx(expected, rel=1e-9)
    assert ladder / scratch <= 0.65
    assert f"{ladder / scratch:.2f} x the" in study.fit.description
    plain = isoflop_study("ladder", REMOTE, LADDER_BUDGETS, TINY, tokenizer_vocab_size=VOCAB)
    assert ladder_flops(plain)[0] == ladder_flops(plain)[1] == pytest.approx(scratch)


def test_replicates_branch_from_a_stable_run_of_their_own_seed():
    study = _ladder(budgets=LADDER_BUDGETS[:2], replicates=1)
    replicas = [s for s in study.runs if s.config.replicate_of is not None]
    assert len(replicas) == 2
    for step in replicas:
        parent = step.config.train.init_from.run.step
        assert parent.name.endswith("-s1") and parent.config.seed == 1
        assert step.config.train.seed == 1
        original = next(s for s in study.runs if s.config.run_name == step.config.replicate_of)
        assert original.config.train.init_from.step == step.config.train.init_from.step
        assert original.config.train.init_from.run.step.config.seed == 0


def test_the_default_schedule_plans_the_scratch_study_unchanged_and_bad_input_is_refused():
    default = isoflop_study("s", REMOTE, LADDER_BUDGETS[:2], TINY, tokenizer_vocab_size=VOCAB)
    scratch = isoflop_study("s", REMOTE, LADDER_BUDGETS[:2], TINY, tokenizer_vocab_size=VOCAB,
                            schedule="scratch")
    def keys(study):
        return {n.name: n.hash for n in Executor("/any/prefix").plan(study).graph.nodes}

    assert keys(default) == keys(scratch) and default.stable_runs == ()
    assert all(s.config.train.init_from is None for s in default.runs)
    # held-out runs: the heuristic's schedule from scratch; in a ladder, its cooldown
    held = dict(predict_budget=(4.8e8, 9.6e8))
    for schedule, cooldown in (("scratch", None), ("cooldown", ("1-sqrt", 0.25))):
        study = isoflop_study("s", REMOTE, LADDER_BUDGETS[:2], TINY, tokenizer_vocab_size=VOCAB,
                              schedule=schedule, cooldown_fraction=0.25, **held)
        checks = [*study.predictions.values(), *study.further_predictions["default"]]
        assert len(checks) == 2 and all(s.config.cooldown == cooldown for s in checks)
    with pytest.raises(StudyInputError, match=r"schedule='warm'.*'scratch', 'cooldown'"):
        isoflop_study("s", REMOTE, LADDER_BUDGETS[:2], TINY, schedule="warm")
    for bad in (0, 1, 1.5):
        with pytest.raises(StudyInputError, match=f"cooldown_fraction={bad}"):
            _ladder(budgets=LADDER_BUDGETS[:2], cooldown_fraction=bad)
    with pytest.raises(StudyInputError, match="no cooldown"):
        _ladder(budgets=LADDER_BUDGETS[:2], cooldown_fraction=0.01)


def _summary(**kw) -> RunSummary:
    return RunSummary(params=100, tokens=4000, flops=kw.pop("flops", 6e5), steps=kw.pop(
        "steps", 10), batch_size=4, seq_len=100, train_loss=3.0, final_step_loss=3.0,
        eval_loss=3.1, macro_loss=3.1, **kw)


def test_a_branchs_row_is_its_point_and_names_its_stable_run_old_tables_read_as_scratch():
    from marin.scaling_laws.run_status import RunStatus
    from marin.scaling_laws.study import RunOutcome

    branch = _summary(flops=2e5, parent_run="/s/ladder/stable/h8-l1-1a2b", branch_step=8)
    outcome = RunOutcome(run_name="r", group="g", label="default", budget=1e6,
                         status=RunStatus.OK, reason=None, hidden_dim=8, num_layers=1,
                         summary=branch)
    row = outcome.row("macro_loss")
    # its own 2 steps cost 2e5, so each step 1e5: the point's 10 steps are 1e6
    assert row.flops == pytest.approx(1e6) and row.branch_step == 8
    assert row.parent_run == "/s/ladder/stable/h8-l1-1a2b"
    assert trained_from(row) == "cooldown of h8-l1-1a2b from step 8"
    scratch_row = RunOutcome(**{**outcome.__dict__, "summary": _summary()}).row("macro_loss")
    assert scratch_row.flops == 6e5 and trained_from(scratch_row) == "from scratch"
    for r in (row, scratch_row):
        [back] = [row_from_columns(c, "runs.csv", "row 1")
                  for c in csv.DictReader(rows_csv([r]).splitlines())]
        assert back == r
    old = {"run": "r", "params": "100", "tokens": "4000", "flops": "6e5", "loss": "3"}
    assert row_from_columns(old, "old.csv", "row 1").parent_run is None
    # a study.json of the previous version still reads, its runs from scratch
    result = StudyResult(title="t", metric="loss", labels=("default",), fits={},
                         runs=(scratch_row,))
    data = {**result.to_json(), "version": 3}
    data["runs"] = [{k: v for k, v in r.items() if k not in ("parent_run", "branch_step")}
                    for r in data["runs"]]
    assert StudyResult.from_json(data).runs == (scratch_row,)


@pytest.mark.slow
def test_a_tiny_ladder_runs_end_to_end_and_the_fit_reads_its_cooldowns(tmp_path):
    corpus = _corpus(tmp_path / "data", count=3)
    study = _ladder(TINY.with_overrides(max_hidden=16), LADDER_BUDGETS[:2], corpus,
                    bootstrap=10)
    prefix = str(tmp_path / "store")
    result = Executor(prefix, max_concurrent=2).run(study)
    assert result.ok, result.summary()
    found = load_study(result)
    paths = {n.step.name: n.output_path for n in result.plan.graph.nodes}
    stable_paths = {paths[s.name] for s in study.stable_runs}
    assert len(found.runs) == len(study.runs) == 4
    for row in found.runs:
        step = next(s for s in study.runs if s.config.run_name == row.run)
        assert row.status == "ok" and math.isfinite(row.loss)
        assert row.parent_run in stable_paths
        assert row.branch_step == step.config.train.init_from.step
        train = step.config.train
        per_step = train.batch_size * train.model.seq_len \
            * train.model.training_flops_per_token()
        assert row.flops == pytest.approx(per_step * train.train_steps, rel=1e-6)
    report = (Path(paths[study.report.name]) / "report.md").read_text()
    assert "cooldown of " in report and "from scratch" not in report
    assert [s for s in study.steps if s.fn is run_candidate] == list(study.runs)
