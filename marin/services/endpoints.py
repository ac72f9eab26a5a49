"""The endpoint registry of a cluster: where each named service listens right now.

    registry = EndpointRegistry.for_cluster("marin")     # $MARIN_CLUSTERS or ~/.marin/clusters
    registry.register(Endpoint("/system/logger", "127.0.0.1:40123", pid=4242))
    registry.lookup("/system/logger").address             # "127.0.0.1:40123"

A registry is a folder, local or any fsspec URL (``gs://bucket/.marin/clusters/marin``),
holding one small JSON file per endpoint and, when the services listen off loopback, a
``token`` file readable only by its owner. A service registers itself once it listens and
removes its record when it stops; callers resolve through ``iris://CLUSTER?endpoint=NAME``.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import fsspec

CLUSTERS_ENV = "MARIN_CLUSTERS"
STATE_ENV = "MARIN_STATE_DIR"
TOKEN_ENV = "MARIN_SERVICES_TOKEN"


def state_dir() -> str:
    """marin's local state folder: $MARIN_STATE_DIR, else ~/.marin."""
    return os.environ.get(STATE_ENV) or str(Path.home() / ".marin")


def clusters_root(root: str | None = None) -> str:
    """Where cluster registries live: the argument, $MARIN_CLUSTERS, else a local folder."""
    return (root or os.environ.get(CLUSTERS_ENV) or os.path.join(state_dir(), "clusters")
            ).rstrip("/")


@dataclass(frozen=True)
class Endpoint:
    """One registered service.

    Fields: ``name`` (``/system/logger``), ``address`` (``host:port``), ``pid`` and ``host``
    (the machine it runs on), ``started`` (epoch seconds), ``data`` (its storage folder).
    """

    name: str
    address: str
    pid: int = 0
    host: str = field(default_factory=socket.gethostname)
    started: float = field(default_factory=time.time)
    data: str = ""

    def to_json(self) -> dict:
        return asdict(self)


class EndpointRegistry:
    def __init__(self, url: str):
        self.url = url.rstrip("/")
        self.fs, self.path = fsspec.core.url_to_fs(self.url)
        self.local = _is_local(self.fs)

    @classmethod
    def for_cluster(cls, cluster: str, root: str | None = None) -> EndpointRegistry:
        if not cluster or "/" in cluster or cluster.startswith("."):
            raise ValueError(f"bad cluster name {cluster!r}: use a plain name such as 'marin'")
        return cls(f"{clusters_root(root)}/{cluster}")

    def _file(self, name: str) -> str:
        cleaned = name.strip("/")
        if not cleaned or ".." in cleaned.split("/"):
            raise ValueError(f"bad endpoint name {name!r}: use a path such as /system/logger")
        return f"{self.path}/endpoints/{cleaned}.json"

    def register(self, endpoint: Endpoint) -> None:
        path = self._file(endpoint.name)
        data = json.dumps(endpoint.to_json(), indent=1).encode()
        self.fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
        if self.local:  # atomic on local disk: readers never see half a record
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        else:
            self.fs.pipe_file(path, data)

    def lookup(self, name: str) -> Endpoint | None:
        try:
            raw = self.fs.cat_file(self._file(name))
        except FileNotFoundError:
            return None
        return Endpoint(**json.loads(raw))

    def unregister(self, name: str, pid: int | None = None) -> None:
        """Remove a record; with ``pid``, only if it is still that process's record."""
        current = self.lookup(name)
        if current is None or (pid is not None and current.pid != pid):
            return
        try:
            self.fs.rm_file(self._file(name))
        except FileNotFoundError:
            pass

    def all(self) -> list[Endpoint]:
        root = f"{self.path}/endpoints"
        try:
            files = self.fs.find(root)
        except FileNotFoundError:
            return []
        found = []
        for f in sorted(files):
            if f.endswith(".json"):
                try:
                    found.append(Endpoint(**json.loads(self.fs.cat_file(f))))
                except (FileNotFoundError, ValueError, TypeError):
                    continue
        return found

    # The token: generated at `marin services up`, readable only by its owner.
    @property
    def token_path(self) -> str:
        return f"{self.path}/token"

    def ensure_token(self) -> str:
        existing = self.read_token()
        if existing:
            return existing
        token = secrets.token_urlsafe(32)
        self.fs.makedirs(self.path, exist_ok=True)
        if self.local:
            fd = os.open(self.token_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(token)
        else:
            self.fs.pipe_file(self.token_path, token.encode())
        return token

    def read_token(self) -> str | None:
        env = os.environ.get(TOKEN_ENV)
        if env:
            return env
        try:
            return self.fs.cat_file(self.token_path).decode().strip() or None
        except (FileNotFoundError, PermissionError):
            return None


def _is_local(fs) -> bool:
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    return protocol in ("file", "local")
