"""Keeping ``os._exit`` from ending the executor while a step runs in one of its threads.

    with exit_guard():
        fn(config)            # os._exit(3) here raises StepExitError instead

A step that calls ``os._exit`` would end the executor with status 0 and leave the step
RUNNING. Inside the guard the call raises ``StepExitError`` (a ``BaseException``, so a
step's ``except Exception`` does not swallow it), and the worker records the step as failed.
Forked children and other threads keep the real ``os._exit``.
"""

from __future__ import annotations

import os
import threading

__all__ = ["StepExitError", "exit_guard"]


class StepExitError(BaseException):
    """A step called ``os._exit``; raised in its place so the invocation records the step."""


_IN_STEP = threading.local()
_GUARD: dict[str, object] = {}


def _guarded_exit(code: int) -> None:
    if os.getpid() == _GUARD["pid"] and getattr(_IN_STEP, "active", False):
        raise StepExitError(f"the step called os._exit({code}); a step must return or raise. "
                            "The executor stays alive so that the step is recorded as failed")
    _GUARD["exit"](code)  # type: ignore[operator]


class exit_guard:
    """While a step runs in this thread, ``os._exit`` raises instead of ending the process
    (which would end the executor with status 0 and the step RUNNING). Forked children and
    other threads keep the real ``os._exit``."""

    def __enter__(self) -> None:
        if os._exit is not _guarded_exit:
            _GUARD.update(pid=os.getpid(), exit=os._exit)
            os._exit = _guarded_exit
        _GUARD["pid"] = os.getpid()
        _IN_STEP.active = True

    def __exit__(self, *exc: object) -> None:
        _IN_STEP.active = False
