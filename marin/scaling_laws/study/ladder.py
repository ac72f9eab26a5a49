"""Ladder studies: every model shape's points as cooldowns of one shared stable run.

    study = isoflop_study("isoflop/ladder", corpus, budgets=(1e11, 2e11, 4e11, 8e11),
                          heuristic=heuristic, schedule="cooldown", cooldown_fraction=0.2)
    ladder, scratch = ladder_flops(study)   # training FLOPs: the ladder's, a scratch sweep's
    study.ladders[0].stable.name, study.ladders[0].points[0].branch_step

``plan_ladders(candidates, cooldown_fraction)`` groups a sweep's candidates (every budget's)
by model shape (hidden size, layers). Each shape gets one **stable run**: constant learning
rate after a short warmup (``decay_fraction=0``), as long as its largest branch point. Each
candidate point of ``n`` steps is a **cooldown branch** of it: from step ``k = round((1 -
cooldown_fraction) * n)`` to ``n``, of a ``1-sqrt`` decay
(``marin.training.branching.cooldown_config``), so the point costs only its last ``n - k``
steps and the stable prefix is paid once per shape.

* **Batch:** every point of a shape runs at the batch size of the shape's longest candidate
  (a branch continues its parent's batches); a point's steps are its candidate's tokens over
  ``batch * seq_len``.
* **The horizon caveat:** a heuristic may tie hyperparameters to the training horizon
  (``CompletedAdamhHeuristic``'s learning rate falls as ``(T0/T)^0.3``). The branches of one
  stable run share its optimizer state, so they cannot each have their own horizon's: every
  point of a shape trains with the hyperparameters of the shape's longest point (recorded as
  ``ShapeLadder.horizon_tokens`` and in the stable run's description). Shorter points train
  at a learning rate a little below what the heuristic would give them from scratch.
* **Warmup:** the stable run warms up over the warmup steps of the shape's shortest point
  (its ``warmup_fraction`` of its steps), so every branch point is past it.
* **Checkpoints:** the stable run saves and keeps a checkpoint at each of its branch
  points (``checkpoint_at``), one per point of the shape (two points of one step share
  it), and no other unless ``train_options`` asks for ``checkpoint_every``: the storage a
  ladder pays for its FLOPs is one checkpoint per point (the dry run's description of
  each stable run says how many).
* **Replicates:** the seed replicates of a shape's replicated points (the middle
  candidate of each budget) branch from a stable run of their own: the replicate's seed,
  the shape's warmup, batch and hyperparameters, as long as their largest branch point
  (``<study>/stable/h<hidden>-l<layers>-s<r>``). A replicate is then the same procedure
  with another seed, so its spread is the ladder's own run-to-run noise.
* **Accounting:** ``ladder_flops`` counts each stable run once and each branch's own steps,
  against the same points trained from scratch (the held-out predictions, trained from
  scratch in both, are left out of both).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from marin.execution.step import ComputeEstimate, ExecutorStep
from marin.scaling_laws.candidates import CandidateConfig
from marin.scaling_laws.runs import describe, resources_of, training_config
from marin.scaling_laws.study.configs import CandidateRunConfig, budget_tag, run_name
from marin.scaling_laws.study.labels import StudyInputError
from marin.scaling_laws.study.steps import run_candidate, train_stable
from marin.training.branching import cooldown_config

__all__ = ["DECAY_SHAPE", "SCHEDULES", "LadderPoint", "ShapeLadder", "ladder_flops", "ladder_line",
           "ladder_runs", "plan_ladders"]

#: ``isoflop_study(schedule=...)``: every point from scratch, or cooldowns of stable runs
SCHEDULES = ("scratch", "cooldown")

#: the decay of every cooldown branch (Hägele et al. 2024: best for short cooldowns)
DECAY_SHAPE = "1-sqrt"


@dataclass(frozen=True)
class LadderPoint:
    """One candidate point as a cooldown branch.

    Attributes:
        candidate: the sweep's candidate (its budget, shape and tokens).
        train_steps: the point's steps ``n`` at the shape's batch size.
        branch_step: ``k``, where its cooldown leaves the stable run (past the warmup,
            before ``n``).
    """

    candidate: CandidateConfig
    train_steps: int
    branch_step: int


@dataclass(frozen=True)
class ShapeLadder:
    """One model shape's stable run and its branches.

    Attributes:
        hidden_dim, num_layers: the shape.
        longest: the shape's longest candidate: its batch size and hyperparameters are
            every point's.
        horizon_tokens: the tokens of that candidate, the horizon the hyperparameters are
            those of.
        warmup_steps: the stable run's warmup.
        stable_steps: the stable run's steps (its largest branch point).
        points: the branches, in the order of the sweep (budget, then candidate).
        stable: the stable run's step, once the graph is built (None in a bare plan).
    """

    hidden_dim: int
    num_layers: int
    longest: CandidateConfig
    horizon_tokens: int
    warmup_steps: int
    stable_steps: int
    points: tuple[LadderPoint, ...]
    stable: ExecutorStep | None = None

    @property
    def batch_size(self) -> int:
        return self.longest.batch_size

    def stable_optimizer(self, steps: int | None = None) -> Any:
        """The stable run's hyperparameters (of ``steps`` steps; default its own): the
        longest point's, constant after ``warmup_steps``."""
        steps = self.stable_steps if steps is None else steps
        opt = self.longest.optimizer
        warmup = (self.warmup_steps + 0.5) / steps if self.warmup_steps else 0.0
        # half a step over: schedule_steps rounds the fraction's steps down
        return dataclasses.replace(opt, warmup_fraction=warmup, decay_fraction=0.0)


