"""Run folders as fit input: runs drawn from a known law, written in each layout (marin's
summary.json, Marin's tracker_metrics.jsonl, Levanter's JSON logger, W&B exports), fit as the
same table does; a real marin run read through two layouts; the one-line refusals."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from marin.scaling_laws.results import ResultsError, read_runs
from marin.scaling_laws.run_readers import RunFolderError, layout_of, read_run_folders
from marin.training.summary import RunSummary
from tests.helpers.run_folders import (
    ALPHA,
    BETA,
    C4,
    WRITERS,
    E,
    fit_of,
    law_of,
    law_runs,
    levanter_summary,
    write_levanter,
    write_marin,
    write_marin_tracker,
    write_table,
    write_wandb,
)


@pytest.fixture(scope="module")
def table_law(tmp_path_factory) -> dict[str, float]:
    path = tmp_path_factory.mktemp("table") / "runs.csv"
    write_table(path, law_runs())
    return law_of(fit_of(read_runs(str(path))).fits["default"])


@pytest.mark.parametrize("layout", sorted(WRITERS))
def test_each_layout_fits_the_law_the_table_gives(tmp_path, layout, table_law):
    """Runs written in each layout fit exactly as the same runs in a table, and the law is
    the one the runs were drawn from."""
    sweep = tmp_path / "sweep"
    for i, run in enumerate(law_runs()):
        WRITERS[layout](sweep / f"run-{i:02d}", *run)
    assert layout_of(str(sweep / "run-00")) == layout
    rows = read_runs(str(sweep))
    assert len(rows) == len(law_runs()) and {r.label for r in rows} == {"sweep"}
    assert sorted(r.budget for r in rows) == sorted(b for *_, b, _ in law_runs())
    law = law_of(fit_of(rows).fits["sweep"])
    assert law == pytest.approx(table_law, rel=1e-6)
    assert law["alpha"] == pytest.approx(ALPHA, rel=0.02)
    assert law["beta"] == pytest.approx(BETA, rel=0.02)
    assert law["E"] == pytest.approx(E, rel=0.02)
    assert law["params_exponent"] == pytest.approx(BETA / (ALPHA + BETA), abs=0.02)


def test_mixed_layouts_tables_and_globs_in_one_call(tmp_path, table_law):
    """One fit over runs in every layout at once, a table and a glob: the table's law."""
    runs = law_runs()
    layouts = sorted(WRITERS)
    for i, run in enumerate(runs[:-4]):
        WRITERS[layouts[i % len(layouts)]](tmp_path / "mixed" / f"run-{i:02d}", *run)
    write_wandb(tmp_path / "mixed" / "listed", *runs[-4], as_list=True)
    for i, run in enumerate(runs[-3:-1]):
        write_levanter(tmp_path / "more" / f"extra-{i}", *run)
    write_levanter(tmp_path / "more" / "not-matched", *runs[0])
    write_table(tmp_path / "last.csv", runs[-1:])
    (tmp_path / "mixed" / "fit-1a2b").mkdir()  # a step folder of no run: passed over
    rows = read_runs([str(tmp_path / "mixed"), str(tmp_path / "more" / "extra-*"),
                      str(tmp_path / "last.csv")], label="all")
    assert len(rows) == len(runs)
    assert law_of(fit_of(rows).fits["all"]) == pytest.approx(table_law, rel=1e-6)


def test_labels_from_group_parent_and_flag(tmp_path):
    run = law_runs()[0]
    write_marin_tracker(tmp_path / "c4" / "grouped", *run, group="isoflop-c4")
    write_marin_tracker(tmp_path / "c4" / "plain", *run)
    labels = {r.run: r.label for r in read_runs(str(tmp_path / "c4"))}
    assert labels == {"grouped": "isoflop-c4", "plain": "c4"}
    assert {r.label for r in read_runs(str(tmp_path / "c4"), label="x")} == {"x"}


