"""Training: the language-model trainer step, optimizers, checkpoints.

    from marin.training import TrainLmConfig, train_lm, train_step
"""

from marin.training.trainer import (
    TrainingConfigError,
    TrainingDivergedError,
    TrainLmConfig,
    train_lm,
    train_step,
)

__all__ = ["TrainLmConfig", "TrainingConfigError", "TrainingDivergedError", "train_lm",
           "train_step"]
