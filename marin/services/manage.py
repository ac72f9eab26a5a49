"""Start, inspect and stop a cluster's services on this machine.

    started = up("marin")           # logger and KV as separate processes, registered
    for row in status("marin"): ...  # endpoint, pid, alive, uptime, counts
    down("marin")                    # SIGTERM, then SIGKILL after a grace period

Each service runs ``python -m marin.services.serve KIND``, detached from the caller (its
own session), writing its output to ``DATA/KIND.log``. ``up`` returns once every service
has registered and answered a call.

Design note: these commands call each service at the address of its endpoint record, never
through the resolver's per-URL cache: after a crash the record names a dead address until
the restarted service overwrites it, and a cached dead address would hide the new one.
A stopped service whose parent has gone is a zombie until init reaps it (a second, on some
machines); ``down`` counts it as stopped, and stops all services at once.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import grpc

from marin.execution.processes import process_alive
from marin.services.endpoints import Endpoint, EndpointRegistry, clusters_root, state_dir
from marin.services.proto import services_pb2 as pb
from marin.services.proto import services_pb2_grpc as pb_grpc
from marin.services.server import ENDPOINTS, LOOPBACK_DEFAULT, ServiceConfigError

_STUBS = {"logger": pb_grpc.LogServiceStub, "kv": pb_grpc.KVServiceStub}


class ServicesError(RuntimeError):
    pass


def service_url(cluster: str, kind: str, root: str | None = None) -> str:
    url = f"iris://{cluster}?endpoint={ENDPOINTS[kind]}"
    return f"{url}&root={quote(root, safe='')}" if root else url


def default_data(cluster: str) -> str:
    return os.path.join(state_dir(), "services", cluster)


def up(cluster: str = "marin", host: str = "127.0.0.1", data: str | None = None,
       root: str | None = None, ports: dict[str, int] | None = None,
       extra_args: list[str] | None = None, timeout: float = 30.0) -> list[dict]:
    for kind, port in (ports or {}).items():
        if not 0 <= port <= 65535:
            raise ServiceConfigError(f"--{kind}-port {port}: use a port from 1 to 65535, or "
                                     "0 to have a free one picked")
    registry = EndpointRegistry.for_cluster(cluster, root)
    if host not in LOOPBACK_DEFAULT:
        registry.ensure_token()
    data = data or default_data(cluster)
    try:
        os.makedirs(data, exist_ok=True)
        for kind in ENDPOINTS:
            open(os.path.join(data, f"{kind}.log"), "ab").close()
    except OSError as e:
        raise ServiceConfigError(f"--data {data}: cannot write there ({e.strerror}); pick a "
                                 "folder you can write, or leave --data out") from None
    started: dict[str, subprocess.Popen] = {}
    report = []
    for kind in ENDPOINTS:
        current = registry.lookup(ENDPOINTS[kind])
        if current is not None and _info(registry, kind, current) is not None:
            report.append({"service": kind, "address": current.address, "pid": current.pid,
                           "state": "already running"})
            continue
        cmd = [sys.executable, "-m", "marin.services.serve", kind, "--cluster", cluster,
               "--clusters", clusters_root(root), "--host", host,
               "--port", str((ports or {}).get(kind, 0)), "--data", os.path.join(data, kind),
               *(extra_args or [])]
        with open(os.path.join(data, f"{kind}.log"), "ab") as out:
            started[kind] = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + timeout
    try:
        for kind, proc in started.items():
            endpoint = _wait_registered(registry, kind, proc, deadline,
                                        os.path.join(data, f"{kind}.log"))
            report.append({"service": kind, "address": endpoint.address, "pid": proc.pid,
                           "state": "started"})
    except BaseException:  # all or nothing: stop what this call started
        for kind, proc in started.items():
            proc.kill()
            proc.wait()
            registry.unregister(ENDPOINTS[kind], pid=proc.pid)
        raise
    return report


def _wait_registered(registry: EndpointRegistry, kind: str, proc: subprocess.Popen,
                     deadline: float, log: str) -> Endpoint:
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = Path(log).read_text(errors="replace").strip().splitlines()[-1:] or ["?"]
            message = (f"the {kind} service exited with code {proc.returncode}: "
                       f"{tail[0].removeprefix('error: ')} (full output in {log})")
            # Exit status 2 is the service refusing its settings: the caller's to fix.
            raise (ServiceConfigError if proc.returncode == 2 else ServicesError)(message)
        found = registry.lookup(ENDPOINTS[kind])
        if found is not None and found.pid == proc.pid and _info(registry, kind, found):
            return found
        time.sleep(0.05)
    raise ServicesError(f"the {kind} service did not register within the timeout; see {log}")


def _info(registry: EndpointRegistry, kind: str, endpoint: Endpoint, timeout: float = 2.0
          ) -> pb.InfoResponse | None:
    """The service's Info at the record's address, or None when nothing answers there."""
    token = registry.read_token()
    metadata = (("authorization", f"Bearer {token}"),) if token else None
    channel = grpc.insecure_channel(endpoint.address)
    try:
        return _STUBS[kind](channel).Info(pb.InfoRequest(), timeout=timeout,
                                          metadata=metadata)
    except grpc.RpcError:
        return None
    finally:
        channel.close()


def _pid_alive(endpoint: Endpoint) -> bool | None:
    """Whether the process lives (None when it runs on another machine)."""
    if endpoint.host != socket.gethostname():
        return None
    return _exists(endpoint.pid)


def status(cluster: str = "marin", root: str | None = None) -> list[dict]:
    registry = EndpointRegistry.for_cluster(cluster, root)
    rows = []
    for endpoint in registry.all():
        kind = next((k for k, v in ENDPOINTS.items() if v == endpoint.name), None)
        info = _info(registry, kind, endpoint) if kind else None
        rows.append({"service": kind or endpoint.name, "endpoint": endpoint.name,
                     "address": endpoint.address, "pid": endpoint.pid, "host": endpoint.host,
                     "state": "up" if info else ("down" if _pid_alive(endpoint) is False
                                                 else "unreachable"),
                     "uptime_s": round(time.time() - info.started, 1) if info else None,
                     "items": info.items if info else None,
                     "db_bytes": info.db_bytes if info else None,
                     "data": endpoint.data})
    return rows


def down(cluster: str = "marin", root: str | None = None, grace: float = 10.0) -> list[dict]:
    registry = EndpointRegistry.for_cluster(cluster, root)
    endpoints = registry.all()
    states = []
    for endpoint in endpoints:  # all signalled first: they stop in parallel
        alive = _pid_alive(endpoint)
        states.append(f"left running (on {endpoint.host})" if alive is None else
                      _terminate(endpoint.pid) if alive else "not running")
    deadline = time.monotonic() + grace
    report = []
    for endpoint, state in zip(endpoints, states, strict=True):
        if state == "stopping":
            state = _wait_gone(endpoint.pid, deadline)
        if not state.startswith("left running"):
            registry.unregister(endpoint.name, pid=endpoint.pid)
        report.append({"endpoint": endpoint.name, "pid": endpoint.pid, "state": state})
    return report


def _terminate(pid: int) -> str:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return "not running"
    return "stopping"


def _wait_gone(pid: int, deadline: float) -> str:
    while time.monotonic() < deadline:
        if not _exists(pid):
            return "stopped"
        time.sleep(0.02)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return "stopped"
    return "killed"


def _exists(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie, exited but not yet reaped, is not)."""
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)  # our own child: reap it
        if waited == pid:
            return False
    except ChildProcessError:
        pass
    return process_alive(pid)
