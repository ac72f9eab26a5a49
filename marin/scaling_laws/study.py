"""An IsoFLOP study as one executor graph, from raw text to a checked prediction.

    from marin.scaling_laws.study import StudyCorpus, isoflop_study
    steps = isoflop_study("isoflop/shakespeare", StudyCorpus(train=("data/train/*.txt",),
                          validation=("data/valid.txt",)), budgets=(1e11, 3e11, 1e12),
                          heuristic=CompletedAdamhHeuristic(...), tokenizer_vocab_size=1024,
                          predict_budget=3e12)
    executor_main(steps)

The graph, every node an ``ExecutorStep`` under ``<prefix>/<name>/``:

* ``tokenizer``: a byte-level BPE trained on the corpus (only with ``tokenizer_vocab_size``;
  otherwise the named ``tokenizer``, GPT-2 by default, is used);
* ``tokenized``: one token cache shared by every run (built once, then a cache hit);
* ``runs/<group>/<run>``: one training run per candidate of the heuristic per budget.
  ``group`` is ``<study>-<budget>`` and ``run`` a W&B-style run name
  (``<study>-<budget>-h<hidden>-l<layers>``), both recorded in the run's ``outcome.json``;
* ``fit``: reads every run's outcome and summary and writes ``runs.csv`` and ``fit.json``
  (Approach 2 per budget and across budgets, Approach 3 with bootstrap intervals, and
  predictions at larger budgets);
* ``prediction`` (with ``predict_budget``): the checked prediction, see below;
* ``report``: ``report.md`` with the runs, the fitted laws, the predictions and the check,
  and the plots as PNG and HTML.

Design note: the held-out budget is trained once, at the model size the fit predicts; that
size is only known after the fit. Rather than plan the graph in two passes (a graph that
changes once the fit exists could not be dry-run or hashed ahead of time), the
``prediction`` step depends on the fit, reads ``fit.json``, builds the candidate with the
heuristic, trains it in-process under its own output, and writes ``prediction.json``. The
graph stays static, and a changed fit gives the prediction a new version. The report is a
step of its own because it shows the prediction's outcome, which comes after the fit.

A run that diverges, runs out of memory or has an invalid config still finishes its step:
its ``outcome.json`` says why, and the fit lists it as excluded with that reason. These
outcomes are properties of the candidate and would recur on a retry. Any other error fails
the step as usual (the executor retries it on the next run), and the fit waits for it.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from marin.execution.errors import one_line
from marin.execution.graph import StepGraph
from marin.execution.step import (
    ComputeEstimate,
    ExecutorStep,
    StepResources,
    output_path_of,
    this_output_path,
)
from marin.models.config import TransformerConfig

if TYPE_CHECKING:
    from marin.execution.executor import RunResult
    from marin.execution.planning import Plan
from marin.processing.tokenize.inputs import fingerprint_inputs
from marin.processing.tokenize.step import TokenizeConfig, tokenize
from marin.processing.tokenize.tokenizer_training import TrainTokenizerConfig, train_tokenizer
from marin.scaling_laws.candidates import CandidateConfig
from marin.scaling_laws.study_report import parametric_of
from marin.storage.files import atomic_write, exists, join_url, open_url
from marin.training.hyperparameters import OptimizerHyperparameters
from marin.training.metric_names import EVAL_LOSS, canonical

logger = logging.getLogger("marin.scaling_laws")

MIN_RUNS_PER_BUDGET = 3
MIN_RUNS_PARAMETRIC = 5
FAR_TARGET = 1e21


@dataclass(frozen=True)
class StudyCorpus:
    """The study's text.

    Attributes:
        train: files, folders or globs of documents (any fsspec URL: local, ``gs://``,
            ``s3://``, ``hf://``; .txt, .jsonl[.gz|.zst] or .parquet).
        validation: the same for the held-out text that eval loss is measured on.
        text_field: the JSON-lines field or Parquet column holding the text.
    """

    train: tuple[str, ...]
    validation: tuple[str, ...] = ()
    text_field: str = "text"


@dataclass(frozen=True)
class StudyRun:
    """One run as the fit reads it: its names, budget and output folder."""

    name: str
    group: str
    budget: float
    path: str


@dataclass(frozen=True)
class CandidateRunConfig:
    """A training run of the sweep: the trainer's config, and the run's place in the study.

    The fields mirror ``marin.training.TrainLmConfig`` (built from them when the run starts),
    so that building and planning a study never imports JAX.

    Attributes:
        cache_path: the token cache (the study's tokenize step).
        model: the candidate's model shape.
        batch_size, train_steps, optimizer: from the heuristic.
        hardware: the preset the candidate was planned for (None: none; MFU is then
            measured against the trainer's default preset).
        run_name: W&B-style run name, unique in the study.
        group: the run's group, one per budget.
        budget: the FLOP budget the run belongs to.
        train_options: further ``TrainLmConfig`` fields (``eval_every``, ``compute_dtype``...).
        output_path: the run's folder (metrics, summary, checkpoints, ``outcome.json``).
    """

    cache_path: str
    model: TransformerConfig
    batch_size: int
    train_steps: int
    optimizer: OptimizerHyperparameters
    hardware: str | None
    run_name: str
    group: str
    budget: float
    train_options: dict[str, Any] = field(default_factory=dict)
    output_path: str = this_output_path()


@dataclass(frozen=True)
class StudyFitConfig:
    """Attributes:
        runs: the runs to fit (their output folders are dependencies).
        targets: budgets to predict the optimum at (larger tiers).
        holdout_budget: the held-out budget, predicted here and checked by ``prediction``.
        bootstrap: resamples for the Approach 3 intervals.
        output_path: where ``runs.csv`` and ``fit.json`` go.
    """

    runs: tuple[StudyRun, ...]
    targets: tuple[float, ...] = ()
    holdout_budget: float | None = None
    bootstrap: int = 200
    output_path: str = this_output_path()


@dataclass(frozen=True)
class PredictionConfig:
    """Attributes:
        fit_path: the fit step's output.
        cache_path: the token cache the study trains on.
        budget: the held-out budget.
        heuristic: builds the candidate nearest the predicted optimal size.
        run_name, group: names of the predicted run.
        train_options: ``TrainLmConfig`` fields applied to the run (as for the sweep).
        output_path: where ``prediction.json`` and the run (``run/``) go.
    """

    fit_path: str
    cache_path: str
    budget: float
    heuristic: Any
    run_name: str
    group: str
    train_options: dict[str, Any] = field(default_factory=dict)
    output_path: str = this_output_path()


@dataclass(frozen=True)
class StudyReportConfig:
    """Attributes:
        title: the report's heading.
        fit_path: the fit step's output.
        prediction_path: the prediction step's output, or None.
        output_path: where ``report.md`` and the plots go.
    """

    title: str
    fit_path: str
    prediction_path: str | None = None
    output_path: str = this_output_path()


# -- the graph ---------------------------------------------------------------------------------

def budget_tag(budget: float) -> str:
    """``3e19`` for 3e19, ``1.6e11`` for 1.6e11: the budget in run and group names."""
    mantissa, exponent = f"{budget:.1e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


def run_name(study: str, candidate: CandidateConfig) -> str:
    m = candidate.model_config
    return f"{study}-{budget_tag(candidate.budget)}-h{m.hidden_dim}-l{m.num_layers}"


def study_candidates(heuristic: Any, budgets: Sequence[float]
                     ) -> dict[float, list[CandidateConfig]]:
    """The heuristic's candidates per budget; an error names a budget that has none."""
    out: dict[float, list[CandidateConfig]] = {}
    for budget in budgets:
        explain = getattr(heuristic, "candidates_or_explain", None)
        out[budget] = list(explain(budget) if explain else heuristic.candidates_for_budget(budget))
        if not out[budget]:
            raise ValueError(f"the heuristic has no candidate for a budget of {budget:.3g} FLOPs")
    return out


def isoflop_study(name: str, corpus: StudyCorpus, budgets: Sequence[float], heuristic: Any,
                  *, tokenizer: str = "gpt2", tokenizer_vocab_size: int | None = None,
                  predict_budget: float | None = None, bootstrap: int = 200,
                  train_options: dict[str, Any] | None = None,
                  eval_points: int = 4) -> list[ExecutorStep]:
    """Every step of an IsoFLOP study; the last one is the report.

    Args:
        name: the study's name: its folder under the prefix and the stem of run names.
        corpus: the text to train and evaluate on.
        budgets: FLOP budgets swept with every candidate of ``heuristic``.
        heuristic: yields ``CandidateConfig`` per budget (``candidates_for_budget``); its
            ``vocab_size`` must cover the tokenizer's.
        tokenizer: a named tokenizer (``gpt2``) or a tokenizer.json path.
        tokenizer_vocab_size: train a byte-level BPE of this size on ``corpus.train``
            instead of using ``tokenizer``.
        predict_budget: a budget larger than ``budgets``, held out of the fit: the fitted
            optimum is trained there once and its loss checked against the prediction.
        bootstrap: resamples for the Approach 3 intervals.
        train_options: ``TrainLmConfig`` fields for every run (``compute_dtype``,
            ``eval_batches``, ``seed``, ...).
        eval_points: evaluations per run (so the report can show eval loss falling).
    """
    budgets = sorted(float(b) for b in budgets)
    _check_study(name, budgets, heuristic, tokenizer_vocab_size, predict_budget)
    tokenizer_step = None
    if tokenizer_vocab_size is not None:
        tokenizer_step = ExecutorStep(
            f"{name}/tokenizer", train_tokenizer,
            TrainTokenizerConfig(input_paths=corpus.train, vocab_size=tokenizer_vocab_size,
                                 text_field=corpus.text_field),
            description=f"byte-level BPE, {tokenizer_vocab_size} tokens")
    tokenized = ExecutorStep(
        f"{name}/tokenized", tokenize,
        TokenizeConfig(train_paths=corpus.train, validation_paths=corpus.validation,
                       tokenizer=output_path_of(tokenizer_step) if tokenizer_step else tokenizer,
                       text_field=corpus.text_field,
                       input_fingerprint=_fingerprint(corpus)),
        description="one token cache shared by every run",
        resumable=True)  # a new attempt keeps the finished ranges
    stem = name.rstrip("/").rpartition("/")[2]
    options = dict(train_options or {})
    runs: list[StudyRun] = []
    train_steps: list[ExecutorStep] = []
    for budget, candidates in study_candidates(heuristic, budgets).items():
        group = f"{stem}-{budget_tag(budget)}"
        for candidate in candidates:
            step = candidate_step(f"{name}/runs/{group}", stem, tokenized, candidate, group,
                                  {"eval_every": max(1, candidate.train_steps // eval_points),
                                   **options})
            train_steps.append(step)
            runs.append(StudyRun(step.config.run_name, group, budget, output_path_of(step)))
    targets = next_tiers(budgets[-1] if predict_budget is None else predict_budget, 2)
    fit = ExecutorStep(f"{name}/fit", fit_study,
                       StudyFitConfig(runs=tuple(runs), targets=(*targets, FAR_TARGET),
                                      holdout_budget=predict_budget, bootstrap=bootstrap),
                       description=f"Approach 2 and 3 fits over {len(runs)} runs")
    prediction = None
    if predict_budget is not None:
        prediction = prediction_step(name, stem, fit, tokenized, heuristic, predict_budget,
                                     {"eval_every": 0, **options}, eval_points)
    report = ExecutorStep(
        f"{name}/report", write_study_report,
        StudyReportConfig(title=f"IsoFLOP study {stem}", fit_path=output_path_of(fit),
                          prediction_path=output_path_of(prediction) if prediction else None),
        description="report.md and plots")
    steps = [s for s in (tokenizer_step, tokenized) if s is not None]
    return [*steps, *train_steps, fit, *([prediction] if prediction else []), report]


def _check_study(name: str, budgets: list[float], heuristic: Any,
                 vocab: int | None, predict_budget: float | None) -> None:
    if not budgets:
        raise ValueError("isoflop_study needs at least one budget")
    if not name.strip("/"):
        raise ValueError("isoflop_study needs a name (the study's folder under the prefix)")
    heuristic_vocab = getattr(heuristic, "vocab_size", None)
    if vocab is not None and heuristic_vocab is not None and heuristic_vocab < vocab:
        raise ValueError(f"the heuristic's vocab_size ({heuristic_vocab}) is smaller than "
                         f"tokenizer_vocab_size ({vocab}); give the heuristic vocab_size={vocab}")
    if predict_budget is not None and predict_budget <= budgets[-1]:
        raise ValueError(f"predict_budget ({predict_budget:.3g}) must exceed the largest swept "
                         f"budget ({budgets[-1]:.3g}): it is the held-out budget")


def _fingerprint(corpus: StudyCorpus) -> str | None:
    """Local inputs are fingerprinted by content when the graph is built. Inputs made by
    other steps are identified by those steps' versions. Remote inputs are identified by
    their URL alone, so that planning touches no network: pin a revision
    (``hf://datasets/org/name@<commit>/...``) or use immutable object paths."""
    literal = [p for p in (*corpus.train, *corpus.validation) if isinstance(p, str)]
    local = [p for p in literal if "://" not in p or p.startswith("file://")]
    return fingerprint_inputs(local) if local and len(local) == len(literal) else None


def next_tiers(budget: float, count: int) -> list[float]:
    """The next ``count`` budgets of the 1-3-10 ladder above ``budget``."""
    out, current = [], budget
    for _ in range(count):
        exponent = math.floor(math.log10(current) + 1e-9)
        mantissa = current / 10**exponent
        current = (3 if mantissa < 3 - 1e-9 else 10) * 10**exponent
        out.append(float(f"{current:.6g}"))
    return out


def _resources(candidate: CandidateConfig) -> StepResources:
    if candidate.hardware is None:  # planned for no particular accelerator
        return StepResources()
    from marin.hardware import get_preset

    platform = get_preset(candidate.hardware).platform
    if platform == "gpu":
        return StepResources(gpus=candidate.devices)
    if platform == "tpu":
        return StepResources(tpu=f"{candidate.hardware.removeprefix('tpu-')}-{candidate.devices}")
    return StepResources()


def candidate_step(folder: str, study: str, tokenized: ExecutorStep,
                   candidate: CandidateConfig, group: str,
                   train_options: dict[str, Any]) -> ExecutorStep:
    """The step that trains one candidate of the sweep."""
    name = run_name(study, candidate)
    config = CandidateRunConfig(
        cache_path=output_path_of(tokenized), model=candidate.model_config,
        batch_size=candidate.batch_size, train_steps=candidate.train_steps,
        optimizer=candidate.optimizer, hardware=candidate.hardware, run_name=name,
        group=group, budget=candidate.budget, train_options=dict(train_options))
    return ExecutorStep(f"{folder}/{name}", run_candidate, config,
                        description=f"{candidate.params:.3g} params, {candidate.tokens:.3g} "
                        f"tokens, {candidate.flops:.3g} FLOPs",
                        resources=_resources(candidate),
                        estimate=ComputeEstimate(candidate.flops,
                                                 candidate.estimated_device_hours or 0.0))


def prediction_step(name: str, stem: str, fit: ExecutorStep, tokenized: ExecutorStep,
                    heuristic: Any, budget: float, train_options: dict[str, Any],
                    eval_points: int) -> ExecutorStep:
    """The checked prediction: depends on the fit; resources and estimate are those of the
    heuristic's largest candidate at ``budget`` (the run is chosen when the fit is known)."""
    candidates = study_candidates(heuristic, [budget])[budget]
    largest = max(candidates, key=lambda c: c.params)
    group = f"{stem}-{budget_tag(budget)}-heldout"
    config = PredictionConfig(fit_path=output_path_of(fit), cache_path=output_path_of(tokenized),
                              budget=budget, heuristic=heuristic, run_name=f"{group}-predicted",
                              group=group, train_options={"eval_points": eval_points,
                                                          **train_options})
    hours = max(c.estimated_device_hours or 0.0 for c in candidates)
    return ExecutorStep(f"{name}/prediction", run_prediction, config,
                        description=f"train the predicted optimum at {budget:.3g} FLOPs",
                        resources=_resources(largest), estimate=ComputeEstimate(budget, hours))


# -- running a candidate -----------------------------------------------------------------------

def _candidate_failures() -> tuple[type[BaseException], ...]:
    from marin.training.trainer import (
        TrainingConfigError,
        TrainingDivergedError,
        TrainingOutOfMemoryError,
    )

    return TrainingDivergedError, TrainingOutOfMemoryError, TrainingConfigError


def _train(train_config: Any) -> tuple[dict[str, Any] | None, str, str | None]:
    """Train; returns (summary, status, reason) with status ``ok``, ``diverged``,
    ``out_of_memory`` or ``invalid_config``."""
    from marin.training.trainer import TrainingDivergedError, TrainingOutOfMemoryError, train_lm

    try:
        return train_lm(train_config), "ok", None
    except _candidate_failures() as e:
        status = ("diverged" if isinstance(e, TrainingDivergedError) else "out_of_memory"
                  if isinstance(e, TrainingOutOfMemoryError) else "invalid_config")
        reason = one_line(e)
        logger.warning("run %s: %s (%s); it is excluded from the fit", train_config.output_path,
                       status, reason)
        return None, status, reason


def run_candidate(config: CandidateRunConfig) -> dict[str, Any]:
    """Train one candidate and write ``outcome.json`` (names, status, reason, summary)."""
    from marin.training.trainer import TrainLmConfig

    train = TrainLmConfig(cache_path=config.cache_path, model=config.model,
                          batch_size=config.batch_size, train_steps=config.train_steps,
                          optimizer=config.optimizer, output_path=config.output_path,
                          **_hardware(config.hardware), **config.train_options)
    summary, status, reason = _train(train)
    outcome = {"run_name": config.run_name, "group": config.group, "budget": config.budget,
               "status": status, "reason": reason, "summary": summary,
               "hidden_dim": config.model.hidden_dim, "num_layers": config.model.num_layers,
               "eval_losses": _eval_losses(config.output_path)}
    _write_json(join_url(config.output_path, "outcome.json"), outcome)
    return outcome


def _eval_losses(run_path: str) -> list[float]:
    try:
        with open_url(join_url(run_path, "metrics.jsonl"), "r") as f:
            records = [canonical(json.loads(line)) for line in f if line.strip()]
    except FileNotFoundError:
        return []
    return [r[EVAL_LOSS] for r in records if r.get(EVAL_LOSS) is not None]


# -- the fit -----------------------------------------------------------------------------------

RUN_COLUMNS = ("run", "group", "budget", "hidden_dim", "num_layers", "params", "tokens",
               "flops", "loss", "train_loss", "first_eval_loss", "status", "reason")


def read_runs(runs: Sequence[StudyRun]) -> list[dict[str, Any]]:
    """A row per run: sizes and losses from its outcome; status and reason when it failed."""
    rows = []
    for run in runs:
        outcome = _read_json(join_url(run.path, "outcome.json"))
        row: dict[str, Any] = {"run": run.name, "group": run.group, "budget": run.budget,
                               "path": run.path}
        if outcome is None:
            rows.append({**row, "status": "missing", "reason": f"no outcome.json in {run.path}"})
            continue
        summary = outcome.get("summary") or {}
        evals = outcome.get("eval_losses") or []
        loss = summary.get("eval_loss")
        row.update(hidden_dim=outcome.get("hidden_dim"), num_layers=outcome.get("num_layers"),
                   params=summary.get("params"), tokens=summary.get("tokens"),
                   flops=summary.get("flops"), train_loss=summary.get("train_loss"),
                   loss=loss if loss is not None else summary.get("train_loss"),
                   first_eval_loss=evals[0] if evals else None,
                   status=outcome.get("status", "ok"), reason=outcome.get("reason"))
        if row["status"] == "ok" and not _finite(row["loss"]):
            row.update(status="no_loss", reason=f"final loss is {row['loss']}")
        rows.append(row)
    return rows


def fit_study(config: StudyFitConfig) -> dict[str, Any]:
    """``runs.csv`` and ``fit.json`` from the runs' outcomes."""
    rows = read_runs(config.runs)
    _write_text(join_url(config.output_path, "runs.csv"), _csv(rows))
    fit = fit_runs(rows, config.targets, config.holdout_budget, config.bootstrap)
    _write_json(join_url(config.output_path, "fit.json"), fit)
    return fit


def fit_runs(rows: Sequence[dict[str, Any]], targets: Sequence[float] = (),
             holdout_budget: float | None = None, bootstrap: int = 200) -> dict[str, Any]:
    """Approach 2 per budget and across budgets, Approach 3, and predictions; every part
    that the data cannot support is reported with its reason instead of raising."""
    from marin.scaling_laws.isoflop_analysis import RunRecord

    used = [r for r in rows if r["status"] == "ok"]
    excluded = [{"run": r["run"], "budget": r["budget"], "status": r["status"],
                 "reason": r["reason"]} for r in rows if r["status"] != "ok"]
    records = [RunRecord(float(r["params"]), float(r["tokens"]), float(r["flops"]),
                         float(r["loss"]), float(r["budget"])) for r in used]
    out: dict[str, Any] = {"runs": len(rows), "used": len(used), "excluded": excluded}
    out.update(_approach2(records))
    out["approach3"] = _approach3(records, bootstrap)
    out["predictions"] = [predict_at(out, b) for b in targets]
    out["holdout"] = predict_at(out, holdout_budget) if holdout_budget else None
    return out


def _approach2(records: list[Any]) -> dict[str, Any]:
    from dataclasses import asdict

    import numpy as np

    from marin.scaling_laws.isoflop_analysis import (
        ScalingFitError,
        fit_budget,
        fit_power_law,
        group_by_budget,
    )

    fitted, not_fitted = [], []
    for budget, runs in group_by_budget(records).items():
        if len(runs) < MIN_RUNS_PER_BUDGET:
            not_fitted.append({"budget": budget, "runs": len(runs), "reason":
                               f"{len(runs)} usable run(s); a parabola needs at least "
                               f"{MIN_RUNS_PER_BUDGET}"})
            continue
        try:
            fitted.append(fit_budget(budget, runs))
        except ScalingFitError as e:
            not_fitted.append({"budget": budget, "runs": len(runs), "reason": str(e)})
    out: dict[str, Any] = {"budgets": [asdict(f) for f in fitted], "budgets_not_fitted": not_fitted}
    if len(fitted) < 2:
        out["approach2"] = {"error": f"{len(fitted)} budget(s) could be fitted; the power laws "
                            "N_opt(C) and D_opt(C) need at least 2"}
        return out
    c = np.array([f.budget for f in fitted])
    laws = {q: asdict(fit_power_law(c, np.array([getattr(f, f"optimal_{q}") for f in fitted]), q))
            for q in ("params", "tokens", "loss")}
    out["approach2"] = laws
    return out


def _approach3(records: list[Any], bootstrap: int) -> dict[str, Any]:
    from marin.scaling_laws.parametric import fit_parametric_loss

    if len(records) < MIN_RUNS_PARAMETRIC:
        return {"error": f"{len(records)} usable run(s); L(N, D) needs at least "
                f"{MIN_RUNS_PARAMETRIC}"}
    import numpy as np
    from threadpoolctl import threadpool_limits

    try:
        # L-BFGS makes thousands of tiny BLAS calls; a multithreaded BLAS spends far more
        # time waking its threads than computing (18x slower on two busy cores).
        with threadpool_limits(limits=1, user_api="blas"), np.errstate(all="ignore"):
            fit = fit_parametric_loss([r.params for r in records], [r.tokens for r in records],
                                      [r.loss for r in records], bootstrap=bootstrap,
                                      flops=[r.flops for r in records])
    except ValueError as e:
        return {"error": str(e)}
    samples = fit.bootstrap_samples
    return {**fit.as_dict(), "objective": fit.objective, "standard_errors": fit.standard_errors,
            "flops_coefficient": fit.flops_coefficient, "flops_exponent": fit.flops_exponent,
            "bootstrap_samples": [] if samples is None else samples.tolist()}


def _law(fit: dict[str, Any], quantity: str):
    from marin.scaling_laws.isoflop_analysis import ScalingFit

    a2 = fit.get("approach2") or {}
    return ScalingFit(**a2[quantity]) if quantity in a2 else None


def loss_interval(parametric: Any, params: float, tokens: float,
                  level: float = 0.95) -> tuple[float, float] | None:
    """A bootstrap interval of the parametric loss at (params, tokens); None when too few
    resamples gave a finite loss."""
    import numpy as np

    s = parametric.bootstrap_samples
    if s is None or len(s) < 2:
        value = float(parametric.loss(params, tokens))
        return value, value
    with np.errstate(all="ignore"):  # resamples that ran off to infinity are dropped
        losses = s[:, 0] + s[:, 1] / params ** s[:, 3] + s[:, 2] / tokens ** s[:, 4]
    losses = losses[np.isfinite(losses)]
    if len(losses) < 2:
        return None
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(losses, [tail, 100 - tail])
    return float(low), float(high)


def _law_interval(law: Any, budget: float) -> tuple[float, float] | None:
    """The power law's 95% interval; None when it has no residual degrees of freedom (two
    budgets: a line through two points has no error estimate)."""
    return law.interval(budget) if law.exponent_se > 0 else None


def predict_at(fit: dict[str, Any], budget: float) -> dict[str, Any]:
    """Optimal params, tokens and loss at ``budget`` by each fit that exists."""
    out: dict[str, Any] = {"budget": budget}
    params_law, tokens_law, loss_law = (_law(fit, q) for q in ("params", "tokens", "loss"))
    if params_law is not None and tokens_law is not None:
        out["approach2"] = {"params": float(params_law.predict(budget)),
                            "params_interval": _law_interval(params_law, budget),
                            "tokens": float(tokens_law.predict(budget)),
                            "tokens_interval": _law_interval(tokens_law, budget),
                            "loss": float(loss_law.predict(budget)) if loss_law else None}
    parametric = parametric_of(fit)
    if parametric is not None:
        optimum = parametric.predict_optimal(budget)
        out["approach3"] = {"params": optimum.params, "params_interval": optimum.params_interval,
                            "tokens": optimum.tokens, "tokens_interval": optimum.tokens_interval,
                            "loss": float(parametric.loss(optimum.params, optimum.tokens)),
                            "loss_interval": loss_interval(parametric, optimum.params,
                                                           optimum.tokens)}
    return out


# -- the checked prediction --------------------------------------------------------------------

def run_prediction(config: PredictionConfig) -> dict[str, Any]:
    """Build the candidate nearest the predicted optimum, train it, compare the losses."""
    from marin.scaling_laws.candidates import nearest_candidate

    fit = _read_json(join_url(config.fit_path, "fit.json"))
    if fit is None:
        raise FileNotFoundError(f"no fit.json in {config.fit_path}")
    holdout = predict_at(fit, config.budget)
    source = "approach2" if "approach2" in holdout else "approach3" \
        if "approach3" in holdout else None
    out: dict[str, Any] = {"budget": config.budget, "run_name": config.run_name,
                           "group": config.group, "predicted": holdout, "size_from": source}
    if source is None:
        out.update(status="not_predicted", reason="neither fit succeeded; see fit.json")
        _write_json(join_url(config.output_path, "prediction.json"), out)
        return out
    n_opt = holdout[source]["params"]
    candidate = nearest_candidate(study_candidates(config.heuristic, [config.budget])
                                  [config.budget], n_opt)
    predicted_loss, interval, loss_from = _predicted_loss(fit, holdout, candidate)
    out["candidate"] = {"hidden_dim": candidate.model_config.hidden_dim,
                        "num_layers": candidate.model_config.num_layers,
                        "params": candidate.params, "tokens": candidate.tokens,
                        "flops": candidate.flops, "batch_size": candidate.batch_size,
                        "train_steps": candidate.train_steps}
    out.update(predicted_loss=predicted_loss, predicted_loss_interval=interval,
               loss_from=loss_from)
    summary, status, reason = _train(_prediction_train_config(config, candidate))
    achieved = None if summary is None else (summary.get("eval_loss")
                                             if summary.get("eval_loss") is not None
                                             else summary.get("train_loss"))
    out.update(status=status, reason=reason, achieved_loss=achieved, summary=summary)
    if achieved is not None and predicted_loss is not None:
        out["error_percent"] = 100.0 * (predicted_loss - achieved) / achieved
        if interval is not None and interval[0] < interval[1]:
            out["within_interval"] = bool(interval[0] <= achieved <= interval[1])
    _write_json(join_url(config.output_path, "prediction.json"), out)
    return out


def _predicted_loss(fit: dict[str, Any], holdout: dict[str, Any], candidate: CandidateConfig
                    ) -> tuple[float | None, tuple[float, float] | None, str | None]:
    """Approach 3's loss at the candidate's own (N, D); else Approach 2's loss trend."""
    parametric = parametric_of(fit)
    if parametric is not None:
        value = float(parametric.loss(candidate.params, candidate.tokens))
        return value, loss_interval(parametric, candidate.params, candidate.tokens), \
            "approach3"
    loss = (holdout.get("approach2") or {}).get("loss")
    return loss, (loss, loss) if loss is not None else None, "approach2" if loss else None


def _prediction_train_config(config: PredictionConfig, candidate: CandidateConfig) -> Any:
    from marin.training.trainer import TrainLmConfig

    options = dict(config.train_options)
    points = int(options.pop("eval_points", 4))
    options.setdefault("eval_every", 0)
    if not options["eval_every"]:
        options["eval_every"] = max(1, candidate.train_steps // points)
    train = TrainLmConfig(cache_path=config.cache_path, model=candidate.model_config,
                          batch_size=candidate.batch_size, train_steps=candidate.train_steps,
                          optimizer=candidate.optimizer, **_hardware(candidate.hardware),
                          output_path=join_url(config.output_path, "run"))
    return replace(train, **options)


# -- the report --------------------------------------------------------------------------------

def write_study_report(config: StudyReportConfig) -> str:
    """``report.md`` and the plots; returns the report's path."""
    from marin.scaling_laws.study_report import render_report

    fit = _read_json(join_url(config.fit_path, "fit.json"))
    if fit is None:
        raise FileNotFoundError(f"no fit.json in {config.fit_path}")
    with open_url(join_url(config.fit_path, "runs.csv"), "r") as f:
        rows = list(csv.DictReader(f))
    prediction = None
    if config.prediction_path:
        prediction = _read_json(join_url(config.prediction_path, "prediction.json"))
    return render_report(config.title, rows, fit, prediction, config.output_path)


# -- small helpers -----------------------------------------------------------------------------

def _hardware(preset: str | None) -> dict[str, str]:
    """``TrainLmConfig``'s hardware field for a candidate's preset (None: its default)."""
    return {} if preset is None else {"hardware": preset}


def _finite(value: Any) -> bool:
    try:
        return value is not None and math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def _csv(rows: Sequence[dict[str, Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=RUN_COLUMNS, extrasaction="ignore",
                            lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if row.get(k) is None else row.get(k)) for k in RUN_COLUMNS})
    return buffer.getvalue()


def _read_json(path: str) -> Any:
    try:
        with open_url(path, "r") as f:
            return json.load(f)
    except FileNotFoundError:
        return None


def _write_text(path: str, text: str) -> None:
    with atomic_write(path, "w") as f:  # a later step or reader never sees half a file
        f.write(text)


def _write_json(path: str, data: Any) -> None:
    _write_text(path, json.dumps(data, indent=1, default=_jsonable))


def _jsonable(value: Any) -> Any:
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, tuple):
        return list(value)
    return str(value)


# -- after a run -------------------------------------------------------------------------------

def study_outputs(graph: StepGraph) -> dict[str, str]:
    """Output folders of a study's ``fit``, ``prediction`` and ``report`` steps in ``graph``."""
    kinds = {fit_study: "fit", run_prediction: "prediction", write_study_report: "report"}
    return {kinds[n.step.fn]: n.output_path for n in graph.nodes if n.step.fn in kinds}


def print_study_summary(result: RunResult | Plan, options: Any = None,
                        file: Any = None) -> None:
    """After ``executor_main`` (or as an ``Experiment``'s ``after``): the findings of the
    run that ``result`` is, and where its report is. Nothing for a dry run (a ``Plan``), nor
    when this run did not finish the report (a summary of an older run would mislead)."""
    import sys

    from marin.execution.executor import RunResult

    if not isinstance(result, RunResult) or not result.ok:
        return
    from marin.execution.states import StepState
    from marin.scaling_laws.study_report import summary_lines

    out = study_outputs(result.plan.graph)
    stored = {e.output_path: e.status for e in result.plan.entries}
    done = {s.output_path for s in result.steps  # this run's, or an earlier run's, skipped
            if s.state.is_done or (s.state is StepState.SKIPPED
                                   and stored.get(s.output_path) is StepState.SUCCEEDED)}
    if "fit" not in out or "report" not in out or out["report"] not in done:
        return
    fit = _read_json(join_url(out["fit"], "fit.json"))
    report = join_url(out["report"], "report.md")
    if fit is None or not exists(report):
        return
    prediction = _read_json(join_url(out["prediction"], "prediction.json")) \
        if "prediction" in out else None
    stream = file or sys.stdout
    for line in summary_lines(fit, prediction):
        print(line, file=stream)
    print(f"report: {report}", file=stream)