def test_a_study_candidate_keeps_its_label_budget_and_status(tmp_path):
    from marin.scaling_laws.study.artifacts import OUTCOME, RunOutcome, write_artifact

    params, tokens, flops, loss = law_runs()[2]
    summary = RunSummary(params=int(params), tokens=int(tokens), flops=flops, steps=1,
                         batch_size=1, seq_len=1, train_loss=loss, final_step_loss=loss,
                         eval_loss=loss, eval_bpb=loss / 2, macro_loss=loss,
                         macro_bpb=loss / 2)
    for name, status in (("ok-run", "ok"), ("nan-run", "diverged")):
        write_artifact(str(tmp_path / "runs" / name), OUTCOME, RunOutcome(
            run_name=name, group="g", label="plays", budget=1e18, status=status,
            reason=None if status == "ok" else "loss was NaN at step 3", hidden_dim=64,
            num_layers=2, summary=summary if status == "ok" else None))
    rows = {r.run: r for r in read_runs(str(tmp_path / "runs"), "macro_bpb")}
    assert layout_of(str(tmp_path / "runs" / "ok-run")) == "marin-study"
    assert (rows["ok-run"].label, rows["ok-run"].budget, rows["ok-run"].status) == (
        "plays", 1e18, "ok")
    assert rows["ok-run"].loss == pytest.approx(loss / 2)
    assert (rows["nan-run"].status, rows["nan-run"].reason) == ("diverged",
                                                                "loss was NaN at step 3")


def test_json_logger_events_persisted_as_tracker_metrics(tmp_path):
    """Levanter's JSON logger's events saved under Marin's file name read as in its own."""
    run = law_runs()[5]
    write_levanter(tmp_path / "a", *run)
    write_levanter(tmp_path / "b", *run, name="tracker_metrics.jsonl")
    [a], [b] = read_run_folders(str(tmp_path / "a")), read_run_folders(str(tmp_path / "b"))
    assert layout_of(str(tmp_path / "b")) == "marin-wandb"
    assert (b.params, b.tokens, b.flops, b.loss) == (a.params, a.tokens, a.flops, a.loss)
    assert (a.params, a.tokens, a.loss) == pytest.approx(run[:2] + run[3:], rel=1e-12)


def test_metric_by_study_name_or_levanter_name(tmp_path):
    params, tokens, flops, loss = law_runs()[0]
    write_marin_tracker(tmp_path / "a", params, tokens, flops, loss)
    (tmp_path / "a" / "tracker_metrics.jsonl").write_text(json.dumps({"summary": {
        **levanter_summary(params, tokens, flops, loss, "eval/loss"),
        C4: 0.75, "eval/macro_bpb": 0.5}}) + "\n")
    write_marin(tmp_path / "b", params, tokens, flops, loss)
    folder = str(tmp_path / "a")
    assert read_run_folders(folder, C4)[0].loss == 0.75
    assert read_run_folders(folder, "paloma/c4_en/bpb")[0].loss == 0.75
    assert read_run_folders(folder, "macro_bpb")[0].loss == 0.5
    assert read_run_folders(folder, "train/loss")[0].loss == pytest.approx(loss + 0.1)
    assert read_run_folders(str(tmp_path / "b"), "eval/bpb")[0].loss == pytest.approx(loss / 2)


def marin_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "marin.cli", *args], capture_output=True,
                          text=True)


def test_cli_fits_folders(tmp_path, table_law):
    for i, run in enumerate(law_runs()):
        WRITERS[sorted(WRITERS)[i % 4]](tmp_path / "runs" / f"run-{i:02d}", *run)
    out = marin_cli("scaling", "fit", str(tmp_path / "runs"), "--bootstrap", "0", "--json",
                    "--label", "law")
    assert out.returncode == 0, out.stderr
    fit = json.loads(out.stdout)["fit"]
    assert fit["labels"] == ["law"]
    assert fit["fits"]["law"]["approach3"]["alpha"] == pytest.approx(table_law["alpha"],
                                                                     rel=1e-6)


