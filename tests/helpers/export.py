"""The trained run the ``marin export hf`` tests read, and the command line they run.

    trained = train_export_run(cache_root, prefix)   # Trained(run, config, data)
    line = one_line_error(marin_cli("export", "hf", str(trained.run), str(out)))

The ``trained`` fixture in ``tests/conftest.py`` trains one per session; tests copy it
before changing it.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

from marin.execution import Executor, ExecutorStep
from marin.execution.step import this_output_path
from marin.models import TransformerConfig
from marin.training import TrainLmConfig, train_lm
from tests.conftest import ROOT
from tests.helpers.processes import one_line_error
from tests.helpers.training import VOCAB, tiny_config

__all__ = ["SMALLEST", "Trained", "marin_cli", "one_line_error", "train_export_run"]

SMALLEST = TransformerConfig(hidden_dim=32, intermediate_dim=64, num_layers=2, num_heads=4,
                             num_kv_heads=2, vocab_size=VOCAB, seq_len=16)


@dataclasses.dataclass(frozen=True)
class Trained:
    run: Path
    config: TrainLmConfig
    data: Path


def train_export_run(cache: Path, prefix: Path) -> Trained:
    """A 3-step run of the smallest GQA shape, checkpointed at steps 2 and 3, trained by the
    executor under ``prefix``."""
    config = tiny_config(cache, Path("unused"), model=SMALLEST, train_steps=3, checkpoint_every=2,
                         compute_dtype="float32", eval_batches=1, output_path=this_output_path())
    step = ExecutorStep("train/export-tiny", train_lm, config)
    result = Executor(str(prefix)).run([step])
    assert result.ok, result.summary()
    run = Path(result.plan.entry_of(result.plan.graph.node_of(step)).output_path)
    return Trained(run, dataclasses.replace(config, output_path=str(run)), cache)


def marin_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "marin.cli", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=300)
