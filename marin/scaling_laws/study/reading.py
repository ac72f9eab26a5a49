"""Reading a study's findings: ``load_study``, and the summary printed after a run.

    study = load_study(executor_main(study))          # the InvocationResult of a run
    study = load_study(study, "local_store")          # the IsoFlopStudy and its prefix
    study = load_study("local_store/isoflop-tiny")    # a study's folder (or its report's)
    study.labels, study.fits["plays"].approach2.params.exponent
    study.predictions["plays"].within_interval, study.comparisons[0].compute_multiplier

All three return the same ``StudyResult``: from the report's ``study.json`` when the report
step has run, else assembled from ``fit.json``, ``runs.csv`` and the labels'
``prediction.json`` (a study folder written by the previous format reads that way too).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from marin.scaling_laws.study.artifacts import (
    FIT,
    PREDICTION,
    RESULT,
    ArtifactError,
    StudyResult,
    read_result,
)
from marin.scaling_laws.study.configs import (
    PredictionConfig,
    StudyFitConfig,
    StudyReportConfig,
)
from marin.scaling_laws.study.graph import IsoFlopStudy
from marin.scaling_laws.study.steps import study_result
from marin.storage.files import exists, glob, join_url

if TYPE_CHECKING:
    from marin.execution import InvocationResult, Plan, StepGraph

__all__ = ["StudyOutputs", "load_study", "print_study_summary", "study_outputs"]


@dataclass(frozen=True)
class StudyOutputs:
    """Where a study's fit, report and each label's predictions write (None: no such step);
    ``predictions`` are (label, folder) pairs, a pair per held-out budget."""

    fit: str | None = None
    report: str | None = None
    title: str = ""
    predictions: tuple[tuple[str, str], ...] = ()


def study_outputs(graph: StepGraph, study: IsoFlopStudy | None = None) -> StudyOutputs:
    """The output folders of a study's ``fit``, ``prediction`` and ``report`` steps:
    ``study``'s handles placed in ``graph``, or (a graph of bare steps) the steps whose
    configs are a study's fit, prediction and report configs."""
    if study is not None:
        return StudyOutputs(graph.node_of(study.fit).output_path,
                            graph.node_of(study.report).output_path,
                            study.report.config.title,
                            tuple((label, graph.node_of(s).output_path) for label, steps in
                                  _checks(study).items() for s in steps))
    fit = report = None
    title, predictions = "", []
    for node in graph.nodes:
        config = node.step.config
        if isinstance(config, StudyFitConfig):
            fit = node.output_path
        elif isinstance(config, StudyReportConfig):
            report, title = node.output_path, config.title
        elif isinstance(config, PredictionConfig):
            predictions.append((config.label, node.output_path))
    return StudyOutputs(fit, report, title, tuple(predictions))


def _checks(study: IsoFlopStudy) -> dict[str, list[Any]]:
    """Each label's prediction steps, nearest held-out budget first."""
    return {label: [step, *study.further_predictions.get(label, ())]
            for label, step in study.predictions.items()}


def load_study(source: IsoFlopStudy | InvocationResult | Plan | str | Sequence[Any],
               prefix: str | None = None) -> StudyResult:
    """A study's ``StudyResult`` from an ``IsoFlopStudy`` (or its steps) and the prefix it
    ran under, from a ``InvocationResult`` or ``Plan``, or from its folder; a study not fitted yet
    is a one-line ``ArtifactError``."""
    from marin.execution import Executor, InvocationResult, Plan

    if isinstance(source, InvocationResult):
        return _from_outputs(study_outputs(source.plan.graph))
    if isinstance(source, Plan):
        return _from_outputs(study_outputs(source.graph))
    if isinstance(source, str):
        if prefix is not None:
            raise TypeError("load_study(path) takes no prefix; load_study(study, prefix) "
                            "takes the study that isoflop_study returned")
        return _from_folder(source)
    if isinstance(source, IsoFlopStudy | Sequence):
        if prefix is None:
            raise TypeError("load_study(study, prefix): give the prefix the study ran under")
        if isinstance(source, IsoFlopStudy):
            graph = Executor(prefix).graph(source.steps)
            return _from_outputs(study_outputs(graph, source))
        return _from_outputs(study_outputs(Executor(prefix).graph(list(source))))
    raise TypeError(f"load_study takes an IsoFlopStudy and a prefix, a InvocationResult, or a "
                    f"folder; got {type(source).__name__}")


