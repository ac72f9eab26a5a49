"""Live step states, published by executors to a cluster's KV service.

    progress = publishing(progress)     # an invocation observer (marin.run_observers):
                                        # a no-op unless a cluster or a log service is set
    read_states(KVClient.connect(url))  # [{"step": ..., "state": "running", "host": ...}]

A cluster is configured by $MARIN_KV (a KV service URL) or $MARIN_CLUSTER (a cluster name,
resolved as ``iris://NAME?endpoint=/system/kv``). Each executor writes
``steps/EXECUTOR/STEP_KEY`` with the step's state, output path, host and pid whenever a
step starts, finishes or is blocked. Publishing runs on a background thread: a slow or
absent KV service never holds up the schedule; failures are logged once.
"""

from __future__ import annotations

import json
import logging
import math
import os
import queue
import socket
import threading
import time
import uuid
from typing import Any

from marin.execution import StepState

PREFIX = "steps/"
_log = logging.getLogger("marin.services.kv_service.step_states")


def kv_url_from_env() -> str | None:
    if os.environ.get("MARIN_KV"):
        return os.environ["MARIN_KV"]
    cluster = os.environ.get("MARIN_CLUSTER")
    return f"iris://{cluster}?endpoint=/system/kv" if cluster else None


def publishing(progress: Any) -> Any:
    """``progress`` itself, or a wrapper that also publishes step states (when a cluster is
    set) and logs each step's start and end (when $MARIN_LOGGER is set). Also routes this
    process's logs to $MARIN_LOGGER."""
    from marin.services.log_service.handler import install_from_env

    handler = install_from_env()
    url = kv_url_from_env()
    if not url and handler is None:
        return progress
    return _PublishingProgress(progress, url, handler)


class _PublishingProgress:
    def __init__(self, inner: Any, url: str | None, handler: Any):
        self._inner = inner
        self._url = url
        self._handler = handler
        self.executor = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self._queue: queue.Queue[tuple[str, dict] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._publish_loop, daemon=True,
                                        name="marin-step-states")
        if url:
            self._thread.start()

    def _publish(self, entry: Any, state: StepState, error: str | None = None) -> None:
        node = entry.node
        value = {"step": node.key, "name": entry.name, "state": state.value,
                 "output_path": entry.output_path, "host": socket.gethostname(),
                 "pid": os.getpid(), "executor": self.executor, "updated": time.time(),
                 "error": error}
        if self._handler is not None:
            # Straight to the service, not through the root logger: the console already
            # shows progress its own way.
            self._handler.client.write_batch([{
                "level": "ERROR" if error and state is not StepState.BLOCKED else "INFO",
                "msg": f"step {node.key} {state}" + (f": {error}" if error else ""),
                "source": "marin.executor", "output_path": entry.output_path,
                "executor": self.executor, "state": state.value}])
        if self._url:
            self._queue.put((f"{PREFIX}{self.executor}/{node.key}", value))

    def _publish_loop(self) -> None:
        from marin.services.channel import ServiceError
        from marin.services.kv_service.client import KVClient
        from marin.services.resolve import ResolutionError

        kv, warned = None, False
        while (item := self._queue.get()) is not None:
            try:
                kv = kv or KVClient.connect(self._url, timeout=5.0)
                kv.put(item[0], json.dumps(item[1]))
            except (ServiceError, ResolutionError) as e:
                if not warned:
                    _log.warning("cannot publish step states to %s: %s", self._url, e)
                    warned = True
            finally:
                self._queue.task_done()
        self._queue.task_done()
        if kv is not None:
            kv.close()

    def invocation_started(self, plan: Any, pending: int) -> None:
        self._inner.invocation_started(plan, pending)

    def step_started(self, entry: Any) -> None:
        self._publish(entry, StepState.RUNNING)
        self._inner.step_started(entry)

    def step_finished(self, entry: Any, outcome: Any) -> None:
        self._publish(entry, outcome.state, outcome.error)
        self._inner.step_finished(entry, outcome)

    def step_blocked(self, entry: Any, reason: str) -> None:
        self._publish(entry, StepState.BLOCKED, reason)
        self._inner.step_blocked(entry, reason)

    def invocation_finished(self) -> None:
        if self._url:
            self._queue.put(None)
            self._thread.join(timeout=10.0)
        if self._handler is not None:
            self._handler.flush()
        self._inner.invocation_finished()


def read_states(kv: Any) -> list[dict[str, Any]]:
    """The published step states, newest first. A record that is not a JSON object (written
    by hand, or by something else) becomes a row saying so, named by its key; an
    ``updated`` that is not a finite number reads as 0."""
    rows = []
    for item in kv.list(PREFIX):
        try:
            row = json.loads(item.value)
        except (ValueError, RecursionError):
            row = None
        if not isinstance(row, dict):
            row = {"step": item.key[len(PREFIX):], "state": "unreadable record",
                   "error": f"the value of {item.key} is not a JSON object"}
        row["updated"] = _seconds(row.get("updated"))
        rows.append(row)
    return sorted(rows, key=lambda r: -r["updated"])


def _seconds(value: Any) -> float:
    """A finite number of seconds, else 0.0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0.0
    try:
        seconds = float(value)
    except OverflowError:  # an int beyond any float
        return 0.0
    return seconds if math.isfinite(seconds) else 0.0