@pytest.mark.parametrize(("make", "metric", "expected"), [
    (lambda p: (p / "notes.txt").write_text("x"), "loss",
     "holds no run: none of outcome.json, summary.json, tracker_metrics.jsonl, tracker.jsonl, "
     "wandb-summary.json, files/wandb-summary.json"),
    (lambda p: write_marin_tracker(p / "r", 1e8, 1e9, 6e17, 3.0), "eval/missing",
     "tracker_metrics.jsonl: no metric 'eval/missing'; it has eval/loss: pass one with "
     "--metric"),
    (lambda p: write_marin(p / "r", 1e8, 1e9, 6e17, 3.0), "plays/bpb",
     "summary.json: no metric 'plays/bpb'; it has loss, bpb: pass one with --metric"),
])
def test_refusals_name_the_file_and_the_fix(tmp_path, make, metric, expected):
    make(tmp_path)
    with pytest.raises(ResultsError) as e:
        read_runs(str(tmp_path), metric)
    assert expected in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("key", ["throughput/total_tokens", "throughput/total_gflops",
                                 "parameter_count"])
def test_a_run_missing_a_figure_names_its_key(tmp_path, key):
    summary = levanter_summary(1e8, 1e9, 6e17, 3.0, "eval/loss")
    del summary[key]
    (tmp_path / "wandb-summary.json").write_text(json.dumps(summary))
    with pytest.raises(RunFolderError, match=f"wandb-summary.json: no {key} in its summary "
                       "or history; the run must log"):
        read_run_folders(str(tmp_path))


def test_cli_refusals_are_one_line_with_status_2(tmp_path):
    (tmp_path / "empty").mkdir()
    for args, expected in ((str(tmp_path / "empty"), "holds no run"),
                           (str(tmp_path / "nothing-*"), "matches nothing"),
                           (str(tmp_path / "gone"), "does not exist")):
        out = marin_cli("scaling", "fit", args, "--bootstrap", "0")
        assert out.returncode == 2 and expected in out.stderr, out.stderr
        assert len(out.stderr.strip().splitlines()) == 1
    write_table(tmp_path / "t.csv", law_runs())
    out = marin_cli("scaling", "fit", str(tmp_path / "t.csv"), "--metric", "bpb")
    assert out.returncode == 2 and "has no column 'bpb'" in out.stderr
    assert "it has run, params, tokens, flops, loss" in out.stderr


@pytest.mark.slow
def test_a_real_marin_run_reads_the_same_from_its_files_and_its_json_tracker(cache, tmp_path):
    """A run trained through the executor: its folder read as marin's (summary.json) and,
    copied alone, its JSON tracker's file read as Levanter's give the same row."""
    import dataclasses

    from marin.execution import Executor, ExecutorStep, this_output_path
    from marin.trackers import TrackerConfig
    from marin.training import train_lm
    from tests.helpers.training import tiny_config

    config = dataclasses.replace(
        tiny_config(cache, tmp_path / "unused", train_steps=4, eval_every=4),
        output_path=this_output_path(), trackers=[TrackerConfig("json")])
    step = ExecutorStep("train/tiny", train_lm, config)
    result = Executor(str(tmp_path / "prefix")).run([step])
    assert result.ok, result.summary()
    out = Path(result.plan.entry_of(result.plan.graph.node_of(step)).output_path)
    [mine] = read_runs(str(out.parent))  # the prefix's train/ folder, walked
    assert layout_of(str(out)) == "marin" and mine.label == "train"
    assert mine.tokens == 4 * config.batch_size * config.model.seq_len
    last = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert mine.loss == [r["eval/loss"] for r in last if "eval/loss" in r][-1]
    (tmp_path / "copy" / "train").mkdir(parents=True)
    (tmp_path / "copy" / "train" / "tracker.jsonl").write_bytes(
        (out / "tracker.jsonl").read_bytes())
    [theirs] = read_runs(str(tmp_path / "copy" / "train"))
    assert layout_of(str(tmp_path / "copy" / "train")) == "levanter"
    for field in ("params", "tokens", "flops", "loss", "budget"):
        assert getattr(theirs, field) == pytest.approx(getattr(mine, field), rel=1e-9), field
