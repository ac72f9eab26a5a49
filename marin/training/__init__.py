"""Training: the language-model trainer step, optimizers, checkpoints.

    from marin.training import OptimizerHyperparameters, TrainLmConfig, train_lm, train_step

Design note: names are loaded on first use (PEP 562), so ``import marin.training`` or
``marin.training.hyperparameters`` imports neither JAX nor the scaling-law fits; a study can
build optimizer hyperparameters and plan its runs without them.
"""

from __future__ import annotations

from marin._lazy import lazy_exports

_EXPORTS = {
    "OptimizerHyperparameters": "marin.training.hyperparameters",
    "TrainLmConfig": "marin.training.trainer",
    "TrainingConfigError": "marin.training.trainer",
    "TrainingDivergedError": "marin.training.trainer",
    "train_lm": "marin.training.trainer",
    "train_step": "marin.training.trainer",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
