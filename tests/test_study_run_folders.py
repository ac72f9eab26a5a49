"""A study's fit step over runs trained elsewhere (``RunFolder``): run folders in Marin's
layout, made by a step of the same executor run, fit the law marin's own files of the same
runs give, through the one fitting pipeline."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from marin.execution import Executor, ExecutorStep, output_path_of, this_output_path
from marin.scaling_laws.study import RunFolder, StudyFitConfig, fit_study
from marin.scaling_laws.study.artifacts import ArtifactError, read_fits, read_rows
from tests.helpers.run_folders import (
    ALPHA,
    BETA,
    E,
    law_of,
    law_runs,
    write_marin,
    write_marin_tracker,
)


@dataclass(frozen=True)
class ExportConfig:
    """Attributes:
        layout: ``marin`` (summary.json) or ``marin-wandb`` (tracker_metrics.jsonl).
        output_path: one folder per run under it.
    """

    layout: str
    output_path: str = this_output_path()


def export_runs(config: ExportConfig) -> None:
    from pathlib import Path

    writer = write_marin if config.layout == "marin" else write_marin_tracker
    for i, run in enumerate(law_runs()):
        writer(Path(config.output_path) / f"run-{i:02d}", *run)


def test_a_study_fit_over_marin_run_folders_gives_the_law_of_marins_own_files(tmp_path):
    exports = {layout: ExecutorStep(f"exports/{layout}", export_runs, ExportConfig(layout))
               for layout in ("marin", "marin-wandb")}
    fits = {layout: ExecutorStep(f"fit/{layout}", fit_study, StudyFitConfig(
        runs=(RunFolder(output_path_of(step), label="c4"),), metric="loss", bootstrap=0,
        targets=(1e20,))) for layout, step in exports.items()}
    prefix = str(tmp_path / "store")
    result = Executor(prefix).run(list(fits.values()))
    assert result.ok, result.summary()
    paths = {n.step.name: n.output_path for n in Executor(prefix).plan(
        list(fits.values())).graph.nodes}
    found = {layout: read_fits(paths[f"fit/{layout}"]) for layout in fits}
    own, tracked = found["marin"], found["marin-wandb"]
    assert own.labels == tracked.labels == ("c4",)  # the default label has no run: left out
    law = law_of(tracked.fits["c4"])
    # marin's summary.json holds whole numbers of params and tokens: agreement to 1e-6
    assert law == pytest.approx(law_of(own.fits["c4"]), rel=1e-6)
    assert law["alpha"] == pytest.approx(ALPHA, rel=0.02)
    assert law["beta"] == pytest.approx(BETA, rel=0.02)
    assert law["E"] == pytest.approx(E, rel=0.02)
    rows = read_rows(paths["fit/marin-wandb"])
    assert len(rows) == len(law_runs()) and {r.label for r in rows} == {"c4"}
    assert tracked.fits["c4"].predictions[0].budget == 1e20


def test_run_folders_join_the_studys_labels_and_bad_ones_are_named(tmp_path):
    for i, run in enumerate(law_runs()):
        write_marin_tracker(tmp_path / "c4" / f"run-{i:02d}", *run)
    fits = fit_study(StudyFitConfig(runs=(RunFolder(str(tmp_path / "c4")),),
                                    labels=("plays", "default"), metric="loss", bootstrap=0,
                                    output_path=str(tmp_path / "fit")))
    assert fits.labels == ("c4",) and fits.baseline == "c4"  # the folder's name labels it
    with pytest.raises(ArtifactError) as info:
        fit_study(StudyFitConfig(runs=(RunFolder(str(tmp_path / "gone")),),
                                 output_path=str(tmp_path / "fit2")))
    assert str(info.value).startswith("StudyFitConfig.runs: ") and "does not exist" in \
        str(info.value) and "\n" not in str(info.value)
    with pytest.raises(ArtifactError, match="holds no run to fit"):
        fit_study(StudyFitConfig(runs=(), output_path=str(tmp_path / "fit3")))
