"""The files a study writes, as typed values: the one module that knows their names.

    outcome = read_outcome(run_path)            # RunOutcome | None, from outcome.json
    fits = read_fits(fit_path)                  # StudyFits, from fit.json
    fits.fits["plays"].approach2.params.exponent
    prediction = read_prediction(path)          # Prediction | None, from prediction.json
    write_result(report_path, result)           # study.json: the whole StudyResult

Every artifact is a frozen dataclass with ``FORMAT`` and ``VERSION``, ``to_json()`` and
``from_json(data, where=...)``. A version listed in ``OLDER`` still reads: its fields are
today's minus some that have defaults (``StudyFit`` version 2 has no backtests of its
prediction's law, so it reads with none). Files of the previous, unversioned format (a study's
``outcome.json``, ``fit.json`` and ``prediction.json`` before labels) still read, as the
single label ``"default"`` fitted on eval loss; a file of another format or a newer version
is refused in one line naming the file and the format. Files are written atomically: a
reader never sees half of one.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from marin.scaling_laws.codec import Artifact, ArtifactError, decode_fields, read_json
from marin.scaling_laws.outcome import OUTCOME, RunOutcome, read_outcome
from marin.scaling_laws.rows import row_from_columns, rows_csv
from marin.scaling_laws.run_status import RunStatus
from marin.scaling_laws.study.laws import (
    Approach2,
    Approach3,
    BudgetNotFitted,
    BudgetOptimum,
    ExcludedRun,
    TargetPrediction,
)
from marin.scaling_laws.study.legacy import legacy_fit, legacy_prediction
from marin.scaling_laws.values import RunRow
from marin.storage.files import atomic_write, join_url, open_url
from marin.training.summary import RunSummary

if TYPE_CHECKING:
    from marin.scaling_laws.calibration import BacktestResult, NoiseEstimate
    from marin.scaling_laws.model_error import Extrapolation, ModelError

__all__ = ["FIT", "OUTCOME", "PREDICTION", "PREDICTION_RUN", "REPORT", "RESULT", "RUNS",
           "ArtifactError", "Epochs", "LabelComparison", "NotCompared", "PredictedCandidate",
           "Prediction",
           "RunOutcome", "RunRow", "StudyFit", "StudyFits", "StudyResult", "read_fits",
           "read_outcome", "read_prediction", "read_result", "read_rows", "row_from_columns",
           "rows_csv",
           "write_artifact", "write_rows"]

RUNS = "runs.csv"            # the fit step's folder: a row per run
FIT = "fit.json"             # the fit step's folder: StudyFits
PREDICTION = "prediction.json"  # a prediction step's folder
PREDICTION_RUN = "run"       # the predicted run's training folder, under the prediction's
REPORT = "report.md"         # the report step's folder, with the plots
RESULT = "study.json"        # the report step's folder: the StudyResult


def _lazy_types() -> dict[str, Any]:
    """Types of fields that import numpy and scipy: resolved when a file is first read, so
    that planning a study (which imports this module) imports neither."""
    from marin.scaling_laws.calibration import BacktestResult, NoiseEstimate
    from marin.scaling_laws.model_error import Extrapolation, ModelError

    return {"BacktestResult": BacktestResult, "NoiseEstimate": NoiseEstimate,
            "Extrapolation": Extrapolation, "ModelError": ModelError}


@dataclass(frozen=True)
class Epochs:
    """How many times a budget's runs went through each training corpus (the mean over the
    budget's runs), by corpus label."""

    budget: float
    by_corpus: dict[str, float]


