"""The bodies of a study's steps: read an artifact, call the library, write an artifact.

    run_candidate(CandidateRunConfig(...))    # trains; writes outcome.json
    fit_study(StudyFitConfig(...))            # writes runs.csv and fit.json
    run_prediction(PredictionConfig(...))     # trains the predicted optimum; prediction.json
    write_study_report(StudyReportConfig(...))  # report.md, study.json, plots

A run that diverges, runs out of memory or has an invalid config still finishes its step:
its ``outcome.json`` says why, and the fit lists it as excluded with that reason. These
outcomes are properties of the candidate and would recur on a retry. Any other error fails
the step as usual (the executor retries it on the next run), and the fit waits for it. The
outcome is written after training, atomically, so a killed run leaves none and its next
attempt resumes from the last checkpoint.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any

from marin.execution.errors import one_line
from marin.scaling_laws.run_status import RunStatus
from marin.scaling_laws.study.artifacts import (
    FIT,
    OUTCOME,
    PREDICTION,
    PREDICTION_RUN,
    ArtifactError,
    PredictedCandidate,
    Prediction,
    RunOutcome,
    StudyFits,
    StudyResult,
    read_fits,
    read_outcome,
    read_prediction,
    read_rows,
    write_artifact,
    write_rows,
)
from marin.scaling_laws.study.configs import (
    CandidateRunConfig,
    PredictionConfig,
    RunFolder,
    StudyFitConfig,
    StudyReportConfig,
    StudyRun,
    study_candidates,
)
from marin.storage.files import join_url, open_url
from marin.training.metric_names import canonical
from marin.training.summary import RunSummary

__all__ = ["eval_curves", "fit_study", "run_candidate", "run_prediction", "train_stable",
           "write_study_report"]

logger = logging.getLogger("marin.scaling_laws")


# -- a candidate -----------------------------------------------------------------------------

def _train(train_config: Any) -> tuple[RunSummary | None, RunStatus, str | None]:
    """Train; returns (summary, status, reason) with status ``ok``, ``diverged``,
    ``out_of_memory`` or ``invalid_config``."""
    from marin.training.config import (
        TrainingConfigError,
        TrainingDivergedError,
        TrainingOutOfMemoryError,
    )
    from marin.training.trainer import train_lm

    try:
        return train_lm(train_config), RunStatus.OK, None
    except (TrainingDivergedError, TrainingOutOfMemoryError, TrainingConfigError) as e:
        status = (RunStatus.DIVERGED if isinstance(e, TrainingDivergedError)
                  else RunStatus.OUT_OF_MEMORY if isinstance(e, TrainingOutOfMemoryError)
                  else RunStatus.INVALID_CONFIG)
        reason = one_line(e)
        logger.warning("run %s: %s (%s); it is excluded from the fit", train_config.output_path,
                       status, reason)
        return None, status, reason


def _now() -> str:
    """The time, to the microsecond, in UTC (ISO 8601)."""
    import datetime

    return datetime.datetime.now(datetime.UTC).isoformat(timespec="microseconds")


def _step_folder(path: Any) -> str:
    """A step output's folder name (``fit-1a2b3c4d``): its name and version."""
    return str(path).rstrip("/").rpartition("/")[2]


def eval_curves(run_path: str) -> dict[str, tuple[float, ...]]:
    """Every eval metric of a run's ``metrics.jsonl`` (``eval/macro_bpb`` as ``macro_bpb``,
    ``eval/plays/loss`` as ``plays/loss``), its values in order of evaluation."""
    try:
        with open_url(join_url(run_path, "metrics.jsonl"), "r") as f:
            records = [canonical(json.loads(line)) for line in f if line.strip()]
    except FileNotFoundError:
        return {}
    curves: dict[str, list[float]] = {}
    for record in records:
        for key, value in record.items():
            if key.startswith("eval/") and isinstance(value, (int, float)):
                curves.setdefault(key[len("eval/"):], []).append(float(value))
    return {k: tuple(v) for k, v in curves.items()}


def run_candidate(config: CandidateRunConfig) -> RunOutcome:
    """Train one candidate and write ``outcome.json``."""
    model = config.train.model
    summary, status, reason = _train(config.train)
    outcome = RunOutcome(run_name=config.run_name, group=config.group, label=config.label,
                         budget=config.budget, status=status, reason=reason,
                         hidden_dim=model.hidden_dim, num_layers=model.num_layers,
                         summary=summary, seed=config.train.seed,
                         replicate_of=config.replicate_of,
                         curves=eval_curves(config.train.output_path))
    write_artifact(config.train.output_path, OUTCOME, outcome)
    return outcome


