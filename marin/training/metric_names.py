"""The names of training metrics (Levanter's), and the reading of files with older names.

    from marin.training.metric_names import TRAIN_LOSS, canonical
    record = canonical({"step": 3, "loss": 2.5})   # {"step": 3, "train/loss": 2.5}
    record[TRAIN_LOSS]                              # 2.5

``metrics.jsonl``, the trackers and ``summary.json`` use Levanter's names, so that tools
written for Levanter and Marin runs (W&B panels, Marin's scaling-law analysis) read marin's
runs as they are. A run's downstream tasks (``marin.evaluation``) are recorded as
``lm_eval/<task>/acc``, ``lm_eval/<task>/acc_norm`` and ``lm_eval/<task>/bpb`` (the gold
choice's bits per byte), and their means over the run's tasks as ``lm_eval/averages/acc``,
``lm_eval/averages/acc_norm``, ``lm_eval/averages/bpb`` (``task_name``). Files written
before the rename used short names (``loss``, ``eval_loss``, ``tokens_per_s``, ...): every
reader passes its records through ``canonical``, the one place that knows the old names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from marin.evaluation.tasks import AVERAGES as TASK_AVERAGES
from marin.evaluation.tasks import QUANTITIES as TASK_QUANTITIES
from marin.evaluation.tasks import metric_name as task_name

__all__ = [
    "EVAL_BPB",
    "EVAL_LOSS",
    "EVAL_MACRO_BPB",
    "EVAL_MACRO_LOSS",
    "GRAD_NORM",
    "LEARNING_RATE",
    "MFU",
    "PARAMETER_COUNT",
    "STEP_TIME",
    "TASK_AVERAGES",
    "TASK_QUANTITIES",
    "TOKENS_PER_SECOND",
    "TOTAL_GFLOPS",
    "TOTAL_TOKENS",
    "TRAIN_LOSS",
    "canonical",
    "eval_name",
    "task_name",
]

TRAIN_LOSS = "train/loss"
EVAL_LOSS = "eval/loss"
EVAL_BPB = "eval/bpb"
EVAL_MACRO_LOSS = "eval/macro_loss"  # the mean over named validation sets of their loss
EVAL_MACRO_BPB = "eval/macro_bpb"
LEARNING_RATE = "optim/learning_rate"
GRAD_NORM = "optim/grad_norm"
STEP_TIME = "throughput/duration"
TOKENS_PER_SECOND = "throughput/tokens_per_second"
MFU = "throughput/mfu"
TOTAL_TOKENS = "throughput/total_tokens"
TOTAL_GFLOPS = "throughput/total_gflops"
PARAMETER_COUNT = "parameter_count"

#: the names of files written before marin used Levanter's names
_OLD_NAMES = {"loss": TRAIN_LOSS, "eval_loss": EVAL_LOSS, "eval_bpb": EVAL_BPB,
              "learning_rate": LEARNING_RATE, "grad_norm": GRAD_NORM, "step_time": STEP_TIME,
              "tokens_per_s": TOKENS_PER_SECOND, "mfu": MFU}


def eval_name(dataset: str | None, quantity: str) -> str:
    """``eval/loss`` for the validation split, ``eval/<dataset>/<quantity>`` for a named
    evaluation set (``eval/paloma/c4_en/bpb``), ``eval/macro_<quantity>`` for ``macro``."""
    if dataset is None:
        return f"eval/{quantity}"
    if dataset == "macro":
        return f"eval/macro_{quantity}"
    return f"eval/{dataset}/{quantity}"


def canonical(record: Mapping[str, Any]) -> dict[str, Any]:
    """``record`` with any old metric name replaced by Levanter's (a new name, when both
    are present, wins)."""
    if not any(name in record for name in _OLD_NAMES):
        return dict(record)
    renamed = {_OLD_NAMES.get(k, k): v for k, v in record.items() if k in _OLD_NAMES}
    return {**renamed, **{k: v for k, v in record.items() if k not in _OLD_NAMES}}
