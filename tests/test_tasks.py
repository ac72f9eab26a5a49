"""Downstream tasks: the task file's reader and its errors, the scores against a plain numpy
reference over the model's own logits, and a run that records them."""

from __future__ import annotations

import json
import math
from pathlib import Path

import equinox as eqx
import haliax as hax
import jax
import numpy as np
import pytest

from marin.dashboard.metrics import read_curves
from marin.evaluation import TaskConfig, TaskError, TaskItem, read_task, task_fingerprint
from marin.evaluation.scoring import TaskSuite, encode_task, item_scores
from marin.execution import ExecutorStep, this_output_path
from marin.execution.graph import StepOrder
from marin.execution.hashing import canonical_json, canonicalize
from marin.execution.overrides import apply_overrides
from marin.models.transformer import Axes, TransformerLM
from marin.processing.tokenize.encoders import load_encoder
from marin.training import TrainingConfigError, read_summary, train_lm
from marin.training.state import CompileClock
from tests.helpers.training import tiny_config

ITEMS = [TaskItem("The king spoke to the", (" queen", " duke of York", " sea"), 0),
         TaskItem("Enter two murderers, with", (" swords", " a letter"), 1),
         TaskItem("O, what a noble mind is here", (" o'erthrown!", " restored.", " gone", " x"),
                  2),
         TaskItem("Exit", (" all", " the ghost"), 1),
         TaskItem("Good night, sweet prince, and flights of angels sing thee to thy",
                  (" rest", " bed"), 0)]


def _write(path: Path, items=ITEMS) -> Path:
    path.write_text("".join(item.encode() + "\n" for item in items))
    return path


@pytest.mark.parametrize("line, field", [
    ('{"context": "a", "choices": ["b", "c"], "gold": 2}', "field 'gold'"),
    ('{"context": "a", "choices": ["b"], "gold": -1}', "field 'gold'"),
    ('{"context": "a", "choices": [], "gold": 0}', "field 'choices'"),
    ('{"context": "a", "choices": ["b", ""], "gold": 0}', "field 'choices'[1]"),
    ('{"context": "  ", "choices": ["b"], "gold": 0}', "field 'context'"),
    ('{"choices": ["b"], "gold": 0}', "field 'context'"),
    ('{"context": "a", "choices": ["b"], "gold": 0', "not a JSON line"),
    ('["a", ["b"], 0]', "not an object"),
])
def test_a_bad_item_fails_in_one_line_naming_file_line_and_field(tmp_path: Path, line, field):
    path = tmp_path / "task.jsonl"
    path.write_text(ITEMS[0].encode() + "\n\n" + line + "\n")
    with pytest.raises(TaskError) as info:
        read_task(str(path))
    message = str(info.value)
    assert message.startswith(f"{path}:3: ") and field in message and "\n" not in message


def test_a_task_file_reads_back_its_items_and_is_fingerprinted_by_content(tmp_path: Path):
    path = _write(tmp_path / "task.jsonl")
    assert read_task(str(path)) == ITEMS
    first = task_fingerprint(str(path))
    _write(path, [*ITEMS[:3], TaskItem("Exit", (" all", " the ghost"), 0), *ITEMS[4:]])
    assert task_fingerprint(str(path)) != first
    with pytest.raises(TaskError, match="does not exist"):
        read_task(str(tmp_path / "missing.jsonl"))
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(TaskError, match="holds no items"):
        read_task(str(tmp_path / "empty.jsonl"))