def train_stable(config: Any) -> RunSummary:
    """Train a ladder's stable run (a ``TrainLmConfig``), whose checkpoints its cooldown
    branches start from (``marin.scaling_laws.study.ladder``); no outcome: no fit reads it."""
    from marin.training.trainer import train_lm

    return train_lm(config)


# -- the fit ---------------------------------------------------------------------------------

def read_outcomes(runs: Sequence[StudyRun]) -> list[tuple[StudyRun, RunOutcome | None]]:
    return [(run, read_outcome(run.path)) for run in runs]


def fit_study(config: StudyFitConfig) -> StudyFits:
    """``runs.csv`` and ``fit.json`` from the runs' outcomes and the run folders' runs:
    every label's fit, and the labels compared."""
    from dataclasses import replace

    from marin.scaling_laws.study.analysis import epochs_of, fit_labels, missing_row

    outcomes = read_outcomes([r for r in config.runs if isinstance(r, StudyRun)])
    rows = [outcome.row(config.metric) if outcome is not None else missing_row(run)
            for run, outcome in outcomes]
    rows += _folder_rows([r for r in config.runs if isinstance(r, RunFolder)], config.metric)
    labels = [label for label in dict.fromkeys([*config.labels, *(r.label for r in rows)])
              if any(r.label == label for r in rows)]
    if not labels:
        raise ArtifactError("StudyFitConfig.runs holds no run to fit; give the study's runs "
                            "or run folders (RunFolder)")
    write_rows(config.output_path, rows)
    result = fit_labels(rows, labels, metric=config.metric, targets=config.targets,
                        holdout_budget=config.holdout_budget, bootstrap=config.bootstrap,
                        baseline=config.baseline, compare_at=config.targets[:2])
    corpus_tokens = _corpus_tokens(config)
    fits = {label: replace(fit, epochs=epochs_of(
        [o for run, o in outcomes if run.label == label and o is not None], corpus_tokens))
        for label, fit in result.fits.items()}
    result = replace(result, fits=fits)
    write_artifact(config.output_path, FIT, result)
    return result


def _folder_rows(folders: Sequence[RunFolder], metric: str) -> list[Any]:
    """The rows of runs trained elsewhere, read as ``marin scaling fit`` reads them."""
    from marin.scaling_laws.results import ResultsError, read_runs

    rows = []
    for folder in folders:
        try:
            rows += read_runs(str(folder.path), metric, folder.label)
        except ResultsError as e:
            raise ArtifactError(f"StudyFitConfig.runs: {e}") from None
    return rows


def _corpus_tokens(config: StudyFitConfig) -> dict[str, int]:
    from marin.processing.tokenize.cache_stats import read_cache_stats

    out = {}
    for corpus in config.corpora:
        try:
            out[corpus.label] = read_cache_stats(corpus.path, split="train").total_tokens
        except (OSError, ValueError) as e:
            logger.warning("cannot read the train tokens of %s (%s): no epochs for it",
                           corpus.path, one_line(e))
    return out


# -- the checked prediction ------------------------------------------------------------------

