"""Start marin's services as real processes for the tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import ROOT


class ServiceProcess:
    """``python -m marin.services.serve KIND`` registered in a cluster under ``clusters``."""

    def __init__(self, kind: str, data: Path, clusters: Path, cluster: str = "t",
                 host: str = "127.0.0.1", *extra: str):
        self.kind, self.data, self.clusters, self.cluster = kind, data, clusters, cluster
        self.host, self.extra = host, extra
        self.proc: subprocess.Popen | None = None
        self.address = ""

    def start(self, port: int = 0) -> ServiceProcess:
        cmd = [sys.executable, "-m", "marin.services.serve", self.kind, "--data",
               str(self.data), "--host", self.host, "--port", str(port), "--cluster",
               self.cluster, "--clusters", str(self.clusters), *self.extra]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, cwd=ROOT, env=os.environ.copy())
        line = self.proc.stdout.readline()
        if " listening on " not in line:
            self.proc.wait(timeout=10)
            raise RuntimeError(f"service did not start: {line}{self.proc.stderr.read()}")
        self.address = line.split(" listening on ")[1].split()[0]
        return self

    @property
    def url(self) -> str:
        endpoint = "/system/logger" if self.kind == "logger" else "/system/kv"
        return f"iris://{self.cluster}?endpoint={endpoint}&root={self.clusters}"

    def kill9(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for stream in (self.proc.stdout, self.proc.stderr) if self.proc else ():
            stream.close()

    def __enter__(self) -> ServiceProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def run_marin(env: dict[str, str], *args: str, code: int | None = 0,
              timeout: float = 120) -> subprocess.CompletedProcess:
    """``marin ARGS`` in a subprocess with ``env``, its output captured (not a terminal);
    asserts the exit status unless ``code`` is None."""
    result = subprocess.run([sys.executable, "-m", "marin.cli", *args], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=timeout)
    if code is not None:
        assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    return result


def process_gone(pid: int) -> bool:
    """Whether ``pid`` has exited (a zombie waiting for its parent to reap it counts)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rpartition(b")")[2].split()[0] == b"Z"
    except FileNotFoundError:
        return True


def wait_until(predicate, timeout: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"{what} not reached within {timeout}s")
