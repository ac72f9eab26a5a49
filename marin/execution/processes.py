"""Which process speaks for a step, and the processes a step leaves behind.

    owner = os.getpid()                      # the process that took the step's lease
    children = StepChildren.start()          # in the thread that runs the step
    try:
        fn(config)
    finally:
        leave_if_forked(owner)               # a forked child that returned here exits
    ended, survivors = children.end()        # before the commit: no child outlives its step

A step function may fork (``os.fork``, ``multiprocessing`` with the fork start method) or
start subprocesses. Two rules keep such processes from touching the step's records:

* **Only the owner writes.** The process that took a step's lease is its owner; a forked
  copy of it holds the same objects (the lease, the storage, the worker's stack) but is not
  the owner. Every status, lease and commit write checks ``os.getpid()`` against the owner
  (``is_owner``), and a forked child that returns (or raises) into the worker's code leaves
  at once through ``os._exit`` (``leave_if_forked``), before it runs any executor code: it
  would otherwise commit, write FAILED over the parent's SUCCESS, or wait in the runner's
  queue forever holding the parent's stdout.
* **No child outlives its step.** Before the commit, ``StepChildren.end`` sends SIGTERM to
  every process the step started that is still running, with their descendants, waits up
  to ``GRACE`` seconds, then sends SIGKILL. A lingering child can then neither write into
  the committed files through a descriptor it inherited nor keep a pipe (``| tail``) open.

Design note: steps run in threads of the executor's process, so a step has no process
group of its own. Its children are found in ``/proc``: the children of the step's own
thread (``/proc/self/task/<tid>/children``, which Linux keeps per thread) and, while no
other step runs in this process, every child this process started since the step began
(those of threads the step started, such as a pool's). While several steps run at once, a
process started by another thread than a step's own cannot be told apart, and is left
alone. The processes ``multiprocessing`` shares between all users (its resource tracker
and fork server) are never ended. Where ``/proc`` is missing (not Linux), nothing is
ended, and only the owner rule applies.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Iterable

__all__ = [
    "GRACE",
    "StepChildren",
    "descendants",
    "end_processes",
    "is_owner",
    "leave_if_forked",
    "process_alive",
]

#: Seconds a process left by a step has to exit after SIGTERM before it gets SIGKILL.
GRACE = 2.0
#: Seconds to wait for a killed process to be gone (one in uninterruptible I/O lingers).
KILL_WAIT = 10.0

_REAL_EXIT = os._exit  # the worker replaces os._exit while a step runs; a child needs this
_PROC = "/proc"
_ACTIVE: dict[int, StepChildren] = {}
_ACTIVE_LOCK = threading.Lock()


def is_owner(owner_pid: int) -> bool:
    """Whether this process is ``owner_pid``, and not a forked copy of it."""
    return os.getpid() == owner_pid


def leave_if_forked(owner_pid: int, code: int = 0) -> None:
    """In a forked copy of ``owner_pid`` (a step's child that returned into the worker),
    flush what the child printed and end the process with ``code``; nothing otherwise."""
    if os.getpid() == owner_pid:
        return
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    _REAL_EXIT(code)


class StepChildren:
    """The processes one step starts, found and ended when it returns (see the module)."""

    def __init__(self, tid: int, before: frozenset[int]):
        self.tid = tid
        self._before = before

    @classmethod
    def start(cls) -> StepChildren:
        """Called in the step's thread just before the step function runs."""
        with _ACTIVE_LOCK:  # no other step lists this process's children meanwhile
            before = frozenset(_process_children()) if _has_children() else frozenset()
            tracker = cls(threading.get_native_id(), before)
            _ACTIVE[tracker.tid] = tracker
        return tracker

    def started(self) -> set[int]:
        """The processes the step started that still run, descendants included."""
        if not _has_children():
            return set()  # the common case, in one system call
        # Under the lock, so that no step registers (and forks) between the check that
        # this step runs alone and the listing of the process's children: such a child
        # would be counted as this step's and ended.
        with _ACTIVE_LOCK:
            direct = set(_thread_children(self.tid))
            if len(_ACTIVE) == 1:
                direct |= set(_process_children()) - self._before
        return descendants(direct) - _shared_helpers()

    def end(self) -> tuple[list[int], list[int]]:
        """End what the step left running: ``(ended, survivors)``, pids in order. A survivor
        resisted SIGKILL for ``KILL_WAIT`` seconds; the step must not be committed."""
        try:
            pids = self.started()
            survivors = end_processes(pids) if pids else []
            return sorted(pids), survivors
        finally:
            with _ACTIVE_LOCK:
                _ACTIVE.pop(self.tid, None)


def end_processes(pids: Iterable[int], grace: float = GRACE,
                  kill_wait: float = KILL_WAIT) -> list[int]:
    """SIGTERM to ``pids``, SIGKILL to those still running ``grace`` seconds later; returns
    the ones still running ``kill_wait`` seconds after that. An ended child is left for
    whoever started it to collect (a ``Popen`` or ``multiprocessing.Process`` reads its exit
    status); until then it is a zombie, which runs nothing and holds no file open."""
    pending = set(pids)
    _signal(pending, signal.SIGTERM)
    pending = _wait_gone(pending, grace)
    if pending:
        _signal(pending, signal.SIGKILL)
        pending = _wait_gone(pending, kill_wait)
    return sorted(pending)


def descendants(pids: Iterable[int]) -> set[int]:
    """``pids`` and every process below them that still runs."""
    found: set[int] = set()
    stack = [p for p in pids if _running(p)]
    while stack:
        pid = stack.pop()
        if pid in found:
            continue
        found.add(pid)
        stack.extend(c for c in _children_of(pid) if c not in found and _running(c))
    return found


def _signal(pids: set[int], signum: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)


def _wait_gone(pids: set[int], timeout: float) -> set[int]:
    deadline = time.monotonic() + timeout
    delay = 0.001
    while True:
        pids = {p for p in pids if _running(p)}
        if not pids or time.monotonic() >= deadline:
            return pids
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


def process_alive(pid: int) -> bool:
    """Whether ``pid`` is a live process: it exists (or belongs to another user) and is not
    a zombie, killed but not yet reaped, which runs nothing. Without ``/proc`` (macOS) a
    process that exists counts as alive."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        return _read(f"{_PROC}/{pid}/stat").rpartition(b")")[2].split()[0] != b"Z"
    except (OSError, IndexError):  # no /proc, or gone meanwhile
        return True


def _running(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie (a zombie runs nothing, holds no file)."""
    try:
        return _read(f"{_PROC}/{pid}/stat").rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


def _has_children() -> bool:
    """Whether this process has any child, running or ended (not reaping any)."""
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return False
    except (AttributeError, OSError):  # no waitid here: look in /proc
        return bool(_process_children())
    return True


def _read(path: str) -> bytes:
    """The start of a small ``/proc`` file, through raw descriptor calls: two of these run
    for every step, and a buffered file object costs several times more."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.read(fd, 65536)
    finally:
        os.close(fd)


def _read_pids(path: str) -> list[int]:
    try:
        return [int(p) for p in _read(path).split()]
    except OSError:
        return []


def _thread_children(tid: int) -> list[int]:
    return _read_pids(f"{_PROC}/{os.getpid()}/task/{tid}/children")


def _children_of(pid: int) -> list[int]:
    try:
        tasks = os.listdir(f"{_PROC}/{pid}/task")
    except OSError:
        return []
    return [c for t in tasks for c in _read_pids(f"{_PROC}/{pid}/task/{t}/children")]


def _process_children() -> list[int]:
    return _children_of(os.getpid())


def _shared_helpers() -> set[int]:
    """The pids of ``multiprocessing``'s resource tracker and fork server, where running:
    every user of ``multiprocessing`` in this process shares them."""
    pids: set[int] = set()
    tracker = sys.modules.get("multiprocessing.resource_tracker")
    if tracker is not None:
        pids.add(getattr(getattr(tracker, "_resource_tracker", None), "_pid", None) or -1)
    forkserver = sys.modules.get("multiprocessing.forkserver")
    if forkserver is not None:
        pids.add(getattr(getattr(forkserver, "_forkserver", None), "_forkserver_pid", None)
                 or -1)
    return pids
