"""Scaling laws fitted to finished runs outside a study's graph (``marin scaling fit``).

    fitted = fit_runs(["runs.csv", "local_store/train/"], metric="bpb", target=3e19)
    fitted.fits.fits["runs"].predictions[0].approach2.params      # N_opt at the target
    nearest = nearest_candidates(fitted, load_heuristic("completed-adamh"))
    files = write_fit_files(fitted, "plots/")      # the study's plots (PNG, HTML), fit.json

The same pipeline as a study's fit step (``analysis.fit_labels``) on the rows that
``marin.scaling_laws.results.read_runs`` reads from tables, run folders and folders of runs;
``fit.json`` is in the study's schema (``StudyFits``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass

from marin.scaling_laws.candidates import CandidateConfig, nearest_candidate
from marin.scaling_laws.study.artifacts import FIT, StudyFits, StudyResult, write_artifact
from marin.scaling_laws.values import RunRow

__all__ = ["RunFits", "fit_runs", "nearest_candidates", "write_fit_files"]


@dataclass(frozen=True)
class RunFits:
    """What ``fit_runs`` found: ``fits`` (every label's fit, as in ``fit.json``), the runs
    fitted (``rows``) and the budget predicted for (``target``; None: no prediction)."""

    fits: StudyFits
    rows: tuple[RunRow, ...]
    target: float | None


def fit_runs(results: str | Sequence[str], metric: str = "loss", label: str | None = None,
             target: float | None = None, bootstrap: int = 1000) -> RunFits:
    """Every label of the runs in ``results`` fitted on ``metric``, with predictions (and
    compute multipliers) at ``target``. Bad input: a ``ValueError`` (``ResultsError`` for
    unreadable runs) naming the option or file."""
    from marin.scaling_laws.results import read_runs
    from marin.scaling_laws.study.analysis import fit_labels

    if target is not None and not (math.isfinite(target) and target > 0):
        raise ValueError(f"--target must be a positive FLOP budget such as 3e19, got {target}")
    if bootstrap < 0:
        raise ValueError(f"--bootstrap must be 0 (no standard errors) or more, got {bootstrap}")
    rows = read_runs(results, metric, label)
    labels = list(dict.fromkeys(r.label for r in rows))
    at = [target] if target else []
    fits = fit_labels(rows, labels, metric=metric, targets=at, bootstrap=bootstrap,
                      compare_at=at)
    return RunFits(fits=fits, rows=tuple(rows), target=target)


def nearest_candidates(fitted: RunFits, heuristic) -> dict[str, CandidateConfig | None]:
    """Per label, the heuristic's candidate at the target nearest the optimal size (None
    for a label with no prediction); empty without a target."""
    if not fitted.target:
        return {}
    candidates = list(heuristic.candidates_for_budget(fitted.target))
    out: dict[str, CandidateConfig | None] = {}
    for label, fit in fitted.fits.fits.items():
        best = fit.predictions[0].best if fit.predictions else None
        out[label] = nearest_candidate(candidates, best[1].params) if best else None
    return out


def write_fit_files(fitted: RunFits, out_dir: str) -> list[str]:
    """The study's plots of the fit (each as PNG and HTML) and ``fit.json`` in
    ``out_dir`` (made when missing); their paths."""
    from marin.scaling_laws.study.report_plots import draw_plots

    fits = fitted.fits
    os.makedirs(out_dir, exist_ok=True)
    study = StudyResult(title="", metric=fits.metric, labels=fits.labels, fits=fits.fits,
                        comparisons=fits.comparisons, not_compared=fits.not_compared,
                        runs=fitted.rows,
                        model_error=fits.model_error, why_no_model_error=fits.why_no_model_error)
    stems = draw_plots(study, out_dir, target=fitted.target)
    files = [os.path.join(out_dir, f"{stem}.{kind}") for stem in stems
             for kind in ("png", "html")]
    return [*files, write_artifact(out_dir, FIT, fits)]