def plan_ladders(candidates: Mapping[float, Sequence[CandidateConfig]],
                 cooldown_fraction: float = 0.2) -> tuple[ShapeLadder, ...]:
    """One ``ShapeLadder`` per model shape among every budget's candidates, by hidden size;
    a cooldown fraction that leaves a point no cooldown step is refused naming it."""
    if not isinstance(cooldown_fraction, (int, float)) or not 0 < cooldown_fraction < 1:
        raise StudyInputError(f"cooldown_fraction={cooldown_fraction!r} must be between 0 and "
                              "1 (the fraction of each point's steps that are its cooldown, "
                              "e.g. 0.2)")
    shapes: dict[tuple[int, int], list[CandidateConfig]] = {}
    for group in candidates.values():
        for c in group:
            shapes.setdefault((c.model_config.hidden_dim, c.model_config.num_layers), []).append(c)
    return tuple(_shape_ladder(h, layers, found, cooldown_fraction)
                 for (h, layers), found in sorted(shapes.items()))


def _shape_ladder(hidden: int, layers: int, found: list[CandidateConfig], fraction: float
                  ) -> ShapeLadder:
    longest = max(found, key=lambda c: c.tokens)
    batch = longest.batch_size
    steps = [max(1, round(c.tokens / (batch * c.seq_len))) for c in found]
    shortest = min(steps)
    warmup_fraction = longest.optimizer.warmup_fraction  # as schedule_steps counts it
    warmup = max(1, int(shortest * warmup_fraction)) if warmup_fraction > 0 else 0
    points = []
    for c, n in zip(found, steps, strict=True):
        k = max(1, round((1 - fraction) * n))
        if k >= n or k < warmup:
            raise StudyInputError(
                f"cooldown_fraction={fraction}: the {budget_tag(c.budget)} point of h{hidden}-"
                f"l{layers} ({n} steps) would branch at step {k}, leaving it no cooldown or "
                f"starting before the warmup ({warmup} steps); give a larger budget or a "
                "cooldown_fraction nearer 0.2")
        points.append(LadderPoint(c, n, k))
    return ShapeLadder(hidden, layers, longest, longest.tokens, warmup,
                       max(p.branch_step for p in points), tuple(points))


