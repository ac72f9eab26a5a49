"""Marin's names for marin.execution's ideas, kept so Marin's code imports unchanged.

    from marin.execution.executor import InputName, OutputName, THIS_OUTPUT_PATH, StepStatus
    InputName(tokenize, "cache")      # output_path_of(tokenize, "cache")
    StepStatus.SUCCESS                # StepState.SUCCEEDED

Each name is the canonical object under another spelling: ``InputName`` is
``OutputPathOf`` (``output_path_of``), ``OutputName`` is ``this_output_path`` (a sub-path of
the step's own output), ``THIS_OUTPUT_PATH`` is ``this_output_path()``, ``StepStatus`` is
``StepState`` with ``SUCCESS`` as another name of ``SUCCEEDED``. ``marin.execution.executor``
re-exports them, where Marin's code imports them from.
"""

from __future__ import annotations

from typing import Any

from marin.execution.states import StepState
from marin.execution.step import OutputPathOf, ThisOutputPath

InputName = OutputPathOf
"""Marin's name for ``OutputPathOf``: one class, two names (``step / "f"`` and
``step.cd("f")`` build one too)."""

OutputName = ThisOutputPath
"""Marin's name for ``ThisOutputPath``."""

THIS_OUTPUT_PATH: Any = ThisOutputPath()
"""``this_output_path()`` as a constant, for dataclass defaults."""

__all__ = ["THIS_OUTPUT_PATH", "InputName", "OutputName", "StepStatus"]


class _StatusNames(type):
    """``StepStatus.X`` is ``StepState.X``; ``isinstance(s, StepStatus)`` is a StepState."""

    def __getattr__(cls, name: str) -> Any:
        if name == "SUCCESS":
            return StepState.SUCCEEDED
        try:
            return StepState[name]
        except KeyError:
            raise AttributeError(f"StepStatus has no member {name!r}") from None

    def __instancecheck__(cls, instance: Any) -> bool:
        return isinstance(instance, StepState)

    def __iter__(cls):
        return iter(StepState)


class StepStatus(metaclass=_StatusNames):
    """Marin's name of ``StepState``: ``StepStatus.SUCCESS`` is ``StepState.SUCCEEDED``,
    ``StepStatus("failed")`` is ``StepState.FAILED``."""

    def __new__(cls, value: str) -> StepState:  # type: ignore[misc]
        return StepState(value)
