"""How a step's function says that it resumes from what an earlier attempt left.

    @resumable
    def train_lm(config: TrainLmConfig) -> None: ...

    ExecutorStep("train/x", train_lm, config).resumes          # True: declared
    ExecutorStep("train/x", train_lm, config, resumable=False).resumes   # False: opted out
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["declares_resumable", "resumable"]

F = TypeVar("F", bound=Callable[..., Any])

_RESUMABLE_ATTRIBUTE = "__marin_resumable__"


def resumable(fn: F) -> F:
    """Declare that ``fn`` resumes from what an earlier attempt of its step left (it reads
    its own output: checkpoints, a ledger of finished shards), so its steps resume by
    default: ``ExecutorStep(name, fn, config)`` is ``resumable=True`` unless it says
    ``resumable=False``. Returns ``fn`` itself; a callable class may be decorated too."""
    setattr(fn, _RESUMABLE_ATTRIBUTE, True)
    return fn


def declares_resumable(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` (or the function a ``functools.partial`` wraps) is ``@resumable``."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    return getattr(fn, _RESUMABLE_ATTRIBUTE, False) is True
