"""``marin eval lm-eval``: lm-eval-harness (really run, on torch's CPU build) on the export of
a trained run agrees item for item with the scores the run's own scoring gives its model,
with the run's own byte-level BPE; and its bad inputs are one line each.

The items are chosen where the two could part: a context ending in a space (lm-eval moves
it into the choice), choices that do not start with a space (a token may span the
boundary), choices whose length in characters and in bytes differ (lm-eval's ``acc_norm``
counts characters, marin's bytes: lm-eval's ``acc_bytes``), and items longer than the
model's 16 positions (both keep the sequence's last 16 tokens).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from marin.evaluation import TaskItem
from marin.evaluation.harness import LmEvalReport
from marin.evaluation.scoring import TaskSuite, item_scores
from marin.export.run import read_run, restore_model
from marin.processing.tokenize.encoders import load_encoder
from tests.conftest import ROOT
from tests.doc_examples import checked_block
from tests.helpers.export import Trained, marin_cli, one_line_error

pytestmark = pytest.mark.slow

DOCS = ROOT / "docs" / "evaluation.md"

ITEMS = [TaskItem("The king spoke to the ", ("queen", "duke", "sea"), 0),
         TaskItem("Enter two murderers, with", (" swords", " a letter", "out"), 1),
         TaskItem("O, what a noble mind", ("ed man", "s", " is here o'erthrown"), 2),
         TaskItem("Good night, sweet prince, and flights of angels sing thee to thy",
                  (" rest", " bed", " grave"), 0),
         TaskItem("Exit", (" all", " the ghost", " Hamlet"), 1),
         TaskItem("He said, ", ("“ay”", "naïve", "café au lait", "no"), 3),
         TaskItem("My lord, I have remembrances of yours that I have longed long to",
                  (" re-deliver", " deliver", " keep"), 0),
         TaskItem("To be, or not to be: that is the", (" question", " answer"), 0)]


def _write_task(path: Path) -> Path:
    path.write_text("".join(item.encode() + "\n" for item in ITEMS), encoding="utf-8")
    return path


@pytest.fixture
def offline(tmp_path: Path, monkeypatch) -> Path:
    """lm-eval's caches and scratch folders under ``tmp_path``; no network reached."""
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return tmp_path


def test_lm_eval_on_the_export_agrees_with_the_runs_scores_item_for_item(trained: Trained,
                                                                           offline: Path):
    run = read_run(str(trained.run))
    assert run.tokenizer == str(trained.data / "tokenizer")  # the run's own trained BPE
    encoder = load_encoder(run.tokenizer)
    model, step = restore_model(run)
    suite = TaskSuite.of([("plays", ITEMS)], encoder, model.config.seq_len, rows=8)
    task = suite.tasks[0]
    ours = suite.logliks(model, task)
    scores = item_scores(ours, task.choice_bytes, task.gold)
    # the items part the ways of encoding: some choice's tokens are not its tokens alone
    # (the boundary), and some sequences are longer than the model's positions
    width = task.tokens.shape[1]
    mine = [task.tokens[i, c][task.mask[i, c]].tolist()
            for i, item in enumerate(ITEMS) for c in range(len(item.choices))]
    alone = [encoder.encode_batch([c])[0] for item in ITEMS for c in item.choices]
    assert mine != alone and width == 4
    assert max(len(encoder.encode_batch([item.context + c])[0])
               for item in ITEMS for c in item.choices) > model.config.seq_len

    # docs/evaluation.md's command as a reader types it, on this run and these items
    _write_task(offline / "plays.jsonl")
    (offline / "local_store" / "train").mkdir(parents=True)
    (offline / "local_store" / "train" / "tiny-0123abcd").symlink_to(trained.run)
    done = subprocess.run(["bash", "-c", checked_block(DOCS, "tests/test_lm_eval.py")],
                          cwd=offline, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PATH": f"{Path(sys.executable).parent}:"
                                                     f"{os.environ['PATH']}"})
    assert done.returncode == 0, done.stderr[-3000:]
    out = offline / "lm-eval" / "tiny"
    assert "plays" in done.stdout and f"step {step}" in done.stdout
    samples = sorted((json.loads(line) for line in
                      (out / "samples_plays.jsonl").read_text().splitlines()),
                     key=lambda s: s["doc_id"])
    assert len(samples) == len(ITEMS)
    for i, (item, sample) in enumerate(zip(ITEMS, samples, strict=True)):
        theirs = [float(r[0]) for r in sample["filtered_resps"]]
        assert [a[1] for a in sample["arguments"]] == list(item.choices)  # no delimiter added
        np.testing.assert_allclose(theirs, ours[i, :len(item.choices)], rtol=0, atol=1e-3,
                                   err_msg=f"item {i}")
        assert sample["acc"] == scores["acc"][i], f"item {i}"
        assert sample["acc_bytes"] == scores["acc_norm"][i], f"item {i}"
    results = json.loads((out / "results.json").read_text())["results"]["plays"]
    report = LmEvalReport.decode((out / "report.json").read_bytes()).task("plays")
    assert results["acc,none"] == pytest.approx(scores["acc"].mean())
    assert results["acc_bytes,none"] == pytest.approx(scores["acc_norm"].mean())
    assert report.bpb == pytest.approx(scores["bpb"].mean(), abs=1e-3 / math.log(2))


