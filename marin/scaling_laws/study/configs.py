"""The configs of a study's steps, and the names its runs and groups get.

    budget_tag(1.6e11)                          # "1.6e11"
    run_name("tiny-plays", candidate)           # "tiny-plays-1.6e11-h16-l1"
    next_tiers(1e11, 2)                         # [3e11, 1e12]

Every config is a frozen dataclass the executor hashes; none imports JAX.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from marin.execution import added_field, this_output_path
from marin.scaling_laws.candidates import CandidateConfig
from marin.scaling_laws.scaling_heuristics import ScalingHeuristic
from marin.training.config import TrainLmConfig

__all__ = ["CandidateRunConfig", "LabelPath", "PredictionConfig", "RunFolder", "StudyFitConfig",
           "StudyReportConfig", "StudyRun", "budget_tag", "next_tiers", "run_name",
           "study_candidates"]


def budget_tag(budget: float) -> str:
    """``3e19`` for 3e19, ``1.6e11`` for 1.6e11: the budget in run and group names."""
    mantissa, exponent = f"{budget:.1e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


def run_name(stem: str, candidate: CandidateConfig) -> str:
    """``<stem>-<budget>-h<hidden>-l<layers>``; the stem holds the study and the label."""
    m = candidate.model_config
    return f"{stem}-{budget_tag(candidate.budget)}-h{m.hidden_dim}-l{m.num_layers}"


def next_tiers(budget: float, count: int) -> list[float]:
    """The next ``count`` budgets of the 1-3-10 ladder above ``budget``."""
    out, current = [], budget
    for _ in range(count):
        exponent = math.floor(math.log10(current) + 1e-9)
        mantissa = current / 10**exponent
        current = (3 if mantissa < 3 - 1e-9 else 10) * 10**exponent
        out.append(float(f"{current:.6g}"))
    return out


def study_candidates(heuristic: ScalingHeuristic, budgets: Sequence[float]
                     ) -> dict[float, list[CandidateConfig]]:
    """The heuristic's candidates per budget; an error names a budget that has none."""
    out: dict[float, list[CandidateConfig]] = {}
    for budget in budgets:
        explain = getattr(heuristic, "candidates_or_explain", None)
        out[budget] = list(explain(budget) if explain else heuristic.candidates_for_budget(budget))
        if not out[budget]:
            raise ValueError(f"the heuristic has no candidate for a budget of {budget:.3g} FLOPs")
    return out


@dataclass(frozen=True)
class LabelPath:
    """A label and a folder (a cache, or a step's output)."""

    label: str
    path: Any  # a path, or a placeholder until the executor resolves it


@dataclass(frozen=True)
class StudyRun:
    """One run as the fit reads it: its names, label, budget and output folder."""

    name: str
    group: str
    budget: float
    path: Any
    label: str = "default"


@dataclass(frozen=True)
class RunFolder:
    """Runs trained elsewhere, fitted with the study's own: a run's folder or a folder of
    runs in any layout ``marin scaling fit`` reads (marin's ``summary.json``, Marin's
    ``tracker_metrics.jsonl``, Levanter's JSON logger, W&B exports), a results table, or a
    glob of them.

    Attributes:
        path: where they are (``output_path_of(step)`` makes them a dependency).
        label: the label their runs get; None: each run's own (a study's label, the W&B
            group, else the name of the folder the run's folder is in).
    """

    path: Any
    label: str | None = None


@dataclass(frozen=True)
class CandidateRunConfig:
    """A training run of the sweep: the trainer's config, and the run's place in the study.

    Attributes:
        train: the run (its ``output_path`` is the step's: metrics, summary, checkpoints,
            ``outcome.json``).
        run_name: W&B-style run name, unique in the study.
        group: the run's group, one per label and budget.
        label: the corpus or mixture it trains on.
        budget: the FLOP budget the run belongs to.
        replicate_of: for a seed replicate, the run it repeats with another seed.
    """

    train: TrainLmConfig
    run_name: str
    group: str
    label: str
    budget: float
    replicate_of: str | None = None


@dataclass(frozen=True)
class StudyFitConfig:
    """Attributes:
        runs: the runs to fit: the study's (``StudyRun``: their output folders are
            dependencies) and runs trained elsewhere (``RunFolder``).
        labels: the labels in order (the first is the default baseline); a label that only
            run folders give comes after them, and one with no run at all is left out.
        metric: what the fits use (``macro_bpb``, ``plays/loss`` ...; ``RunSummary.metric``).
        targets: budgets to predict the optimum at (larger tiers).
        holdout_budget: the held-out budget, predicted here and checked by ``prediction``.
        bootstrap: resamples for the Approach 3 intervals and the compute multipliers.
        baseline: the label the others are compared with (None: the first).
        corpora: each training corpus's token cache, for the epochs per budget.
        output_path: where ``runs.csv`` and ``fit.json`` go.
    """

    runs: tuple[StudyRun | RunFolder, ...]
    labels: tuple[str, ...] = ("default",)
    metric: str = "loss"
    targets: tuple[float, ...] = ()
    holdout_budget: float | None = None
    bootstrap: int = 200
    baseline: str | None = None
    corpora: tuple[LabelPath, ...] = ()
    output_path: str = this_output_path()


@dataclass(frozen=True)
class PredictionConfig:
    """Attributes:
        fit_path: the fit step's output.
        label: whose fit is checked.
        data: the label's training data (a cache, or a tuple of ``DataComponent``).
        budget: the held-out budget.
        heuristic: builds the candidate nearest the predicted optimal size.
        run_name, group: names of the predicted run.
        train_options: ``TrainLmConfig`` fields applied to the run (as for the sweep).
        eval_points: evaluations during the run.
        output_path: where ``prediction.json`` and the run (``run/``) go.
        cooldown: in a ladder study, ``(decay_shape, fraction)`` of its cooldowns: the
            held-out run, trained from scratch, ends with that decay over that last
            fraction of its steps, so it is trained as the fitted points were (a
            warmup-stable run and its cooldown). None: the heuristic's own schedule. Left
            out of the step's key while None.
    """

    fit_path: Any
    label: str
    data: Any
    budget: float
    heuristic: ScalingHeuristic
    run_name: str
    group: str
    train_options: dict[str, Any] = field(default_factory=dict)
    eval_points: int = 4
    output_path: str = this_output_path()
    cooldown: tuple[str, float] | None = added_field(default=None)


@dataclass(frozen=True)
class StudyReportConfig:
    """Attributes:
        title: the report's heading.
        fit_path: the fit step's output.
        predictions: each label's prediction step output.
        output_path: where ``report.md``, ``study.json`` and the plots go.
    """

    title: str
    fit_path: Any
    predictions: tuple[LabelPath, ...] = ()
    output_path: str = this_output_path()
