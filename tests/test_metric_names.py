"""Levanter's metric names: written by the trainer, read by every reader, older files too."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from marin.dashboard.metrics import read_curves
from marin.scaling_laws.study import _eval_losses
from marin.training.metric_names import canonical, eval_name

OLD = [{"step": 1, "loss": 5.0, "learning_rate": 0.1, "tokens_per_s": 100.0, "mfu": 0.2},
       {"step": 2, "loss": 4.0, "eval_loss": 4.5, "eval_bpb": 2.0}]
NEW = [{"step": 1, "train/loss": 5.0, "optim/learning_rate": 0.1,
        "throughput/tokens_per_second": 100.0, "throughput/mfu": 0.2},
       {"step": 2, "train/loss": 4.0, "eval/loss": 4.5, "eval/bpb": 2.0}]


def test_old_names_become_levanters_and_new_ones_stay():
    assert [canonical(r) for r in OLD] == NEW
    assert [canonical(r) for r in NEW] == NEW
    assert canonical({"step": 1, "loss": 1.0, "train/loss": 2.0}) == {"step": 1,
                                                                      "train/loss": 2.0}
    assert eval_name("paloma/c4_en", "bpb") == "eval/paloma/c4_en/bpb"
    assert eval_name("macro", "loss") == "eval/macro_loss"


@pytest.mark.parametrize("records", [OLD, NEW], ids=["old", "new"])
def test_the_dashboard_and_the_study_read_both_layouts(tmp_path: Path, records):
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    curves = read_curves(str(tmp_path / "metrics.jsonl"))
    assert curves.series["loss"] == ([1, 2], [5.0, 4.0])
    assert curves.series["eval_loss"] == ([2], [4.5])
    assert curves.series["tokens_per_s"] == ([1], [100.0])
    assert _eval_losses(str(tmp_path)) == [4.5]