def test_bad_inputs_are_one_line_each(trained: Trained, offline: Path):
    task = _write_task(offline / "plays.jsonl")
    not_a_run = offline / "notes"
    not_a_run.mkdir()
    (not_a_run / "readme.txt").write_text("a folder of notes")
    one_line_error(marin_cli("eval", "lm-eval", str(not_a_run), "--tasks", str(task)),
                   str(not_a_run), "neither a training step's output", "Hugging Face folder")
    one_line_error(marin_cli("eval", "lm-eval", str(offline / "gone"), "--tasks", str(task)),
                   str(offline / "gone"), "does not exist")
    missing = offline / "missing.jsonl"
    one_line_error(marin_cli("eval", "lm-eval", str(trained.run), "--tasks", str(missing)),
                   f"task file {missing} does not exist")
    bad = offline / "bad.jsonl"
    bad.write_text('{"context": "a", "choices": ["b"], "gold": 1}\n')
    one_line_error(marin_cli("eval", "lm-eval", str(trained.run), "--tasks", str(bad)),
                   f"{bad}:1", "field 'gold'")
    full = offline / "full"
    full.mkdir()
    (full / "keep.txt").write_text("kept")
    one_line_error(marin_cli("eval", "lm-eval", str(trained.run), "--tasks", str(task),
                             "--out", str(full)), f"--out {full} holds files")
    assert (full / "keep.txt").read_text() == "kept"


def test_without_the_extra_the_command_names_it(trained: Trained, offline: Path):
    """lm-eval is installed here (the test extra holds it), so its absence is made in the
    command's own process: an import hook refuses ``lm_eval`` as an absent package does."""
    task = _write_task(offline / "plays.jsonl")
    code = ("import sys\n"
            "class Absent:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.split('.')[0] == 'lm_eval':\n"
            "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
            "sys.meta_path.insert(0, Absent())\n"
            "from marin.cli import main\n"
            "sys.exit(main(sys.argv[1:]))\n")
    done = subprocess.run([sys.executable, "-c", code, "eval", "lm-eval", str(trained.run),
                           "--tasks", str(task)], capture_output=True, text=True, cwd=ROOT,
                          timeout=300)
    one_line_error(done, "lm-eval cannot be imported", "pip install 'marin[lm-eval]'")


def test_lm_eval_step_is_a_cached_step_over_the_export(trained: Trained, offline: Path,
                                                       monkeypatch, tmp_path_factory):
    import tempfile

    from marin.evaluation import TaskConfig
    from marin.evaluation.harness import lm_eval_step
    from marin.execution import Executor, StepState
    from marin.export import export_hf

    monkeypatch.setattr(tempfile, "tempdir", str(offline))  # the export's scratch folder
    export = export_hf(str(trained.run), str(offline / "export"))
    task = TaskConfig(name="plays", path=str(_write_task(offline / "plays.jsonl")))
    step = lm_eval_step("eval/plays", export.out, [task], batch_size=4)
    prefix = str(offline / "prefix")
    first = Executor(prefix).run([step])
    assert first.ok, first.summary()
    assert [s.state for s in first.steps] == [StepState.SUCCEEDED]
    out = Path(first.plan.entry_of(first.plan.graph.node_of(step)).output_path)
    report = LmEvalReport.decode((out / "report.json").read_bytes())
    assert (report.model, report.step) == (export.out, None)
    assert [len(t.items) for t in report.tasks] == [len(ITEMS)]
    samples = sorted((json.loads(line) for line in
                      (out / "samples_plays.jsonl").read_text().splitlines()),
                     key=lambda s: s["doc_id"])
    assert [s["doc"]["context"] for s in samples] == [i.context for i in ITEMS]
    again = Executor(prefix).run([step])
    assert [s.state for s in again.steps] == [StepState.SKIPPED]
    assert LmEvalReport.decode((out / "report.json").read_bytes()) == report
