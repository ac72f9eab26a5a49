"""An IsoFLOP study as one executor graph, from raw text to checked predictions per label.

    study = isoflop_study("isoflop/compare", {"plays": StudyCorpus(...),
                                               "docs": StudyCorpus(...),
                                               "mix": Mixture({"plays": 0.5, "docs": 0.5})},
                          budgets=(1e11, 3e11, 1e12), heuristic=heuristic,
                          tokenizer_vocab_size=1024, predict_budget=3e12)
    executor_main(study)                  # an IsoFlopStudy is taken as its list of steps
    study.fit, study.predictions["mix"], study.report, study.steps

The graph, every node an ``ExecutorStep`` under ``<prefix>/<name>/``:

* ``tokenizer``: a byte-level BPE trained on every corpus's training text (only with
  ``tokenizer_vocab_size``; otherwise the named ``tokenizer``, GPT-2 by default);
* ``tokenized/<corpus>``: each corpus's token cache, built once (``tokenized`` for a
  study of one corpus);
* ``runs/<group>/<run>``: one run per label per candidate per budget (and seed replicates
  of a few); ``group`` is ``<study>-<label>-<budget>``, ``run`` adds the model's shape;
  for one corpus the label is left out of the names;
* ``fit``: every label's fits, their comparison (``runs.csv``, ``fit.json``);
* ``prediction/<label>`` (with ``predict_budget``): each label's checked prediction
  (``prediction`` for one corpus);
* ``report``: ``report.md``, ``study.json`` and the plots, every label overlaid.

Design note: the held-out budget is trained once per label, at the model size its fit
predicts; that size is only known after the fit. Rather than plan the graph in two passes (a
graph that changes once the fit exists could not be dry-run or hashed ahead of time), each
``prediction`` step depends on the fit, reads ``fit.json``, builds the candidate, trains it
under its own output, and writes ``prediction.json``. The graph stays static, and a changed
fit gives the prediction a new version. Candidate runs and predictions are resumable.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from marin.execution import ComputeEstimate, ExecutorStep, output_path_of
from marin.processing.tokenize.inputs import fingerprint_inputs
from marin.processing.tokenize.step import TokenizeConfig, tokenize
from marin.processing.tokenize.tokenizer_training import TrainTokenizerConfig, train_tokenizer
from marin.scaling_laws.candidates import CandidateConfig
from marin.scaling_laws.runs import (
    describe,
    estimate_of,
    resources_of,
    training_config,
)
from marin.scaling_laws.scaling_heuristics import ScalingHeuristic
from marin.scaling_laws.study.configs import (
    CandidateRunConfig,
    LabelPath,
    PredictionConfig,
    StudyFitConfig,
    StudyReportConfig,
    StudyRun,
    budget_tag,
    next_tiers,
    run_name,
    study_candidates,
)
from marin.scaling_laws.study.labels import (
    DEFAULT_LABEL,
    Mixture,
    StudyCorpus,
    StudyInputError,
    StudyLabels,
    check_metric,
    study_labels,
    validation_sets,
)
from marin.scaling_laws.study.ladder import (
    DECAY_SHAPE,
    SCHEDULES,
    ShapeLadder,
    ladder_line,
    ladder_runs,
)
from marin.scaling_laws.study.steps import (
    fit_study,
    run_candidate,
    run_prediction,
    write_study_report,
)
from marin.scaling_laws.train_options import TrainOptions
from marin.training.config import DataComponent, ValidationSet

__all__ = ["FAR_TARGET", "IsoFlopStudy", "isoflop_study"]

FAR_TARGET = 1e21


@dataclass(frozen=True)
class IsoFlopStudy:
    """An IsoFLOP study: every step of its graph and a handle on each step that matters.
    ``executor_main``, ``Executor.run`` and ``load_study`` take it as they take its steps.

    Attributes:
        name: the study's folder under the prefix (``isoflop/compare``).
        labels: the labels, in order (``("default",)`` for a study of one corpus).
        metric: what the fits use (``macro_bpb``, ``<set>/loss``, ...).
        steps: every step, dependencies first; the report last.
        fit: the step writing every label's fits (``runs.csv``, ``fit.json``).
        predictions: label -> the step checking its prediction at the (first) held-out
            budget (empty without ``predict_budget``).
        further_predictions: label -> the steps checking its predictions at the further
            held-out budgets, nearest first (empty with one held-out budget).
        report: the step writing ``report.md``, ``study.json`` and the plots.
        runs: the candidate runs, in the order they were planned.
        tokenizer: the tokenizer-training step (None with a named tokenizer).
        schedule: ``scratch`` (every run from scratch) or ``cooldown`` (a ladder).
        ladders: with ``cooldown``, each label's model shapes' ``ShapeLadder`` (a seed
            replicate's own stable run too), each with its stable step.
        stable_runs: the ladders' stable runs (empty from scratch).
    """

    name: str
    labels: tuple[str, ...]
    metric: str
    steps: tuple[ExecutorStep, ...]
    fit: ExecutorStep
    report: ExecutorStep
    predictions: Mapping[str, ExecutorStep] = field(default_factory=dict)
    runs: tuple[ExecutorStep, ...] = ()
    tokenizer: ExecutorStep | None = None
    further_predictions: Mapping[str, tuple[ExecutorStep, ...]] = field(default_factory=dict)
    schedule: str = "scratch"
    ladders: tuple[ShapeLadder, ...] = ()
    stable_runs: tuple[ExecutorStep, ...] = ()


def isoflop_study(name: str, corpora: StudyCorpus | Mapping[str, StudyCorpus | Mixture],
                  budgets: Sequence[float], heuristic: ScalingHeuristic, *, tokenizer: str = "gpt2",
                  tokenizer_vocab_size: int | None = None,
                  predict_budget: float | Sequence[float] | None = None,
                  bootstrap: int = 200,
                  train_options: TrainOptions | Mapping[str, Any] | None = None,
                  eval_points: int = 4,
                  validation: Mapping[str, str] | Sequence[str] | None = None,
                  metric: str = "macro_bpb", baseline: str | None = None,
                  replicates: int = 0, schedule: str = "scratch",
                  cooldown_fraction: float = 0.2) -> IsoFlopStudy:
    """An IsoFLOP study: every step (the last one is the report) and handles on them.

    Args:
        name: the study's name: its folder under the prefix and the stem of run names.
        corpora: one ``StudyCorpus`` (the single label ``"default"``), or label ->
            ``StudyCorpus`` | ``Mixture`` of the labelled corpora.
        budgets: FLOP budgets swept with every candidate of ``heuristic``, for every label.
        heuristic: yields ``CandidateConfig`` per budget (``candidates_for_budget``); its
            ``vocab_size`` must cover the tokenizer's.
        tokenizer: a named tokenizer (``gpt2``) or a tokenizer.json path.
        tokenizer_vocab_size: train a byte-level BPE of this size on every corpus's training
            text instead of using ``tokenizer``.
        predict_budget: a budget larger than ``budgets``, held out of the fits, or several
            (``(2e11, 8e11)``: 2x and 8x past the fit): each label's fitted optimum is
            trained at each once and its loss checked against the prediction, which is
            written before its run starts.
        bootstrap: resamples for the Approach 3 intervals and the compute multipliers.
        train_options: a ``TrainOptions`` (or a mapping of its fields), the
            ``TrainLmConfig`` fields for every run (``compute_dtype``, ``eval_batches``,
            ``seed``, ...), checked by name and type now.
        eval_points: evaluations per run (so the report can show the metric falling).
        validation: the named validation sets every run evaluates: set name -> corpus
            label (its validation split), or a sequence of corpus labels. Default: every
            corpus that has validation text, named by its label.
        metric: what the fits use: ``macro_bpb`` (the mean over the sets of bits per byte,
            independent of the tokenizer), ``macro_loss``, ``<set>/bpb`` or ``<set>/loss``.
        baseline: the label the others' compute multipliers are relative to (the first).
        replicates: extra seeds for the middle candidate of every budget and label; their
            spread is the run-to-run noise in the prediction intervals (0: the noise is
            estimated from the fit's residuals).
        schedule: ``scratch``: every point is a run of its own; ``cooldown``: a ladder,
            every model shape's points the cooldowns of one stable run
            (``marin.scaling_laws.study.ladder``; held-out predictions stay from scratch).
        cooldown_fraction: with ``cooldown``, the fraction of each point's steps that is its
            cooldown.
    """
    budgets = sorted(float(b) for b in budgets)
    held_out = _held_out(predict_budget)
    predict_budget = held_out[0] if held_out else None
    labels = study_labels(corpora)
    sets = validation_sets(labels, validation)
    metric = check_metric(metric, sets)
    options = _options(train_options)
    _check_study(name, budgets, heuristic, tokenizer_vocab_size, held_out, labels,
                 baseline, replicates)
    if schedule not in SCHEDULES:
        raise StudyInputError(f"schedule={schedule!r} is no schedule; use one of "
                              f"{', '.join(map(repr, SCHEDULES))}")
    stem = name.rstrip("/").rpartition("/")[2]
    tokenizer_step = _tokenizer_step(name, labels, tokenizer_vocab_size)
    caches = {label: _tokenize_step(name, label, corpus, labels.single, tokenizer_step or
                                    tokenizer) for label, corpus in labels.corpora.items()}
    data = {label: output_path_of(caches[label]) for label in labels.corpora}
    data.update({label: tuple(DataComponent(c, output_path_of(caches[c]), w) for c, w in parts)
                 for label, parts in labels.mixtures.items()})
    if labels.single and sets == {DEFAULT_LABEL: DEFAULT_LABEL}:
        # the one corpus's own validation split: the trainer's default, recorded as
        # eval/loss and eval/bpb, whose macro figures are that split's
        metric = {f"{DEFAULT_LABEL}/bpb": "macro_bpb",
                  f"{DEFAULT_LABEL}/loss": "macro_loss"}.get(metric, metric)
    else:
        options["validation"] = tuple(ValidationSet(s, output_path_of(caches[c]))
                                      for s, c in sets.items())
    candidates = _candidates(heuristic, budgets, labels)
    train_steps: list[ExecutorStep] = []
    ladders: list[ShapeLadder] = []
    for label in labels.order:
        label_stem = stem if labels.single else f"{stem}-{label}"
        if schedule == "cooldown":
            shapes, branches = ladder_runs(name, label_stem, label, labels.single, candidates,
                                           data[label], options, eval_points, replicates,
                                           cooldown_fraction)
            ladders += shapes
            train_steps += branches
            continue
        for budget, group_candidates in candidates.items():
            group = f"{label_stem}-{budget_tag(budget)}"
            middle = group_candidates[len(group_candidates) // 2]
            for candidate in group_candidates:
                seeds = range(replicates + 1) if candidate is middle else range(1)
                train_steps += [_candidate_step(f"{name}/runs/{group}", label_stem, label,
                                                group, candidate, data[label], options,
                                                eval_points, k) for k in seeds]
    runs = [StudyRun(s.config.run_name, s.config.group, s.config.budget, output_path_of(s),
                     s.config.label) for s in train_steps]
    stable = tuple(shape.stable for shape in ladders)
    targets = next_tiers(budgets[-1] if predict_budget is None else predict_budget, 2)
    fit = ExecutorStep(f"{name}/fit", fit_study, StudyFitConfig(
        runs=tuple(runs), labels=labels.order, metric=metric, targets=(*targets, FAR_TARGET),
        holdout_budget=predict_budget, bootstrap=bootstrap, baseline=baseline,
        corpora=tuple(LabelPath(c, data[c]) for c in labels.corpora)),
        description=f"Approach 2 and 3 fits of {len(labels.order)} label(s) over "
                    f"{len(runs)} runs, on {metric}{ladder_line(stable, train_steps)}")
    cooldown = (DECAY_SHAPE, float(cooldown_fraction)) if schedule == "cooldown" else None
    predictions = {} if predict_budget is None else {
        label: _prediction_step(name, stem, label, labels, fit, data[label], heuristic,
                                predict_budget, options, eval_points, cooldown=cooldown)
        for label in labels.order}
    further = {label: tuple(_prediction_step(name, stem, label, labels, fit, data[label],
                                             heuristic, b, options, eval_points, further=True,
                                             cooldown=cooldown)
                            for b in held_out[1:]) for label in labels.order} \
        if len(held_out) > 1 else {}
    checks = [*predictions.values(), *(s for steps in further.values() for s in steps)]
    report = ExecutorStep(f"{name}/report", write_study_report, StudyReportConfig(
        title=f"IsoFLOP study {stem}", fit_path=output_path_of(fit),
        predictions=tuple(LabelPath(s.config.label, output_path_of(s)) for s in checks)),
        description="report.md, study.json and plots")
    first = [tokenizer_step] if tokenizer_step is not None else []
    return IsoFlopStudy(
        name=name, labels=tuple(labels.order), metric=metric,
        steps=(*first, *caches.values(), *stable, *train_steps, fit, *checks, report),
        fit=fit, report=report, predictions=predictions, runs=tuple(train_steps),
        tokenizer=tokenizer_step, further_predictions=further, schedule=schedule,
        ladders=tuple(ladders), stable_runs=stable)


def _held_out(predict_budget: float | Sequence[float] | None) -> tuple[float, ...]:
    """The held-out budgets, nearest first."""
    if predict_budget is None:
        return ()
    if isinstance(predict_budget, (int, float)):
        return (float(predict_budget),)
    found = sorted(float(b) for b in predict_budget)
    if len(set(found)) != len(found):
        raise StudyInputError(f"predict_budget={list(predict_budget)!r} names a budget twice; "
                              "give each held-out budget once")
    return tuple(found)


def _options(train_options: TrainOptions | Mapping[str, Any] | None) -> dict[str, Any]:
    """The options that were set, as the mapping the run configs are built from."""
    return TrainOptions.of(train_options).as_dict()


def _check_study(name: str, budgets: list[float], heuristic: ScalingHeuristic, vocab: int | None,
                 held_out: tuple[float, ...], labels: StudyLabels, baseline: str | None,
                 replicates: int) -> None:
    if not budgets:
        raise StudyInputError("isoflop_study needs at least one budget")
    if not name.strip("/"):
        raise StudyInputError("isoflop_study needs a name (the study's folder under the prefix)")
    if not callable(getattr(heuristic, "candidates_for_budget", None)):
        raise StudyInputError(f"heuristic={type(heuristic).__name__} is no ScalingHeuristic: "
                              "give one with a candidates_for_budget(budget) method (e.g. "
                              "CompletedAdamhHeuristic)")
    heuristic_vocab = getattr(heuristic, "vocab_size", None)
    if vocab is not None and heuristic_vocab is not None and heuristic_vocab < vocab:
        raise StudyInputError(f"the heuristic's vocab_size ({heuristic_vocab}) is smaller than "
                              f"tokenizer_vocab_size ({vocab}); give the heuristic "
                              f"vocab_size={vocab}")
    if held_out and held_out[0] <= budgets[-1]:
        raise StudyInputError(f"predict_budget ({held_out[0]:.3g}) must exceed the largest "
                              f"swept budget ({budgets[-1]:.3g}): it is the held-out budget")
    if baseline is not None and baseline not in labels.order:
        raise StudyInputError(f"baseline={baseline!r} is no label of the study; use one of "
                              f"{', '.join(labels.order)}")
    if isinstance(replicates, bool) or not isinstance(replicates, int) or replicates < 0:
        raise StudyInputError(f"replicates={replicates!r}: give the number of extra seeds per "
                              "replicated candidate, 0 or more")


def _candidates(heuristic: ScalingHeuristic, budgets: list[float], labels: StudyLabels
                ) -> dict[float, list[CandidateConfig]]:
    try:
        return study_candidates(heuristic, budgets)
    except ValueError as e:  # every label shares the candidates: each would have no runs
        raise StudyInputError(f"{e}, so label(s) {', '.join(labels.order)} would have no runs "
                              "there; change the budget or the heuristic's ranges") from None


def _tokenizer_step(name: str, labels: StudyLabels, vocab: int | None) -> ExecutorStep | None:
    if vocab is None:
        return None
    fields = {c.text_field for c in labels.corpora.values()}
    if len(fields) > 1:
        raise StudyInputError(f"the corpora use text fields {sorted(fields)}; one tokenizer "
                              "is trained on all of them, so give them one text_field")
    paths = tuple(p for c in labels.corpora.values() for p in c.train)
    return ExecutorStep(f"{name}/tokenizer", train_tokenizer,
                        TrainTokenizerConfig(input_paths=paths, vocab_size=vocab,
                                             text_field=fields.pop()),
                        description=f"byte-level BPE, {vocab} tokens, on every corpus's text")


def _tokenize_step(name: str, label: str, corpus: StudyCorpus, single: bool,
                   tokenizer: ExecutorStep | str) -> ExecutorStep:
    fingerprint = _fingerprint(corpus)
    if corpus.version:
        fingerprint = f"{fingerprint or ''}+{corpus.version}"
    # resumable, as every tokenize step (@resumable): a new attempt keeps the finished ranges
    return ExecutorStep(
        f"{name}/tokenized" if single else f"{name}/tokenized/{label}", tokenize,
        TokenizeConfig(train_paths=corpus.train, validation_paths=corpus.validation,
                       tokenizer=output_path_of(tokenizer) if isinstance(tokenizer, ExecutorStep)
                       else tokenizer, text_field=corpus.text_field,
                       input_fingerprint=fingerprint),
        description="one token cache shared by every run" if single else
        f"the token cache of {label}, shared by every run that reads it")


def _fingerprint(corpus: StudyCorpus) -> str | None:
    """Local inputs are fingerprinted by content when the graph is built. Inputs made by
    other steps are identified by those steps' versions. Remote inputs are identified by
    their URL alone, so that planning touches no network: pin a revision
    (``hf://datasets/org/name@<commit>/...``) or use immutable object paths."""
    literal = [p for p in (*corpus.train, *corpus.validation) if isinstance(p, str)]
    local = [p for p in literal if "://" not in p or p.startswith("file://")]
    return fingerprint_inputs(local) if local and len(local) == len(literal) else None


def _candidate_step(folder: str, stem: str, label: str, group: str,
                    candidate: CandidateConfig, data: Any, options: dict[str, Any],
                    eval_points: int, replicate: int) -> ExecutorStep:
    """The step that trains one candidate of the sweep (replicate k > 0: seed + k)."""
    name = run_name(stem, candidate)
    run_options = {"eval_every": max(1, candidate.train_steps // eval_points), **options}
    original = None
    if replicate:
        original, name = name, f"{name}-s{replicate}"
        run_options["seed"] = options.get("seed", 0) + replicate
    config = CandidateRunConfig(train=training_config(candidate, data, run_options),
                                run_name=name, group=group, label=label,
                                budget=candidate.budget, replicate_of=original)
    return ExecutorStep(f"{folder}/{name}", run_candidate, config,
                        description=describe(candidate), resources=resources_of(candidate),
                        estimate=estimate_of(candidate),
                        resumable=True)  # a new attempt resumes from the last checkpoint


def _prediction_step(name: str, stem: str, label: str, labels: StudyLabels, fit: ExecutorStep,
                     data: Any, heuristic: ScalingHeuristic, budget: float,
                     options: dict[str, Any], eval_points: int,
                     further: bool = False,
                     cooldown: tuple[str, float] | None = None) -> ExecutorStep:
    """A label's checked prediction: depends on the fit; resources and estimate are those of
    the heuristic's largest candidate at ``budget`` (the run is chosen when the fit is
    known). A further held-out budget's step is named by its budget too. In a ladder study
    (``cooldown``) the run ends with the ladder's cooldown, as its points did."""
    candidates = study_candidates(heuristic, [budget])[budget]
    largest = max(candidates, key=lambda c: c.params)
    label_stem = stem if labels.single else f"{stem}-{label}"
    group = f"{label_stem}-{budget_tag(budget)}-heldout"
    config = PredictionConfig(fit_path=output_path_of(fit), label=label, data=data,
                              budget=budget, heuristic=heuristic, run_name=f"{group}-predicted",
                              group=group, train_options=dict(options),
                              eval_points=eval_points, cooldown=cooldown)
    hours = max(c.estimated_device_hours or 0.0 for c in candidates)
    step_name = f"{name}/prediction" if labels.single else f"{name}/prediction/{label}"
    if further:
        step_name += f"-{budget_tag(budget)}"
    return ExecutorStep(step_name, run_prediction, config,
                        description=f"train {label}'s predicted optimum at {budget:.3g} FLOPs",
                        resources=resources_of(largest),
                        estimate=ComputeEstimate(budget, hours),
                        resumable=True)  # the predicted run resumes from its checkpoint
