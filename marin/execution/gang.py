"""A step run as a gang: ``StepResources(hosts=N)`` runs the step's function in N processes
at once, one per host, which the function joins into one computation (``jax.distributed``).

    gang = LocalGang(hosts=2)                 # the local runner's: N processes of this machine
    execute_step(as_gang(job, gang))          # the worker protocol, with the gang as the step
    gang.stop("interrupted")                  # a runner's cancellation
    member = GangMember.from_environment()    # in a member: GangMember(coordinator, hosts=2,
                                              # rank=1), or None outside a gang

The worker protocol (``execute_step``: lease, RUNNING, attempt folder, commit, status) runs
once per gang, in the process that supervises it, never in a member: the runner wraps the
step's function in the gang (``as_gang``), so ``execute_step`` takes the lease, writes
RUNNING, prepares the attempt folder and only then starts the members, each running the
original function on the same resolved config. A member is told its place through
``MARIN_GANG_COORDINATOR`` (``host:port`` of the coordination service, which rank 0 serves),
``MARIN_GANG_HOSTS`` and ``MARIN_GANG_RANK``. Which member writes which file is the step's
own business (the trainer: rank 0 alone writes metrics and the summary, every rank its
shards of a checkpoint).

Design note: no member holds the lease, so a member killed with SIGKILL (rank 0 included)
cannot leave it behind. The supervisor waits on every member; the first that fails makes it
stop the others (``marin.execution.processes.end_processes``) and raise ``GangError``, one
line naming the host, which ``execute_step`` records as the step's failure before it
releases the lease. A step already done, or leased by another executor, starts no member.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import io
import os
import pickle
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from marin.execution.errors import one_line
from marin.execution.experiments import EXPERIMENT_MODULE_PREFIX
from marin.execution.processes import KILL_WAIT, descendants, end_processes

__all__ = ["ENV_COORDINATOR", "ENV_HOSTS", "ENV_RANK", "Gang", "GangError", "GangMember",
           "LocalGang", "as_gang", "free_port", "member_main"]

ENV_COORDINATOR = "MARIN_GANG_COORDINATOR"
ENV_HOSTS = "MARIN_GANG_HOSTS"
ENV_RANK = "MARIN_GANG_RANK"

#: Seconds the supervisor waits, once a member failed, for members failing at the same
#: moment (a peer's collective breaks at once): the one that failed first by its own cause
#: (a signal) is named, not the one that saw it.
COMPANIONS = 0.5


class GangError(RuntimeError):
    """A gang cannot start, or one of its members failed; the message is one line that names
    the host."""


@dataclass(frozen=True)
class GangMember:
    """One member's place in its gang, as the runner passes it (environment variables)."""

    coordinator: str
    """``host:port`` of the coordination service; rank 0 serves it."""
    hosts: int
    rank: int

    def environment(self) -> dict[str, str]:
        return {ENV_COORDINATOR: self.coordinator, ENV_HOSTS: str(self.hosts),
                ENV_RANK: str(self.rank)}

    @classmethod
    def from_environment(cls, env: Mapping[str, str] = os.environ) -> GangMember | None:
        """The member this process is, or None when it runs in no gang."""
        if ENV_HOSTS not in env:
            return None
        try:
            member = cls(env[ENV_COORDINATOR], int(env[ENV_HOSTS]), int(env[ENV_RANK]))
        except (KeyError, ValueError):
            member = None
        if member is None or not 0 <= member.rank < member.hosts or ":" not in member.coordinator:
            raise GangError(f"{ENV_COORDINATOR}, {ENV_HOSTS} and {ENV_RANK} must give host:port, "
                            f"a host count and a rank below it, got {env.get(ENV_COORDINATOR)!r},"
                            f" {env.get(ENV_HOSTS)!r}, {env.get(ENV_RANK)!r}: unset them outside"
                            " a gang")
        return member


class Gang(Protocol):
    """What a runner's gang does: run ``fn(config)`` in every member, raising ``GangError``
    when one fails, and stop at a runner's request."""

    hosts: int

    def run(self, fn: Callable[[Any], Any], config: Any) -> None: ...

    def stop(self, reason: str) -> None: ...


@dataclass(frozen=True)
class _GangStep:
    """The function ``execute_step`` runs for a gang's job: the gang, running ``fn``."""

    gang: Gang
    fn: Callable[[Any], Any]

    def __call__(self, config: Any) -> None:
        self.gang.run(self.fn, config)