def _reference_logliks(model: TransformerLM, encoder, items: list[TaskItem]
                       ) -> list[list[float]]:
    """Each choice's summed log-probability: every choice's tokens after its context's, one
    row each in one forward pass, the log-softmax in float64 numpy."""
    rows, spans = [], []
    for item in items:
        context = encoder.encode_batch([item.context])[0]
        for continuation in encoder.encode_batch(list(item.choices)):
            sequence = context + continuation
            rows.append(sequence + [0] * (model.config.seq_len - len(sequence)))
            spans.append((sequence, len(context)))
    batch = hax.named(np.array(rows, np.int32), (hax.Axis("batch", len(rows)),
                                                 Axes(model.config).Pos))
    logits = np.asarray(eqx.filter_jit(lambda m, b: m(b).array)(model, batch), np.float64)
    shifted = logits - logits.max(axis=-1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    flat = [sum(logp[r, p - 1, sequence[p]] for p in range(start, len(sequence)))
            for r, (sequence, start) in enumerate(spans)]
    out = []
    for item in items:
        out.append(flat[:len(item.choices)])
        flat = flat[len(item.choices):]
    return out


def test_scores_match_a_numpy_reference_item_for_item(cache: Path):
    encoder = load_encoder(str(cache / "tokenizer"))
    config = tiny_config(cache, Path("unused")).model
    model = TransformerLM.init(config, key=jax.random.PRNGKey(3))
    # 5 items of up to 4 choices, 2 items a batch: three batches, the last filled
    suite = TaskSuite.of([("plays", ITEMS)], encoder, config.seq_len, rows=8)
    task = suite.tasks[0]
    assert task.tokens.shape[-1] < config.seq_len  # scored at the task's length, not 64
    logliks = suite.logliks(model, task)
    scores = item_scores(logliks, task.choice_bytes, task.gold)
    for i, (item, ref) in enumerate(zip(ITEMS, _reference_logliks(model, encoder, ITEMS),
                                        strict=True)):
        np.testing.assert_allclose(logliks[i, :len(ref)], ref, rtol=1e-4, atol=1e-3)
        per_byte = [ll / len(c.encode("utf-8")) for ll, c in zip(ref, item.choices, strict=True)]
        assert scores["acc"][i] == float(int(np.argmax(ref)) == item.gold)
        assert scores["acc_norm"][i] == float(int(np.argmax(per_byte)) == item.gold)
        gold_bytes = len(item.choices[item.gold].encode("utf-8"))
        assert scores["bpb"][i] == pytest.approx(-ref[item.gold] / math.log(2) / gold_bytes,
                                                 rel=1e-4)
    with CompileClock() as clock:  # every batch of the task has the shape compiled above
        figures = suite.evaluate(model)
    assert clock.seconds == 0
    assert figures["lm_eval/plays/bpb"] == pytest.approx(float(scores["bpb"].mean()))
    assert figures["lm_eval/averages/acc"] == figures["lm_eval/plays/acc"]


def test_a_sequence_longer_than_the_model_keeps_the_end_of_its_context(cache: Path):
    encoder = load_encoder(str(cache / "tokenizer"))
    long = TaskItem("a tale told by an idiot, " * 40, (" full of sound", " and fury"), 0)
    task = encode_task("long", [long], encoder, seq_len=64)
    # lm-eval's split: the context's final space moves to the choice, whose tokens are those
    # of the whole after the (stripped) context's
    context = encoder.encode_batch([long.context[:-1]])[0]
    choice = encoder.encode_batch([long.context + " full of sound"])[0][len(context):]
    expected = (context + choice)[-64:]
    assert task.tokens[0, 0].tolist() == expected
    assert task.mask[0, 0].sum() == len(choice) and task.mask[0, 0, -1]
    with pytest.raises(TaskError, match="'long' item 1: choice 0"):
        encode_task("long", [TaskItem("x", (long.context,), 0)], encoder, seq_len=64)


def test_tasks_are_unversioned_and_overridden_on_the_command_line(tmp_path: Path):
    step = ExecutorStep("train/probe", train_lm,
                        tiny_config(tmp_path, Path("unused"), output_path=this_output_path()))
    raw = '[{"name": "plays", "path": "/data/plays.jsonl"}]'
    [overridden] = apply_overrides(StepOrder.of([step]), {"train/probe.tasks": raw}).steps
    assert overridden.config.tasks == [TaskConfig("plays", "/data/plays.jsonl")]
    assert canonical_json(canonicalize(step.config, str)) == \
        canonical_json(canonicalize(overridden.config, str))
    for name, match in (("averages", "means over tasks"), ("a/b", "splits metric names")):
        with pytest.raises(TrainingConfigError, match=match):
            tiny_config(tmp_path, tmp_path, tasks=[TaskConfig(name, "/t.jsonl")])
    with pytest.raises(TrainingConfigError, match=r"need TrainLmConfig\.tokenizer"):
        tiny_config(tmp_path, tmp_path, tokenizer=None, tasks=[TaskConfig("t", "/t.jsonl")])


@pytest.mark.slow
def test_a_run_records_its_tasks_at_every_evaluation(cache: Path, tmp_path: Path):
    tasks = [TaskConfig("plays", str(_write(tmp_path / "plays.jsonl"))),
             TaskConfig("exits", str(_write(tmp_path / "exits.jsonl", ITEMS[3:])))]
    summary = train_lm(tiny_config(cache, tmp_path / "run", train_steps=4, eval_every=2,
                                   tasks=tasks))
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").open()]
    scored = [r for r in records if "lm_eval/plays/acc" in r]
    assert [r["step"] for r in scored] == [2, 4]
    for record in scored:
        for quantity in ("acc", "acc_norm", "bpb"):
            both = [record[f"lm_eval/{t}/{quantity}"] for t in ("plays", "exits")]
            assert record[f"lm_eval/averages/{quantity}"] == pytest.approx(np.mean(both))
        assert "eval/loss" in record
    final = scored[-1]
    assert read_summary(str(tmp_path / "run")) == summary
    assert summary.tasks["exits"].bpb == final["lm_eval/exits/bpb"]
    assert summary.tasks["plays"].fingerprint == task_fingerprint(tasks[0].path)
    assert summary.metric("lm_eval/averages/acc_norm") == \
        pytest.approx(final["lm_eval/averages/acc_norm"])
    curves = read_curves(str(tmp_path / "run" / "metrics.jsonl"))
    assert curves.series["task_acc"] == ([2, 4], [r["lm_eval/averages/acc"] for r in scored])
    stored = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert stored["lm_eval/plays/acc"] == final["lm_eval/plays/acc"]

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"context": "a", "choices": ["b"], "gold": 1}\n')
    with pytest.raises(TrainingConfigError, match=r"tasks\[0\] \('bad'\): .*bad.jsonl:1: "):
        train_lm(tiny_config(cache, tmp_path / "bad-run", train_steps=2,
                             tasks=[TaskConfig("bad", str(bad))]))
