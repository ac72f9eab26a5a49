"""A run's trackers in a process of their own, at a lower priority: the training process
only queues each record and, every quarter of a second, hands the batch over a pipe.

    feed = start_trackers([TrackerConfig("json"), TrackerConfig("wandb")], run)
    feed.log(1, {"train/loss": 2.5})     # a queue put: the step never waits
    feed.close({"eval/loss": 2.1})        # the summary, then finish; bounded wait
    feed.failures                         # one line per tracker that failed

Design note: in the training process, a tracker's Python work (W&B's ``log`` builds and
sends a record per call, about a millisecond; its client keeps an asyncio thread;
tensorboardX has a writer thread; importing W&B and TensorBoard and starting the W&B run
take seconds) competes for the interpreter lock with the training loop, which needs it to
dispatch every step: on a tiny model that cost 7% and more of the step time, though no
step ever waited for a tracker. So the trackers run in ``python -m marin.trackers.process``
(a fresh interpreter: nothing of the training process is imported or copied), niced by
``NICE`` so that on busy cores the scheduler prefers training, W&B's own service process
inheriting that. In the child ``marin.trackers.fanout.Trackers`` runs them as before: a
failure is reported once and the tracker left out. The wire: the parent writes frames
(4-byte length, then a pickle) to the child's stdin: ``start`` (the configs, the run and the
parent's ``sys.path``, so plugins found there load), batches of ``log`` records,
``summary`` and ``finish``; the child answers on its stdout in JSON lines, each failure as
it happens and ``done`` at the end. If the child cannot be started, the trackers run on a
thread of the training process, as before, and a warning says so.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import queue
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from typing import IO, Any

from marin.trackers.config import TrackerConfig, TrackerRun
from marin.trackers.fanout import Trackers, normalize

__all__ = ["NICE", "TrackerProcess", "start_trackers"]

logger = logging.getLogger("marin.trackers")

NICE = 10
BATCH_SECONDS = 0.25
_HEADER = struct.Struct(">I")


def start_trackers(configs: Sequence[TrackerConfig | str] | None, run: TrackerRun) -> Any:
    """The run's trackers in their own process (a ``Trackers`` on a thread when it cannot
    be started); nothing to start without trackers."""
    pending = normalize(configs)
    if not pending:
        return Trackers([])
    try:
        return TrackerProcess(pending, run)
    except OSError as e:
        logger.warning("trackers: cannot start their process (%s: %s); they run on a thread "
                       "of the training process", type(e).__name__, e)
        return Trackers.open(pending, run)


class TrackerProcess:
    """The parent's side: a queue, a thread that sends it in batches, one that reads the
    child's reports."""

    def __init__(self, configs: list[TrackerConfig], run: TrackerRun):
        self.failures: list[str] = []
        self._queue: queue.Queue[tuple[str, Any] | None] = queue.Queue()
        # the parent's path, so that marin and the plugins import there as they do here
        # (a script that put a checkout on sys.path has no marin installed)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in sys.path if isinstance(p, str) and p)}
        self._child = subprocess.Popen(
            [sys.executable, "-m", "marin.trackers.process"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=None, close_fds=True, env=env)
        self._broken = False
        # sent by the feeding thread: a large config never waits for the child on this one
        self._queue.put(("start", {"configs": configs, "run": run, "sys_path": list(sys.path)}))
        self._sender = threading.Thread(target=self._feed, name="marin-trackers-feed",
                                        daemon=True)
        self._reader = threading.Thread(target=self._read, name="marin-trackers-reports",
                                        daemon=True)
        self._sender.start()
        self._reader.start()

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        self._queue.put(("log", (step, dict(metrics))))

    def close(self, summary: dict[str, Any] | None = None, timeout: float = 120.0) -> None:
        """Send the summary, finish every tracker, and wait for them at most ``timeout``;
        a child still busy then is ended."""
        if not self._sender.is_alive():
            return
        deadline = time.monotonic() + timeout
        if summary:
            self._queue.put(("summary", dict(summary)))
        self._queue.put(("finish", None))
        self._queue.put(None)
        self._sender.join(max(0.0, deadline - time.monotonic()))
        try:
            self._child.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            logger.warning("trackers still busy after %.0f s: their process is ended; the run "
                           "is done (their files may be incomplete)", timeout)
            self._child.terminate()
            try:
                self._child.wait(2)
            except subprocess.TimeoutExpired:
                self._child.kill()
                self._child.wait()
        self._reader.join(2)

    def _feed(self) -> None:
        """Batches of what the queue holds, one write per batch."""
        while True:
            item = self._queue.get()
            if item is None:
                break
            batch, end = [item], False
            flush_at = time.monotonic() + BATCH_SECONDS
            while item[0] == "log" and (wait := flush_at - time.monotonic()) > 0:
                try:
                    item = self._queue.get(timeout=wait)
                except queue.Empty:
                    break
                if item is None:
                    end = True
                    break
                batch.append(item)
            logs = [payload for kind, payload in batch if kind == "log"]
            if logs:
                self._send(("log", logs))
            for kind, payload in batch:
                if kind != "log":
                    self._send((kind, payload))
            if end:
                break
        self._close_pipe()

    def _send(self, message: tuple[str, Any]) -> None:
        if self._broken:
            return
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        try:
            self._child.stdin.write(_HEADER.pack(len(data)) + data)
            self._child.stdin.flush()
        except (OSError, ValueError) as e:  # the child ended: the records have nowhere to go
            self._broken = True
            self._report(f"trackers: their process ended ({type(e).__name__}: {e}); the "
                         "rest of the run's records are not tracked, training goes on")

    def _close_pipe(self) -> None:
        try:
            self._child.stdin.close()
        except OSError:
            pass

    def _read(self) -> None:
        for line in self._child.stdout:
            try:
                report = json.loads(line)
            except ValueError:
                continue
            if isinstance(report, dict) and isinstance(report.get("failed"), str):
                self._report(report["failed"])

    def _report(self, line: str) -> None:
        self.failures.append(line)
        logger.warning("%s", line)


# -- the child -------------------------------------------------------------------------------

def _frames(stream: IO[bytes]):
    while header := stream.read(_HEADER.size):
        (size,) = _HEADER.unpack(header)
        yield pickle.loads(stream.read(size))


def main() -> None:
    # The protocol keeps the process's own stdin and stdout; anything a tracker prints goes
    # to stderr, so that it cannot break the channel.
    wire_in = os.fdopen(os.dup(0), "rb")
    wire_out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(2, 1)
    logging.getLogger("marin.trackers").addHandler(logging.NullHandler())
    logging.getLogger("marin.trackers").propagate = False  # the parent reports failures
    lock = threading.Lock()

    def say(report: dict[str, Any]) -> None:
        with lock:
            wire_out.write(json.dumps(report) + "\n")

    trackers, summary = None, None
    for kind, payload in _frames(wire_in):
        if kind == "start":
            sys.path[:0] = [p for p in payload["sys_path"] if p not in sys.path]
            if hasattr(os, "nice"):
                os.nice(NICE)
            trackers = Trackers.open(payload["configs"], payload["run"],
                                     on_failure=lambda line: say({"failed": line}))
        elif trackers is None:
            continue
        elif kind == "log":
            for step, metrics in payload:
                trackers.log(step, metrics)
        elif kind == "summary":
            summary = payload
        elif kind == "finish":
            break
    if trackers is not None:  # finish, or the parent went away: the files end complete
        trackers.close(summary)
    say({"done": True})


if __name__ == "__main__":
    main()