def as_gang(job: Any, gang: Gang) -> Any:
    """``job`` (a ``StepJob``) with its function run by ``gang``, under its lease."""
    return dataclasses.replace(job, fn=_GangStep(gang, job.fn))


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` now (the coordinator binds it a moment later)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _exit_description(code: int) -> str:
    """How a process ended, from its exit status (negative: the signal that ended it)."""
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"was killed by {signal.Signals(-code).name}"
        return f"was killed by signal {-code}"
    return f"exited with status {code}"


class LocalGang:
    """``hosts`` processes of this machine, fresh interpreters (JAX starts once per process),
    each in a session of its own; the coordinator on a free loopback port.

    Args:
        hosts: members to start.
    """

    POLL = 0.1  # seconds between looks at the members' exit statuses

    def __init__(self, hosts: int):
        self.hosts = hosts
        self._members: list[subprocess.Popen] = []
        self._stopped: str | None = None
        self._lock = threading.Lock()

    def run(self, fn: Callable[[Any], Any], config: Any) -> None:
        folder = tempfile.mkdtemp(prefix="marin-gang-")
        try:
            payload = os.path.join(folder, "payload.pickle")
            with open(payload, "wb") as f:
                f.write(_payload(fn, config, self.hosts))
            coordinator = f"127.0.0.1:{free_port()}"
            with self._lock:
                if self._stopped is not None:
                    raise GangError(f"the gang was stopped before it started: {self._stopped}")
                for rank in range(self.hosts):
                    env = {**os.environ, **GangMember(coordinator, self.hosts, rank).environment()}
                    self._members.append(subprocess.Popen(
                        [sys.executable, "-c", _MEMBER, payload, str(rank), str(os.getpid())],
                        env=env, start_new_session=True))
            self._supervise(folder)
        finally:
            self._end()
            shutil.rmtree(folder, ignore_errors=True)

    def stop(self, reason: str) -> None:
        """End every member (the runner's cancellation); ``run`` then raises."""
        with self._lock:
            self._stopped = reason
        self._end()

    def _supervise(self, folder: str) -> None:
        members = list(enumerate(self._members))

        def failed() -> list[tuple[int, subprocess.Popen]]:
            return [(rank, p) for rank, p in members if p.poll() not in (None, 0)]

        while not failed() and any(p.poll() is None for _, p in members):
            time.sleep(self.POLL)
        if not failed():
            return
        if self._stopped is not None:
            raise GangError(f"the gang was stopped: {self._stopped}")
        time.sleep(COMPANIONS)
        # a member ended by a signal (killed) before one that raised (often its peer's fate)
        rank, process = min(failed(), key=lambda f: (f[1].returncode >= 0, f[0]))
        raise GangError(f"host {rank} of {self.hosts} (pid {process.pid} on this machine) "
                        f"{_what_happened(process.returncode, folder, rank)}; the gang's "
                        "other hosts were stopped")

    def _end(self) -> None:
        with self._lock:
            members = list(self._members)
        running = {p.pid for p in members if p.poll() is None}
        if running:
            end_processes(descendants(running))
        for process in members:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=KILL_WAIT)


def _what_happened(code: int, folder: str, rank: int) -> str:
    try:
        with open(os.path.join(folder, f"rank-{rank}.error")) as f:
            return f"failed: {f.read().strip()}"
    except OSError:
        return _exit_description(code)


def _payload(fn: Callable[[Any], Any], config: Any, hosts: int) -> bytes:
    """What a member needs, pickled: this process's import path, the experiment files loaded
    under private names (``marin executor``) and the script run as ``__main__``, which a
    fresh interpreter must load before it can unpickle what they define, then the step's
    function and config."""
    modules = [(name, module.__file__) for name, module in list(sys.modules.items())
               if name.startswith(EXPERIMENT_MODULE_PREFIX) and getattr(module, "__file__", None)]
    main = getattr(sys.modules.get("__main__"), "__file__", None)
    try:
        body = pickle.dumps((fn, config))
    except Exception as e:
        raise GangError(f"StepResources.hosts={hosts}: the step's function and config must be "
                        f"picklable to run in {hosts} processes ({one_line(e)}); define the "
                        "function at the top level of a module") from None
    return pickle.dumps((list(sys.path), modules, main, body))


_MEMBER = "import sys; from marin.execution.gang import member_main; member_main(*sys.argv[1:])"


class _Unpickler(pickle.Unpickler):
    """Loads the script that ran as ``__main__`` in the supervisor (under the name
    ``__mp_main__``, as ``multiprocessing`` does, so that its ``if __name__ == "__main__"``
    block stays off) only when the payload names something it defines."""

    main: str | None = None

    def find_class(self, module: str, name: str) -> Any:
        if module == "__main__" and self.main is not None:
            if "__mp_main__" not in sys.modules:
                _load_module("__mp_main__", self.main)
            module = "__mp_main__"
        return super().find_class(module, name)


def _load_module(name: str, path: str) -> None:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)


def member_main(payload: str, rank: str, parent: str) -> None:
    """One member (``python -c _MEMBER PAYLOAD RANK PARENT``): gone when the supervisor is;
    runs the step's function, and on a failure leaves its one-line description for the
    supervisor and exits at once."""
    threading.Thread(target=_leave_with, args=(int(parent),), daemon=True).start()
    folder = os.path.dirname(payload)
    try:
        with open(payload, "rb") as f:
            path, modules, main, body = pickle.load(f)
        sys.path[:] = path
        for name, file in modules:
            if name not in sys.modules:
                _load_module(name, file)
        unpickler = _Unpickler(io.BytesIO(body))
        unpickler.main = main
        fn, config = unpickler.load()
        fn(config)
    except BaseException as e:
        traceback.print_exc()
        with open(os.path.join(folder, f"rank-{rank}.error"), "w") as f:
            f.write(one_line(e, with_type=True))
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        # at once: exit handlers (jax.distributed's shutdown barrier) would wait for peers
        os._exit(1)


def _leave_with(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(1)
