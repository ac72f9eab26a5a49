"""A study's points trained from scratch and as a ladder in one prefix, and the four figures
that check the ladder (``isoflop_study(schedule="cooldown")``) against scratch.

    scratch, ladder, shared_s = run_schedules(prefix, lambda s: isoflop_study(..., schedule=s))
    check = ladder_check(scratch, ladder)
    check.worst_gap_sigmas, check.exponent_gaps, check.prediction_gaps, check.flops_ratio
    print(check.table())

Both studies take one name, so their corpora, tokenizer and token caches are the same steps
(the same keys): a first invocation builds those (``shared_s`` seconds), then each schedule's
own invocation runs only its training, fit, held-out predictions and report. The figures:

* (a) each point at equal (N, D), from scratch and as a cooldown branch: the gap of their
  metric over the run-to-run noise, the standard deviation that the seed replicates of both
  studies measure (pooled: one degree of freedom per replicated point; a study without
  replicates: the scratch fits' estimate from the residuals about the budgets' parabolas);
* (b) each label's N_opt exponent (Approach 2), ladder less scratch, over the scratch
  sweep's standard error of it;
* (c) each label's held-out predictions, ladder over scratch, less 1, in percent;
* (d) the training FLOPs of the sweep's points (replicates included), ladder over scratch,
  summed from the ``summary.json`` of every training step that the schedule's invocation
  ran (stable runs, branches, runs from scratch); the held-out runs are counted apart.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from marin.execution import Executor, ExecutorStep
from marin.execution.executor import InvocationResult
from marin.execution.states import StepState
from marin.scaling_laws.run_status import RunStatus
from marin.scaling_laws.study import IsoFlopStudy, StudyResult, load_study
from marin.training.summary import RunSummary, read_summary

__all__ = ["LadderCheck", "PointGap", "ScheduleRun", "TrainedStep", "ladder_check",
           "run_schedules"]


@dataclass(frozen=True)
class TrainedStep:
    """A training step that an invocation ran, as its ``summary.json`` says.

    Attributes:
        name: the step's name.
        summary: what it trained: its steps, its own FLOPs (a branch only its cooldown's).
        config: the step's training config (a ``TrainLmConfig``).
    """

    name: str
    summary: RunSummary
    config: object


@dataclass(frozen=True)
class ScheduleRun:
    """One schedule's study, run.

    Attributes:
        study: the graph (``schedule`` says which).
        result: the invocation that ran its own steps (the shared ones were skipped).
        found: ``load_study`` of it.
        wall_s: that invocation's wall time.
        trained: the sweep's training steps it ran (stable runs included), from their
            summaries.
    """

    study: IsoFlopStudy
    result: InvocationResult
    found: StudyResult
    wall_s: float
    trained: tuple[TrainedStep, ...]

    @property
    def sweep_flops(self) -> float:
        return sum(t.summary.flops for t in self.trained)

    @property
    def held_out_flops(self) -> float:
        return sum(p.summary.flops for p in (*self.found.predictions.values(),
                                             *self.found.further) if p.summary is not None)


@dataclass(frozen=True)
class PointGap:
    """One point of the sweep at equal (N, D) in both studies.

    Attributes:
        label, run: the label and the run's name (the same in both).
        params, tokens: N and D.
        scratch, ladder: the metric from scratch and from the cooldown branch.
    """

    label: str
    run: str
    params: int
    tokens: int
    scratch: float
    ladder: float


@dataclass(frozen=True)
class LadderCheck:
    """The ladder against scratch, per check.

    Attributes:
        noise: the run-to-run standard deviation of the metric (a run's, not a difference's).
        noise_dof: its degrees of freedom (replicated points of both studies).
        noise_source: ``seed replicates``, or without them the scratch fits' residuals.
        points: (a) every point at equal (N, D).
        exponents: (b) label -> (scratch exponent, its standard error, ladder exponent).
        predictions: (c) (label, held-out budget) -> (scratch, ladder) predicted loss.
        flops: (d) (ladder, scratch) training FLOPs of the sweep, as run.
    """

    noise: float
    noise_dof: int
    noise_source: str
    points: tuple[PointGap, ...]
    exponents: dict[str, tuple[float, float, float]]
    predictions: dict[tuple[str, float], tuple[float, float]]
    flops: tuple[float, float]

    def gap_sigmas(self, point: PointGap) -> float:
        return (point.ladder - point.scratch) / self.noise

    @property
    def worst_gap_sigmas(self) -> float:
        """(a): the largest |ladder - scratch| over the noise."""
        return max(abs(self.gap_sigmas(p)) for p in self.points)

    @property
    def mean_gap_sigmas(self) -> float:
        """The mean (signed) gap over the noise: a lean of the ladder one way."""
        return sum(self.gap_sigmas(p) for p in self.points) / len(self.points)

    @property
    def exponent_gaps(self) -> dict[str, float]:
        """(b): label -> (ladder - scratch exponent) over the scratch standard error."""
        return {label: (ladder - scratch) / se
                for label, (scratch, se, ladder) in self.exponents.items()}

    @property
    def prediction_gaps(self) -> dict[tuple[str, float], float]:
        """(c): (label, budget) -> ladder over scratch prediction, less 1, in percent."""
        return {key: 100.0 * (ladder / scratch - 1.0)
                for key, (scratch, ladder) in self.predictions.items()}

    @property
    def flops_ratio(self) -> float:
        """(d): the ladder's training FLOPs over the scratch sweep's (NaN when the scratch
        invocation trained nothing: a prefix that held its runs already)."""
        return self.flops[0] / self.flops[1] if self.flops[1] else float("nan")

    def table(self) -> str:
        """The four figures, one line each, with what each check asks."""
        gaps = ", ".join(f"{label} {g:+.2f}" for label, g in self.exponent_gaps.items())
        exps = ", ".join(f"{label} {s:.3f} +/- {se:.3f} -> {la:.3f}"
                         for label, (s, se, la) in self.exponents.items())
        preds = ", ".join(f"{label} at {budget:.3g} {g:+.2f}%"
                          for (label, budget), g in self.prediction_gaps.items())
        rows = [
            ("(a) points at equal (N, D): max |gap| / noise",
             f"{self.worst_gap_sigmas:.2f} (mean {self.mean_gap_sigmas:+.2f}; noise "
             f"{self.noise:.4f} from {self.noise_source}, {self.noise_dof} dof; "
             f"{len(self.points)} points)", "<= 2"),
            ("(b) N_opt exponent: gap / scratch's SE", f"{gaps} ({exps})", "<= 1"),
            ("(c) held-out prediction: ladder / scratch - 1", preds, "<= 1%"),
            ("(d) training FLOPs: ladder / scratch",
             f"{self.flops_ratio:.3f} ({self.flops[0]:.3g} / {self.flops[1]:.3g})", "<= 0.65"),
        ]
        width = max(len(r[0]) for r in rows)
        return "\n".join(f"{name:<{width}}  {value}  [{goal}]" for name, value, goal in rows)


def run_schedules(prefix: str, build: Callable[[str], IsoFlopStudy], max_concurrent: int = 2
                  ) -> tuple[ScheduleRun, ScheduleRun, float]:
    """``build("scratch")`` and ``build("cooldown")`` (one name) run in ``prefix``: the steps
    they share first, then each schedule's own; (scratch, ladder, the shared steps' wall
    seconds)."""
    scratch, ladder = build("scratch"), build("cooldown")
    executor = Executor(prefix, max_concurrent=max_concurrent)
    keys = {n.key for n in executor.plan(ladder).graph.nodes}
    shared = [n.step for n in executor.plan(scratch).graph.nodes if n.key in keys]
    started = time.perf_counter()
    result = executor.run(shared)
    assert result.ok, result.summary()
    shared_s = time.perf_counter() - started
    return _run(executor, scratch), _run(executor, ladder), shared_s


def _run(executor: Executor, study: IsoFlopStudy) -> ScheduleRun:
    started = time.perf_counter()
    result = executor.run(study)
    wall = time.perf_counter() - started
    assert result.ok, result.summary()
    training: dict[str, ExecutorStep] = {s.name: s for s in (*study.stable_runs, *study.runs)}
    trained = []
    for outcome in result.steps:
        step = training.get(outcome.name)
        if step is not None and outcome.state is StepState.SUCCEEDED:
            config = step.config if step in study.stable_runs else step.config.train
            trained.append(TrainedStep(outcome.name, read_summary(outcome.output_path),
                                       config))
    return ScheduleRun(study, result, load_study(result), wall, tuple(trained))


def ladder_check(scratch: ScheduleRun, ladder: ScheduleRun) -> LadderCheck:
    """The four figures of ``ladder`` against ``scratch`` (the same points, one prefix)."""
    ours = {(r.label, r.run): r for r in ladder.found.runs}
    points, replicated = [], []
    for row in scratch.found.runs:
        other = ours[(row.label, row.run)]
        if row.replicate_of is None:
            if (other.params, other.tokens) != (row.params, row.tokens):
                raise ValueError(f"{row.run}: N, D = {row.params}, {row.tokens} from scratch "
                                 f"but {other.params}, {other.tokens} in the ladder")
            points.append(PointGap(row.label, row.run, row.params, row.tokens, row.loss,
                                   other.loss))
    for found in (scratch.found, ladder.found):
        by_run = {(r.label, r.run): r for r in found.runs}
        replicated += [(by_run[(r.label, r.replicate_of)].loss, r.loss) for r in found.runs
                       if r.replicate_of is not None]
    if any(r.status != RunStatus.OK for f in (scratch, ladder) for r in f.found.runs):
        raise ValueError("a run of the sweep failed; see the studies' runs.csv")
    noise, dof, source = _noise(replicated, scratch.found)
    exponents = {}
    for label in scratch.found.labels:
        s, la = scratch.found.fits[label].approach2, ladder.found.fits[label].approach2
        exponents[label] = (s.params.exponent, s.params.exponent_se, la.params.exponent)
    theirs = {(p.label, p.budget): p for p in (*ladder.found.predictions.values(),
                                               *ladder.found.further)}
    predictions = {(p.label, p.budget): (p.predicted_loss,
                                         theirs[(p.label, p.budget)].predicted_loss)
                   for p in (*scratch.found.predictions.values(), *scratch.found.further)}
    return LadderCheck(noise, dof, source, tuple(points), exponents, predictions,
                       (ladder.sweep_flops, scratch.sweep_flops))


def _noise(replicated: list[tuple[float, float]], scratch: StudyResult
           ) -> tuple[float, int, str]:
    """The run-to-run standard deviation, its dof and where it comes from: the seed pairs
    of both studies, else (no replicates) the scratch fits' estimates from the residuals
    about the budgets' parabolas, pooled over the labels."""
    if replicated:
        # each pair (a, b) of seeds: its sum of squares about its mean is (a - b)^2 / 2
        squares = sum((a - b) ** 2 / 2 for a, b in replicated)
        return math.sqrt(squares / len(replicated)), len(replicated), "seed replicates"
    found = [f.noise for f in scratch.fits.values() if f.noise is not None]
    dof = sum(n.dof for n in found)
    if not dof:
        raise ValueError("no noise estimate: plan seed replicates (replicates=1)")
    squares = sum(n.std ** 2 * n.dof for n in found)
    return math.sqrt(squares / dof), dof, "residuals of the scratch fits"
