"""The training config without JAX: its refusals, and the run summary's file format."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from marin.models import TransformerConfig
from marin.training import (
    DataComponent,
    EvalFigures,
    RunSummary,
    TrainingConfigError,
    TrainLmConfig,
    ValidationSet,
    read_summary,
)
from marin.training.config import check_batch_layout
from marin.training.hyperparameters import OptimizerHyperparameters
from marin.training.summary import SummaryError, write_summary
from tests.conftest import ROOT

MODEL = TransformerConfig(hidden_dim=32, intermediate_dim=64, num_layers=1, num_heads=1,
                          num_kv_heads=1, vocab_size=64, seq_len=16)
HYPER = OptimizerHyperparameters(learning_rate=0.01, adam_learning_rate=0.01, epsilon=1e-8,
                                 beta1=0.9, beta2=0.98)


def config(**changes) -> TrainLmConfig:
    fields = {"cache_path": "/data/cache", "model": MODEL, "batch_size": 2, "train_steps": 3,
              "optimizer": HYPER, "output_path": "/out", **changes}
    return TrainLmConfig(**fields)


IMPORTS = """
import json, sys
from marin.training import TrainLmConfig, DataComponent, ValidationSet, RunSummary
from marin.training.config import TrainLmConfig
from marin.training.summary import read_summary
from marin.training.hyperparameters import OptimizerHyperparameters
TrainLmConfig(cache_path="/c", model=None, batch_size=1, train_steps=1,
              optimizer=OptimizerHyperparameters(1e-2, 1e-2, 1e-8, 0.9, 0.95))
print(json.dumps(sorted(m for m in sys.modules
                        if m.split(".")[0] in ("jax", "jaxlib", "equinox", "haliax", "optax"))))
