"""Stops at the stages of a step's protocol, for the fault-matrix tests only.

    MARIN_FAULT=commit:sigkill marin executor --prefix P EXP   # dies in the middle of a commit
    fault_point("commit")                                      # where the worker passes it

``MARIN_FAULT`` is ``STAGE:ACTION``: the first time this process reaches ``STAGE`` (one of
``STAGES``) it sends itself SIGKILL (``sigkill``), SIGTERM, SIGINT or SIGHUP (``sigterm``,
``sigint``, ``sighup``: the stage then goes on a moment later, as after a signal that
arrives while it runs) or SIGSTOP (``pause``: stopped until SIGCONT). Read once, at
import; unset, a fault point is one comparison. Not a public API:
tests/test_commit_faults.py sets it.
"""

from __future__ import annotations

import os
import signal
import threading
import time

__all__ = ["ACTIONS", "STAGES", "fault_point"]

STAGES = ("lease", "running", "writes", "publish", "commit", "status", "release")
"""The lease taken; RUNNING written; inside the step's writes (the test step calls it); a
shared-folder publish; the commit, after its first name is in place; just before SUCCESS;
just before the lease is released."""
ACTIONS = {"sigkill": signal.SIGKILL, "sigterm": signal.SIGTERM, "sigint": signal.SIGINT,
           "sighup": signal.SIGHUP, "pause": signal.SIGSTOP}

_SPEC = os.environ.get("MARIN_FAULT") or None
_FIRED: list[str] = []


def fault_point(stage: str) -> None:
    """Act on ``MARIN_FAULT`` if it names ``stage`` (once per process)."""
    if _SPEC is None:
        return
    _act(stage)


def _act(stage: str) -> None:
    name, _, action = _SPEC.partition(":")  # type: ignore[union-attr]
    if name not in STAGES or action not in ACTIONS:
        raise ValueError(f"MARIN_FAULT={_SPEC!r}: write STAGE:ACTION, a stage of "
                         f"{', '.join(STAGES)} and an action of {', '.join(ACTIONS)}")
    if name != stage or _FIRED:
        return
    _FIRED.append(stage)
    if action in ("sigkill", "pause"):
        # Sent to this very thread, it takes effect before the call returns (one sent to the
        # process may let this thread run on a little first).
        signal.pthread_kill(threading.get_ident(), ACTIONS[action])
        return
    os.kill(os.getpid(), ACTIONS[action])
    time.sleep(0.3)  # the main thread handles it while this stage is still under way