def ladder_runs(name: str, stem: str, label: str, single: bool,
                candidates: Mapping[float, Sequence[CandidateConfig]], data: Any,
                options: dict[str, Any], eval_points: int, replicates: int,
                cooldown_fraction: float) -> tuple[list[ShapeLadder], list[ExecutorStep]]:
    """One label's ladders (their stable steps set, replicates' stable runs included) and
    its branch steps in the sweep's order (budget, candidate, seed), each the training
    step of its point; ``stem`` is the label's stem of run names."""
    ladders = plan_ladders(candidates, cooldown_fraction)
    point_of = {id(p.candidate): (shape, p) for shape in ladders for p in shape.points}
    # a replicate r of a shape's points branches from that shape's stable run of seed + r
    plans: dict[tuple[int, int], ShapeLadder] = {(id(shape), 0): shape for shape in ladders}
    for group_candidates in candidates.values():
        shape, point = point_of[id(group_candidates[len(group_candidates) // 2])]
        for r in range(1, replicates + 1):
            found = plans.get((id(shape), r))
            points = (*(found.points if found else ()), point)
            plans[(id(shape), r)] = dataclasses.replace(
                shape, points=points, stable_steps=max(p.branch_step for p in points))
    built = {key: dataclasses.replace(plan, stable=_stable_step(
        name, label, single, plan, data, options, eval_points, key[1]))
        for key, plan in plans.items()}
    branches: list[ExecutorStep] = []
    for budget, group_candidates in candidates.items():
        group = f"{stem}-{budget_tag(budget)}"
        middle = group_candidates[len(group_candidates) // 2]
        for candidate in group_candidates:
            shape, point = point_of[id(candidate)]
            for r in range(replicates + 1) if candidate is middle else range(1):
                parent = built[(id(shape), r)].stable
                branches.append(_branch_step(f"{name}/runs/{group}", stem, label, group, point,
                                             parent, options, eval_points, r))
    return list(built.values()), branches


def _stable_step(name: str, label: str, single: bool, shape: ShapeLadder, data: Any,
                 options: dict[str, Any], eval_points: int, replicate: int) -> ExecutorStep:
    """The stable run of ``shape`` (replicate r > 0: seed + r)."""
    steps = shape.stable_steps
    tag = f"h{shape.hidden_dim}-l{shape.num_layers}" + (f"-s{replicate}" if replicate else "")
    branch_points = tuple(sorted({p.branch_step for p in shape.points}))
    run_options = {"eval_every": max(1, steps // eval_points), **options,
                   "checkpoint_at": branch_points}
    if replicate:
        run_options["seed"] = options.get("seed", 0) + replicate
    longest = shape.longest
    candidate = dataclasses.replace(longest, train_steps=steps,
                                    optimizer=shape.stable_optimizer(steps))
    per_step = longest.flops / longest.train_steps
    return ExecutorStep(
        f"{name}/stable/{tag if single else f'{label}-{tag}'}", train_stable,
        training_config(candidate, data, run_options),
        description=f"stable run of {shape.longest.params:.3g} params, {steps} steps of "
                    f"{shape.batch_size}: the hyperparameters of a horizon of "
                    f"{shape.horizon_tokens:.3g} tokens; keeps {len(branch_points)} "
                    f"checkpoint(s), one per branch point",
        resources=resources_of(longest),
        estimate=ComputeEstimate(per_step * steps, (longest.estimated_device_hours or 0.0)
                                 * steps / longest.train_steps),
        resumable=True)


def _branch_step(folder: str, stem: str, label: str, group: str, point: LadderPoint,
                 parent: ExecutorStep, options: dict[str, Any], eval_points: int,
                 replicate: int) -> ExecutorStep:
    """The training step of ``point``: the cooldown of ``parent`` from its branch point."""
    candidate, n, k = point.candidate, point.train_steps, point.branch_step
    name = run_name(stem, candidate)
    original = None
    if replicate:
        original, name = name, f"{name}-s{replicate}"
    train = cooldown_config(parent, k, n, DECAY_SHAPE)
    eval_every = options.get("eval_every", max(1, n // eval_points))
    train = dataclasses.replace(train, eval_every=eval_every)
    config = CandidateRunConfig(train=train, run_name=name, group=group, label=label,
                                budget=candidate.budget, replicate_of=original)
    fraction = _step_flops(train) * (n - k) / candidate.flops
    return ExecutorStep(f"{folder}/{name}", run_candidate, config,
                        description=f"{describe(candidate)}: cooldown of {parent.name} from "
                                    f"step {k} to {n}",
                        resources=resources_of(candidate),
                        estimate=ComputeEstimate(candidate.flops * fraction,
                                                 (candidate.estimated_device_hours or 0.0)
                                                 * fraction),
                        resumable=True)  # a new attempt resumes from its own checkpoint


def ladder_flops(study: Any) -> tuple[float, float]:
    """``(ladder, scratch)``: the training FLOPs of ``study``'s sweep (an ``IsoFlopStudy``),
    each stable run counted once and each branch's own steps, and those of the same points
    trained from scratch; equal for a scratch study. Held-out predictions are left out."""
    return _flops(study.stable_runs, study.runs)


def ladder_line(stable_runs: Sequence[ExecutorStep], runs: Sequence[ExecutorStep]) -> str:
    """The dry run's words on a ladder's saving (empty without stable runs)."""
    if not stable_runs:
        return ""
    ladder, scratch = _flops(stable_runs, runs)
    return (f"; a ladder of {len(stable_runs)} stable run(s): {ladder:.3g} training FLOPs, "
            f"{ladder / scratch:.2f} x the {scratch:.3g} of its points from scratch")


def _flops(stable_runs: Sequence[ExecutorStep], runs: Sequence[ExecutorStep]
           ) -> tuple[float, float]:
    ladder = sum(_step_flops(s.config) * s.config.train_steps for s in stable_runs)
    scratch = 0.0
    for step in runs:
        train = step.config.train
        k = train.init_from.step if train.init_from is not None else 0
        ladder += _step_flops(train) * (train.train_steps - k)
        scratch += _step_flops(train) * train.train_steps
    return ladder, scratch


def _step_flops(train: Any) -> float:
    """Training FLOPs of one step of ``train`` (a ``TrainLmConfig``)."""
    model = train.model
    return train.batch_size * model.seq_len * model.training_flops_per_token()