@dataclass(frozen=True)
class StudyFit(Artifact):
    """One label's fits: Approach 2 per budget and across budgets, Approach 3, the optima at
    larger budgets and at the held-out one, how its prediction's noise was estimated, and
    the backtests of the law its prediction uses (``extrapolations``, for the model error).
    A part the data cannot support is None with its reason in ``*_error`` (``why_no_*``)."""

    FORMAT: ClassVar[str] = "marin.study.fit"
    VERSION: ClassVar[int] = 3
    OLDER: ClassVar[tuple[int, ...]] = (2,)

    label: str
    metric: str
    runs: int
    used: int
    excluded: tuple[ExcludedRun, ...] = ()
    budgets: tuple[BudgetOptimum, ...] = ()
    budgets_not_fitted: tuple[BudgetNotFitted, ...] = ()
    approach2: Approach2 | None = None
    approach2_error: str | None = None
    approach3: Approach3 | None = None
    approach3_error: str | None = None
    predictions: tuple[TargetPrediction, ...] = ()
    holdout: TargetPrediction | None = None
    epochs: tuple[Epochs, ...] = ()
    noise: NoiseEstimate | None = None
    backtest: BacktestResult | None = None
    backtest_error: str | None = None
    extrapolations: tuple[Extrapolation, ...] = ()
    why_no_extrapolation: str | None = None


@dataclass(frozen=True)
class LabelComparison(Artifact):
    """How many times the baseline's compute ``label`` needs to reach the loss the baseline
    is predicted to reach at ``target_budget`` (``compute_multiplier`` > 1: ``label`` is
    less efficient), with a joint bootstrap ``interval``."""

    FORMAT: ClassVar[str] = "marin.study.comparison"
    VERSION: ClassVar[int] = 1

    baseline: str
    label: str
    target_budget: float
    loss: float
    compute_multiplier: float
    interval: tuple[float, float]
    excludes_one: bool
    source: str


@dataclass(frozen=True)
class NotCompared:
    """A label given no compute multiplier (at ``target_budget``, or at every tier when
    None), and why: its loss does not fall with compute over the budgets swept, or the loss
    to reach lies below its fitted irreducible loss."""

    label: str
    reason: str
    target_budget: float | None = None


@dataclass(frozen=True)
class StudyFits(Artifact):
    """``fit.json``: every label's fit, the comparisons of the labels, and the model error
    pooled over their backtests (``model_error``; None: ``why_no_model_error``)."""

    FORMAT: ClassVar[str] = "marin.study.fits"
    VERSION: ClassVar[int] = 4
    OLDER: ClassVar[tuple[int, ...]] = (2, 3)

    metric: str
    labels: tuple[str, ...]
    fits: dict[str, StudyFit]
    baseline: str | None = None
    comparisons: tuple[LabelComparison, ...] = ()
    comparison_error: str | None = None
    not_compared: tuple[NotCompared, ...] = ()
    model_error: ModelError | None = None
    why_no_model_error: str | None = None

    @classmethod
    def _previous(cls, data: dict[str, Any], where: str) -> StudyFits:
        fit = decode_fields(StudyFit, legacy_fit(data, where), where)
        return cls(metric=fit.metric, labels=("default",), fits={"default": fit})


@dataclass(frozen=True)
class PredictedCandidate:
    """The run trained at the held-out budget."""

    hidden_dim: int
    num_layers: int
    params: float
    tokens: float
    flops: float
    batch_size: int
    train_steps: int


@dataclass(frozen=True)
class Prediction(Artifact):
    """One label's checked prediction at the held-out budget. ``predicted_loss_interval``
    is the 95% interval made of ``interval_terms``: ``fit`` (``fit_interval``, the fit's
    spread alone), ``noise`` (run-to-run, ``noise_std`` with ``noise_dof``, estimated from
    ``noise_source``: ``replicates`` or ``residuals``) and ``model error`` (the law's bend,
    ``model_error_std`` in loss units with ``model_error_dof``, from backtests).
    ``predicted_loss`` is corrected by the lean the backtests show (``lean_percent``, the
    correction; ``uncorrected_loss``, the law's own figure). Pre-registered: the file is
    written with the prediction (``status`` ``registered``, the fit's ``fit_key``, the
    time ``registered_at``) before its run starts (``run_started_at``), then again with
    the outcome."""

    FORMAT: ClassVar[str] = "marin.study.prediction"
    VERSION: ClassVar[int] = 4
    OLDER: ClassVar[tuple[int, ...]] = (2, 3)

    label: str
    budget: float
    run_name: str
    group: str
    status: RunStatus
    reason: str | None = None
    optimum: TargetPrediction | None = None
    size_from: str | None = None
    candidate: PredictedCandidate | None = None
    predicted_loss: float | None = None
    predicted_loss_interval: tuple[float, float] | None = None
    fit_interval: tuple[float, float] | None = None
    noise_source: str | None = None
    noise_std: float | None = None
    noise_dof: int | None = None
    model_error_std: float | None = None
    model_error_dof: int | None = None
    interval_terms: tuple[str, ...] = ()
    loss_from: str | None = None
    achieved_loss: float | None = None
    error_percent: float | None = None
    within_interval: bool | None = None
    summary: RunSummary | None = None
    uncorrected_loss: float | None = None
    lean_percent: float | None = None
    fit_key: str | None = None
    registered_at: str | None = None
    run_started_at: str | None = None

    @classmethod
    def _previous(cls, data: dict[str, Any], where: str) -> Prediction:
        return decode_fields(cls, legacy_prediction(data), where)


