"""Training: the language-model trainer, optimizers, checkpoints. The step of one IsoFLOP
candidate is built above it, by ``marin.scaling_laws.runs.train_step``.

    from marin.training import OptimizerHyperparameters, TrainLmConfig, train_lm
    from marin.training import DataComponent, ValidationSet, RunSummary, read_summary
    from marin.training import BranchPoint, cooldown_config   # runs that branch from a checkpoint
    from marin.training import pack_train        # runs of one shape as one program

Design note: names are loaded on first use (PEP 562), so ``import marin.training`` or
``marin.training.hyperparameters``, ``marin.training.config`` and ``marin.training.summary``
import neither JAX nor the scaling-law fits; a study can build its training configs, plan its
runs and read their summaries without them.
"""

from __future__ import annotations

from marin._lazy import lazy_exports

_EXPORTS = {
    "BranchPoint": "marin.training.branching",
    "DataComponent": "marin.training.config",
    "EvalFigures": "marin.training.summary",
    "OptimizerHyperparameters": "marin.training.hyperparameters",
    "RunSummary": "marin.training.summary",
    "TrainLmConfig": "marin.training.config",
    "TrainingConfigError": "marin.training.config",
    "TrainingDivergedError": "marin.training.config",
    "TrainingOutOfMemoryError": "marin.training.config",
    "ValidationSet": "marin.training.config",
    "cooldown_config": "marin.training.branching",
    "pack_train": "marin.training.packing",
    "read_summary": "marin.training.summary",
    "train_lm": "marin.training.trainer",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