"""


def test_the_config_and_summary_modules_import_no_jax():
    out = subprocess.run([sys.executable, "-c", IMPORTS], capture_output=True, text=True,
                         timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_the_trainer_re_exports_the_config():
    import marin.training.trainer as trainer

    assert trainer.TrainLmConfig is TrainLmConfig
    assert trainer.TrainingConfigError is TrainingConfigError


@pytest.mark.parametrize(("changes", "message"), [
    ({"cache_path": None}, r"^TrainLmConfig has no training data: give cache_path"),
    ({"mixture": (DataComponent("a", "/c/a", 1.0),)},
     r"^TrainLmConfig has both cache_path and mixture: .*set cache_path=None"),
    ({"cache_path": None, "mixture": (DataComponent("a", "/c/a", -0.5),)},
     r"^TrainLmConfig.mixture\[0\].weight of 'a' must be a finite number >= 0, got -0.5"),
    ({"cache_path": None, "mixture": (DataComponent("a", "/c/a", float("nan")),)},
     r"^TrainLmConfig.mixture\[0\].weight of 'a' must be a finite number"),
    ({"cache_path": None, "mixture": (DataComponent("a", "/c/a", 0),
                                      DataComponent("b", "/c/b", 0.0))},
     r"^TrainLmConfig.mixture weights sum to 0: give at least one component a positive"),
    ({"cache_path": None, "mixture": (DataComponent("a", "/c/a", 1),
                                      DataComponent("a", "/c/b", 1))},
     r"^TrainLmConfig.mixture names 'a' twice"),
    ({"cache_path": None, "mixture": (DataComponent("", "/c/a", 1),)},
     r"^TrainLmConfig.mixture\[0\].name must be a non-empty label"),
    ({"cache_path": None, "mixture": ({"name": "a"},)},
     r"^TrainLmConfig.mixture\[0\] must be a DataComponent\(name, cache_path, weight\)"),
    ({"validation": (ValidationSet("v", "/c/a"), ValidationSet("v", "/c/b"))},
     r"^TrainLmConfig.validation names 'v' twice"),
    ({"validation": (ValidationSet("macro", "/c/a"),)},
     r"^TrainLmConfig.validation\[0\].name 'macro' reads as a macro average"),
    ({"validation": (ValidationSet("v", None),)},
     r"^TrainLmConfig.validation\[0\] \('v'\) has no cache_path"),
    ({"compilation_cache": ""}, r"^TrainLmConfig.compilation_cache must be a folder or None"),
    ({"train_steps": 0}, r"^TrainLmConfig.train_steps must be positive, got 0"),
    ({"microbatch_size": 0}, r"^TrainLmConfig.microbatch_size must be a positive number of "
     r"sequences per device, or None \(the whole per-device batch\), got 0"),
    ({"microbatch_size": 4}, r"^TrainLmConfig.microbatch_size=4 is larger than the "
     r"per-device batch of 2 \(batch_size=2 over 1 device\(s\)\): give at most 2, or None"),
    ({"batch_size": 6, "microbatch_size": 4}, r"^TrainLmConfig.batch_size=6 is not divisible "
     r"by 1 device\(s\) x microbatch_size=4: give a microbatch_size that divides the "
     r"per-device batch of 6 \(for example 3\)"),
    ({"optimizer": OptimizerHyperparameters(1e-2, 1e-2, 1e-8, 0.9, 0.95, optimizer="sgd")},
     r"^TrainLmConfig.optimizer.optimizer must be 'adamw' or 'adamh', got 'sgd'"),
])
def test_bad_values_fail_when_the_config_is_built_in_one_line(changes, message):
    with pytest.raises(TrainingConfigError, match=message) as caught:
        config(**changes)
    assert "\n" not in str(caught.value)


def test_good_data_and_validation_settings_are_kept():
    mixed = config(cache_path=None, mixture=[DataComponent("a", "/c/a", 0.7),
                                             DataComponent("b", "/c/b", 0)],
                   validation=[ValidationSet("a", "/c/a")])
    assert mixed.mixture == (DataComponent("a", "/c/a", 0.7), DataComponent("b", "/c/b", 0))
    assert mixed.validation == (ValidationSet("a", "/c/a"),)
    assert config(compilation_cache=None).compilation_cache is None


def test_the_default_compilation_cache_is_under_marins_cache_folder(tmp_path, monkeypatch):
    from marin.training.config import compilation_cache_folder

    monkeypatch.setenv("MARIN_CACHE_DIR", str(tmp_path))  # read when the run starts
    assert compilation_cache_folder(config().compilation_cache) == str(
        tmp_path / "jax-compilation")
    assert compilation_cache_folder(config(compilation_cache="/x").compilation_cache) == "/x"
    assert compilation_cache_folder(config(compilation_cache=None).compilation_cache) is None


def test_the_compilation_cache_trackers_and_micro_batch_keep_the_steps_identity():
    from marin.execution.hashing import canonicalize

    def ident(c):
        return canonicalize(c, dependency_id=str)

    assert ident(config(compilation_cache=None)) == ident(config(compilation_cache="/x"))
    assert ident(config(microbatch_size=1)) == ident(config())  # how, not what
    assert ident(config(validation=(ValidationSet("v", "/c"),))) != ident(config())


@pytest.mark.parametrize(("layout", "micro_steps"), [
    ((256, 8, None), 1), ((256, 8, 32), 1), ((256, 8, 8), 4), ((256, 8, 1), 32),
    ((256, 8, 8, 2), 2), ((24, 1, 4, 3), 2),
])
def test_a_batch_layout_gives_its_micro_steps(layout, micro_steps):
    assert check_batch_layout(*layout) == micro_steps


@pytest.mark.parametrize(("layout", "message"), [
    ((12, 8, None), r"^TrainLmConfig.batch_size=12 does not split over 8 device\(s\): give a "
     r"multiple of 8$"),
    ((48, 8, None, 4), r"^TrainLmConfig.batch_size=48 does not split over 4 hosts x 8 devices: "
     r"give a multiple of 32$"),
    ((64, 8, 16), r"^TrainLmConfig.microbatch_size=16 is larger than the per-device batch of 8 "
     r"\(batch_size=64 over 8 device\(s\)\): give at most 8, or None"),
    ((96, 4, 8, 2), r"^TrainLmConfig.batch_size=96 is not divisible by 2 hosts x 4 devices x "
     r"microbatch_size=8: give a microbatch_size that divides the per-device batch of 12 "
     r"\(for example 6\)$"),
])
def test_a_batch_that_does_not_split_is_refused_naming_the_field(layout, message):
    with pytest.raises(TrainingConfigError, match=message):
        check_batch_layout(*layout)


SUMMARY = RunSummary(params=1000, tokens=4096, flops=2.5e7, steps=8, batch_size=8, seq_len=64,
                     train_loss=3.5, final_step_loss=3.25, eval_loss=3.75, eval_bpb=1.5,
                     macro_loss=3.8, macro_bpb=1.55,
                     evals={"plays": EvalFigures(3.5, 1.4), "docs": EvalFigures(4.1, 1.7)},
                     tokens_by_component={"plays": 3000, "docs": 1096})


def test_a_summary_round_trips_and_carries_levanters_names(tmp_path: Path):
    write_summary(str(tmp_path), SUMMARY)
    data = json.loads((tmp_path / "summary.json").read_text())
    assert data["format"] == RunSummary.FORMAT and data["version"] == RunSummary.VERSION
    assert data["eval/plays/bpb"] == 1.4 and data["eval/macro_bpb"] == 1.55
    assert data["parameter_count"] == 1000 and data["eval/loss"] == 3.75
    assert read_summary(str(tmp_path)) == SUMMARY


def test_the_study_metrics_are_answered_by_name():
    assert SUMMARY.metric("macro_bpb") == 1.55 and SUMMARY.metric("macro_loss") == 3.8
    assert SUMMARY.metric("loss") == 3.75 and SUMMARY.metric("bpb") == 1.5
    assert SUMMARY.metric("docs/loss") == 4.1 and SUMMARY.metric("plays/bpb") == 1.4
    assert SUMMARY.metric("other/bpb") is None
    with pytest.raises(ValueError, match="unknown metric 'accuracy'"):
        SUMMARY.metric("accuracy")


OLD = {"params": 1000, "tokens": 4096, "flops": 2.5e7, "train_loss": 3.5,
       "final_step_loss": 3.25, "eval_loss": 3.75, "eval_bpb": 1.5, "steps": 8,
       "batch_size": 8, "seq_len": 64, "parameter_count": 1000,
       "throughput/total_tokens": 4096, "throughput/total_gflops": 0.025,
       "train/loss": 3.5, "eval/loss": 3.75, "eval/bpb": 1.5}


def test_an_unversioned_summary_of_the_previous_trainer_still_reads(tmp_path: Path):
    (tmp_path / "summary.json").write_text(json.dumps(OLD))
    summary = read_summary(str(tmp_path))
    assert (summary.params, summary.tokens, summary.eval_loss, summary.final_step_loss) == (
        1000, 4096, 3.75, 3.25)
    assert summary.metric("macro_bpb") == 1.5  # one split: its own figures
    assert summary.evals == {} and summary.tokens_by_component == {}


@pytest.mark.parametrize(("text", "message"), [
    (json.dumps({**OLD, "format": "marin.run_summary", "version": 99}),
     r"summary.json: a run summary of format 'marin.run_summary' version 99; .*upgrade"),
    (json.dumps({"eval_loss": 3.0}), r"summary.json: a run summary without params, tokens, "
     r"flops"),
    ("{not json", r"summary.json: Expecting property name"),
])
def test_an_unreadable_summary_is_one_line_naming_the_file(tmp_path: Path, text, message):
    (tmp_path / "summary.json").write_text(text)
    with pytest.raises(SummaryError, match=message) as caught:
        read_summary(str(tmp_path))
    assert "\n" not in str(caught.value) and str(tmp_path) in str(caught.value)