@dataclass(frozen=True)
class StudyResult(Artifact):
    """A study's findings: ``labels``, ``fits[label]``, ``predictions[label]`` (labels with
    a held-out budget: the nearest), ``further`` (the checks at further held-out budgets,
    nearest first), ``comparisons`` (each label against ``baseline``), the pooled
    ``model_error`` and ``runs``."""

    FORMAT: ClassVar[str] = "marin.study.result"
    VERSION: ClassVar[int] = 4  # 4: runs name a cooldown's parent_run and branch_step
    OLDER: ClassVar[tuple[int, ...]] = (1, 2, 3)

    title: str
    metric: str
    labels: tuple[str, ...]
    fits: dict[str, StudyFit]
    predictions: dict[str, Prediction] = field(default_factory=dict)
    comparisons: tuple[LabelComparison, ...] = ()
    comparison_error: str | None = None
    baseline: str | None = None
    runs: tuple[RunRow, ...] = ()
    not_compared: tuple[NotCompared, ...] = ()
    further: tuple[Prediction, ...] = ()
    model_error: ModelError | None = None
    why_no_model_error: str | None = None

    def runs_of(self, label: str) -> list[RunRow]:
        return [r for r in self.runs if r.label == label]

    def checks_of(self, label: str) -> list[Prediction]:
        """Every checked prediction of ``label``, nearest held-out budget first."""
        first = [self.predictions[label]] if label in self.predictions else []
        return first + [p for p in self.further if p.label == label]


# -- files ---------------------------------------------------------------------------------

def write_artifact(folder: str, name: str, artifact: Any) -> str:
    """``folder/name`` from ``artifact.to_json()``, whole or not at all; returns its path."""
    path = join_url(folder, name)
    text = json.dumps(artifact.to_json(), indent=1, allow_nan=False)
    with atomic_write(path, "w") as f:
        f.write(text)
    return path


def read_fits(fit_path: str) -> StudyFits:
    path = join_url(fit_path, FIT)
    data = read_json(path)
    if data is None:
        raise ArtifactError(f"no {FIT} in {fit_path}: the fit step has not finished")
    return StudyFits.from_json(data, where=path)


def read_prediction(prediction_path: str) -> Prediction | None:
    path = join_url(prediction_path, PREDICTION)
    data = read_json(path)
    return None if data is None else Prediction.from_json(data, where=path)


def read_result(report_path: str) -> StudyResult | None:
    path = join_url(report_path, RESULT)
    data = read_json(path)
    return None if data is None else StudyResult.from_json(data, where=path)


def write_rows(fit_path: str, rows: Sequence[RunRow]) -> None:
    with atomic_write(join_url(fit_path, RUNS), "w") as f:
        f.write(rows_csv(rows))


def read_rows(fit_path: str) -> list[RunRow]:
    """``runs.csv``; one of the previous format (no label or seed columns) reads as the
    label ``default``."""
    path = join_url(fit_path, RUNS)
    try:
        with open_url(path, "r") as f:
            table = list(csv.DictReader(f))
    except FileNotFoundError:
        raise ArtifactError(f"no {RUNS} in {fit_path}: the fit step has not finished") from None
    return [row_from_columns(r, f"{path}, line {i}", f"row {i - 1}")
            for i, r in enumerate(table, 2)]
