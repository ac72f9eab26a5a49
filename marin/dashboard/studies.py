"""Studies as the dashboard shows them: one row per study, and a study step's typed files.

    rows = study_rows(reader, states)        # the Studies page: a StudyRow per study folder
    fits, why = typed_fit(reader, key)       # a fit step's page: every label's laws
    result, why = typed_result(reader, key, files)

A study is the folder its steps share under the prefix (``isoflop-tiny/fit-<hash>``,
``isoflop-tiny/report-<hash>``, ``isoflop-tiny/prediction/<label>-<hash>``). Its row is
read from the report's ``study.json`` (labels, metric, each held-out prediction), or, before
the report has run, from the fit's ``fit.json``; both through the study's own artifact
types (``marin.scaling_laws.study.artifacts``), never a second decoder. A step that writes
``report.md`` or ``fit.json`` of another kind is a row of its own, marked untyped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from marin.dashboard.outputs import read_json_file
from marin.dashboard.reader import PrefixReader, StepView
from marin.dashboard.records import ViewState

if TYPE_CHECKING:  # the study package is imported only when a study's files are read
    from marin.scaling_laws.study.artifacts import Prediction

__all__ = ["StudyRow", "study_rows", "typed_fit", "typed_result"]

_FIT, _RESULT = "fit.json", "study.json"


@dataclass(frozen=True)
class StudyRow:
    """A study on the Studies page.

    Attributes:
        name: the study's folder under the prefix (or the step's key, when untyped).
        state: the state of the step the row is read from (the report, else the fit).
        labels: the study's labels, in order.
        metric: what its fits use.
        predictions: each label's held-out ``Prediction`` (error, inside its interval).
        report: the report step's key (None before it has run).
        fit: the fit step's key.
        error: why the row has no labels (a file that is no study's), or None.
    """

    name: str
    state: ViewState
    labels: tuple[str, ...] = ()
    metric: str = ""
    predictions: tuple[Prediction, ...] = ()
    report: str | None = None
    fit: str | None = None
    error: str | None = None


def study_rows(reader: PrefixReader, states: Sequence[StepView],
               files: dict[str, list[str]]) -> list[StudyRow]:
    """One row per study among ``states`` (steps whose output holds ``report.md`` or
    ``fit.json``; ``files`` lists each one's top level), in the order of the folders."""
    folders: dict[str, list[StepView]] = {}
    for state in states:
        folders.setdefault(state.key.rpartition("/")[0], []).append(state)
    rows = []
    for folder, members in folders.items():
        reports = _newest([s for s in members if _RESULT in files.get(s.key, ())])
        fits = _newest([s for s in members if _FIT in files.get(s.key, ())
                        and _RESULT not in files.get(s.key, ())])
        if reports is not None:
            result, why = typed_result(reader, reports.key, files[reports.key])
            if result is not None:
                rows.append(StudyRow(folder or reports.key, reports.state, result.labels,
                                     result.metric, tuple(p for label in result.labels
                                                          for p in result.checks_of(label)),
                                     reports.key, fits.key if fits else None))
                continue
            rows.append(StudyRow(reports.key, reports.state, report=reports.key, error=why))
        if fits is not None:
            found, why = typed_fit(reader, fits.key)
            if found is not None:
                rows.append(StudyRow(folder or fits.key, fits.state, found.labels,
                                     found.metric, fit=fits.key))
                continue
            rows.append(StudyRow(fits.key, fits.state, fit=fits.key, error=why))
        typed = {r.report for r in rows} | {r.fit for r in rows}
        rows.extend(StudyRow(s.key, s.state, report=s.key, error="an untyped report.md: no "
                             "study.json or fit.json of a study")
                    for s in members if s.key not in typed)
    return rows


def _newest(states: list[StepView]) -> StepView | None:
    """The step updated last, preferring one that succeeded (a study rerun with another
    config leaves its older steps in the folder)."""
    if not states:
        return None
    return max(states, key=lambda s: (s.state is ViewState.SUCCEEDED, s.updated or 0.0, s.key))


def typed_fit(reader: PrefixReader, key: str) -> tuple[Any, str | None]:
    """The step's ``fit.json`` as a ``StudyFits`` (every label's laws); (None, why) when it
    is absent or no study's fit."""
    from marin.scaling_laws.study.artifacts import StudyFits

    return _typed(reader, key, _FIT, StudyFits)


def typed_result(reader: PrefixReader, key: str, files: Sequence[str]
                 ) -> tuple[Any, str | None]:
    """The report's ``StudyResult`` (labels, predictions, comparisons); (None, None)
    without ``study.json``, (None, why) when it is unreadable."""
    from marin.scaling_laws.study.artifacts import StudyResult

    return _typed(reader, key, _RESULT, StudyResult) if _RESULT in files else (None, None)


def _typed(reader: PrefixReader, key: str, name: str, cls: Any) -> tuple[Any, str | None]:
    """``name`` of the step read as ``cls`` by its own decoder, or (None, why)."""
    from marin.scaling_laws.study.artifacts import ArtifactError

    data = read_json_file(reader, key, name)
    if data is None:
        return None, f"{name} is not readable JSON"
    try:
        return cls.from_json(data, where=f"{key}/{name}"), None
    except ArtifactError as e:
        return None, str(e)