def _from_outputs(out: StudyOutputs) -> StudyResult:
    if out.fit is None:
        raise ArtifactError("these steps hold no study fit step; give the steps that "
                            "isoflop_study returned")
    if out.report is not None:  # the report's copy, if it was written from this fit
        stored = read_result(out.report)
        if stored is not None:
            return stored
    return study_result(out.title, out.fit, out.predictions)


def _from_folder(path: str) -> StudyResult:
    """``path`` is a report's folder, or a study's folder with ``report-*``, ``fit-*`` and
    ``prediction*`` step folders in it (the newest of each)."""
    path = path.rstrip("/")
    if exists(join_url(path, RESULT)):
        return read_result(path)
    if exists(join_url(path, FIT)):
        return study_result("", path, {})
    if not exists(path):
        raise ArtifactError(f"{path} does not exist; give a study's folder under the "
                            "prefix (e.g. local_store/isoflop-tiny)")
    report = _newest(join_url(path, "report-*", RESULT))
    if report is not None:
        return read_result(report)
    fit = _newest(join_url(path, "fit-*", FIT))
    if fit is None:
        raise ArtifactError(f"{path} holds no study: no report-*/{RESULT} and no fit-*/{FIT}")
    found: dict[str, str] = {}  # step name (folder less its version) -> newest file
    for url in [*glob(join_url(path, "prediction-*", PREDICTION)),
                *glob(join_url(path, "prediction", "*", PREDICTION))]:
        folder = url.rstrip("/").rsplit("/", 1)[0]
        name = folder.rsplit("-", 1)[0]
        if name not in found:
            version = "[0-9a-f]" * 8  # not name-8e11-<version>, a further budget's step
            found[name] = _newest(join_url(f"{name}-{version}", PREDICTION)) or folder
    predictions = [("", folder) for folder in found.values()]
    return study_result("", fit, predictions)


def _newest(pattern: str) -> str | None:
    """The folder of the file matching ``pattern`` written last (a study rerun with another
    config leaves the older step folders beside the new ones)."""
    from marin.storage.files import url_to_fs

    found = []
    for url in glob(pattern):
        fs, fs_path = url_to_fs(url)
        try:
            stamp = fs.modified(fs_path).timestamp()
        except (NotImplementedError, OSError):
            stamp = 0.0
        found.append((stamp, url.rstrip("/").rsplit("/", 1)[0]))
    return max(found)[1] if found else None


def print_study_summary(result: InvocationResult | Plan, options: Any = None,
                        file: Any = None) -> None:
    """After ``executor_main`` (or as an ``Experiment``'s ``after``): the findings of the
    run that ``result`` is, and where its report is. Nothing for a dry run (a ``Plan``), nor
    when this run did not finish the report (a summary of an older run would mislead)."""
    from marin.execution import InvocationResult, StepState
    from marin.scaling_laws.study.summary import summary_lines

    if not isinstance(result, InvocationResult) or not result.ok:
        return
    out = study_outputs(result.plan.graph)
    stored = {e.output_path: e.status for e in result.plan.entries}
    done = {s.output_path for s in result.steps  # this invocation's, or an earlier one's, skipped
            if s.state.is_done or (s.state is StepState.SKIPPED
                                   and stored.get(s.output_path) is StepState.SUCCEEDED)}
    if out.fit is None or out.report is None or out.report not in done:
        return
    try:
        study = _from_outputs(out)
    except ArtifactError:
        return
    stream = file or sys.stdout
    for line in summary_lines(study):
        print(line, file=stream)
    print(f"report: {join_url(out.report, 'report.md')}", file=stream)