def run_prediction(config: PredictionConfig) -> Prediction:
    """Build the candidate nearest the label's predicted optimum, train it, compare."""
    from dataclasses import replace

    from marin.scaling_laws.candidates import nearest_candidate
    from marin.scaling_laws.runs import training_config
    from marin.scaling_laws.study.analysis import prediction_interval
    from marin.scaling_laws.study.fitting import predict_at, predicted_loss

    fits = read_fits(config.fit_path)
    if config.label not in fits.fits:
        raise ArtifactError(f"{join_url(config.fit_path, FIT)} has no fit of label "
                            f"{config.label!r}; it has {', '.join(fits.fits)}")
    fit = fits.fits[config.label]
    holdout = fit.holdout if fit.holdout is not None and fit.holdout.budget == config.budget \
        else predict_at(fit, config.budget)
    out = Prediction(label=config.label, budget=config.budget, run_name=config.run_name,
                     group=config.group, status=RunStatus.NOT_PREDICTED, optimum=holdout)
    best = holdout.best
    if best is None:
        out = replace(out, reason="neither fit succeeded; see fit.json")
        write_artifact(config.output_path, PREDICTION, out)
        return out
    source, optimum = best
    candidate = nearest_candidate(study_candidates(config.heuristic, [config.budget])
                                  [config.budget], optimum.params)
    if config.cooldown is not None:  # trained as the ladder's points were
        shape, fraction = config.cooldown
        candidate = replace(candidate, optimizer=replace(
            candidate.optimizer, decay_shape=shape, decay_fraction=fraction))
    loss, fit_interval, loss_from = predicted_loss(fit, config.budget, candidate.params,
                                                   candidate.tokens)
    interval, parts = prediction_interval(fits, config.label, loss, fit_interval,
                                          config.budget, loss_from)
    noise, uncorrected, loss = parts.noise, loss, parts.loss
    out = replace(out, size_from=source, predicted_loss=loss, predicted_loss_interval=interval,
                  fit_interval=fit_interval, loss_from=loss_from,
                  uncorrected_loss=uncorrected, lean_percent=100.0 * math.expm1(parts.lean)
                  if parts.lean else None,
                  noise_source=noise.source if noise else None,
                  noise_std=noise.std if noise else None, noise_dof=noise.dof if noise else None,
                  model_error_std=parts.model_std, model_error_dof=parts.model_dof,
                  interval_terms=parts.terms,
                  candidate=PredictedCandidate(
                      candidate.model_config.hidden_dim, candidate.model_config.num_layers,
                      float(candidate.params), float(candidate.tokens), float(candidate.flops),
                      candidate.batch_size, candidate.train_steps))
    options = {"eval_every": max(1, candidate.train_steps // config.eval_points),
               **config.train_options}
    train = training_config(candidate, config.data, options,
                            output_path=join_url(config.output_path, PREDICTION_RUN))
    # pre-registered: the prediction is on disk, naming the fit that made it, before the
    # run that checks it starts
    out = replace(out, status=RunStatus.REGISTERED, fit_key=_step_folder(config.fit_path),
                  registered_at=_now())
    write_artifact(config.output_path, PREDICTION, out)
    out = replace(out, run_started_at=_now())
    summary, status, reason = _train(train)
    achieved = summary.metric(fit.metric) if summary is not None else None
    out = replace(out, status=status, reason=reason, achieved_loss=achieved, summary=summary)
    if achieved is not None and loss is not None:
        out = replace(out, error_percent=100.0 * (loss - achieved) / achieved)
        if interval is not None and interval[0] < interval[1]:
            out = replace(out, within_interval=bool(interval[0] <= achieved <= interval[1]))
    write_artifact(config.output_path, PREDICTION, out)
    return out


# -- the report ------------------------------------------------------------------------------

def study_result(title: str, fit_path: str,
                 predictions: Mapping[str, str] | Sequence[tuple[str, str]]) -> StudyResult:
    """The ``StudyResult`` from a fit step's output and the prediction outputs: label ->
    folder, or (label, folder) pairs where a label has several held-out budgets (its nearest
    is ``predictions[label]``, the others ``further``)."""
    fits = read_fits(fit_path)
    pairs = list(predictions.items()) if isinstance(predictions, Mapping) else list(predictions)
    found = sorted((p for _, path in pairs if (p := read_prediction(path)) is not None),
                   key=lambda p: p.budget)
    nearest: dict[str, Prediction] = {}
    further = []
    for p in found:
        if p.label in nearest:
            further.append(p)
        else:
            nearest[p.label] = p
    return StudyResult(title=title, metric=fits.metric, labels=fits.labels, fits=fits.fits,
                       predictions={label: nearest[label] for label in fits.labels
                                    if label in nearest},
                       further=tuple(further),
                       comparisons=fits.comparisons, comparison_error=fits.comparison_error,
                       not_compared=fits.not_compared,
                       baseline=fits.baseline, model_error=fits.model_error,
                       why_no_model_error=fits.why_no_model_error,
                       runs=tuple(read_rows(fit_path)))


def write_study_report(config: StudyReportConfig) -> str:
    """``report.md``, ``study.json`` and the plots; returns the report's path."""
    from marin.scaling_laws.study.report import render_report

    result = study_result(config.title, config.fit_path,
                          [(p.label, p.path) for p in config.predictions])
    return render_report(result, config.output_path)
