"""The ladder checked against scratch: one reduced study of the main job's kind (four plays to
train on, a 300-token BPE, the main job's heuristic on tiny models, four budgets a factor of
2 apart, one seed replicate per budget, a held-out budget 2x past) trained from scratch and
as a ladder (``schedule="cooldown"``, ``cooldown_fraction=0.2``) in one prefix, and the four
checks (``tests/helpers/ladder_check.py`` computes the figures; ``bench/bench_ladder.py``
gives them on the main job's own data):

* (a) every point at equal (N, D) agrees within 2 standard deviations of the run-to-run
  noise that the replicates measure;
* (b) the N_opt exponent from the ladder lies within one standard error of the scratch
  sweep's;
* (c) the held-out predictions agree within 1%;
* (d) the ladder's training FLOPs, summed from the summaries of the steps the executor ran,
  are at most 65% of the scratch sweep's.

The heuristic's hyperparameters are those of one horizon at every point
(``FixedHorizon``): the main job's tie them to each point's tokens (learning rates as
``T^-0.3`` and ``T^-0.5``, Adam's epsilon as ``T^0.5``), which no ladder can follow, since a
shape's branches share their stable run's optimizer state and so the hyperparameters of the
shape's longest point. With them, a reduced study of this kind fails all four checks, the
gap of a point growing with its shape's horizon over its own tokens (docs/scaling-laws.md,
"The ladder against scratch"); this test checks the ladder itself: its warmup, stable runs,
branch points and cooldowns against runs from scratch.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from experiments import isoflop_tiny
from marin.scaling_laws.scaling_heuristics import ProportionalDepthHeuristic
from marin.scaling_laws.study import isoflop_study, ladder_flops
from marin.training.hyperparameters import OptimizerHyperparameters
from tests.helpers.ladder_check import ladder_check, run_schedules
from tests.helpers.studies import plays_corpus

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class FixedHorizon(ProportionalDepthHeuristic):
    """The main job's heuristic with every point's hyperparameters those of a run of
    ``reference_tokens``, whatever its own tokens."""

    def optimizer_for(self, batch_size: int, tokens: float) -> OptimizerHyperparameters:
        return super().optimizer_for(batch_size, self.reference_tokens)


VOCAB = 300
BUDGETS = (1.25e9, 2.5e9, 5e9, 1e10)  # each a factor of 2 above the last
HELD_OUT = 2e10
# on shorter sequences and larger batches, hidden 4, 8 and 12 (one layer) at every budget
# (so each shape's ladder spans all four), 15 to 462 steps of 64 sequences
HEURISTIC = FixedHorizon(**{f: getattr(isoflop_tiny.HEURISTIC, f)
                            for f in isoflop_tiny.HEURISTIC.__dataclass_fields__}
                         ).with_overrides(
    vocab_size=VOCAB, seq_len=32, min_hidden=4, max_hidden=12, min_batch_size=64,
    max_batch_size=64, min_train_steps=12, max_tokens_per_param=400, reference_batch_size=64,
    reference_tokens=1e5)


@pytest.fixture(scope="module")
def schedules(tmp_path_factory):
    root = tmp_path_factory.mktemp("ladder-vs-scratch")
    corpus = plays_corpus(root / "data", count=5)

    def build(schedule: str):
        return isoflop_study("ladder-check", corpus, BUDGETS, HEURISTIC,
                             tokenizer_vocab_size=VOCAB, predict_budget=HELD_OUT, bootstrap=20,
                             replicates=1, schedule=schedule, cooldown_fraction=0.2,
                             train_options={"compute_dtype": "float32", "eval_batches": 2,
                                            "log_every": 1000})

    scratch, ladder, _ = run_schedules(str(root / "store"), build)
    return scratch, ladder, ladder_check(scratch, ladder)


def test_both_studies_share_their_tokenizer_and_caches_and_train_the_same_points(schedules):
    scratch, ladder, check = schedules
    # the shared steps ran before: neither schedule's invocation ran them again
    for run in (scratch, ladder):
        ran = {o.name for o in run.result.steps if o.state == "succeeded"}
        assert not ran & {s.name for s in run.study.steps if s.fn.__name__ in
                          ("train_tokenizer", "tokenize")}
    assert ladder.study.tokenizer.name == scratch.study.tokenizer.name
    named = {(r.label, r.run) for r in scratch.found.runs}
    assert named == {(r.label, r.run) for r in ladder.found.runs}
    assert all(r.parent_run is None for r in scratch.found.runs)
    assert all(r.parent_run is not None and r.branch_step for r in ladder.found.runs)
    assert len(check.points) == sum(r.replicate_of is None for r in scratch.found.runs) == 12


def test_a_points_at_equal_n_and_d_agree_within_two_standard_deviations_of_the_noise(
        schedules):
    _, _, check = schedules
    assert check.noise_source == "seed replicates" and check.noise_dof == 8  # 4 per study
    assert check.noise > 0
    for point in check.points:
        assert abs(point.ladder - point.scratch) <= 2 * check.noise, (point, check.table())


def test_b_the_ladders_n_opt_exponent_lies_within_one_standard_error_of_scratchs(schedules):
    _, _, check = schedules
    for label, (scratch, se, ladder) in check.exponents.items():
        assert 0 < se < float("inf"), (label, scratch, se)
        assert abs(ladder - scratch) <= se, (label, check.table())


def test_c_the_held_out_predictions_agree_within_one_percent(schedules):
    scratch, _, check = schedules
    assert set(check.predictions) == {(label, HELD_OUT) for label in scratch.found.labels}
    for key, (ours, theirs) in check.predictions.items():
        assert abs(theirs / ours - 1) <= 0.01, (key, check.table())


def test_d_the_ladder_trains_at_most_65_percent_of_the_scratch_sweeps_flops(schedules):
    scratch, ladder, check = schedules
    # every training step of each study ran in its invocation, once
    for run in (scratch, ladder):
        assert sorted(t.name for t in run.trained) == sorted(
            s.name for s in (*run.study.stable_runs, *run.study.runs))
        for t in run.trained:  # a summary's FLOPs are its own steps' at its config's cost
            model = t.config.model
            per_step = t.config.batch_size * model.seq_len * model.training_flops_per_token()
            ran = t.summary.steps - (t.summary.branch_step or 0)
            assert t.summary.steps == t.config.train_steps and ran > 0
            assert t.summary.flops == pytest.approx(per_step * ran, rel=1e-6)
    assert check.flops == (ladder.sweep_flops, scratch.sweep_flops)
    assert check.flops_ratio <= 0.65, check.table()
    # the planning formula agrees with what ran
    planned, from_scratch = ladder_flops(ladder.study)
    assert planned == pytest.approx(ladder.sweep_flops, rel=1e-6)
    assert from_scratch == pytest.approx(scratch.sweep_flops, rel=1e-6)
