"""The endpoint registry of a cluster: where each named service listens right now.

    registry = EndpointRegistry.for_cluster("marin")     # $MARIN_CLUSTERS or ~/.marin/clusters
    registry.register(Endpoint("/system/logger", "127.0.0.1:40123", pid=4242))
    registry.lookup("/system/logger").address             # "127.0.0.1:40123"

A registry is a folder, local or any URL ``marin.storage.files`` opens (``gs://bucket/.marin/clusters/marin``),
holding one small JSON file per endpoint and, when the services listen off loopback, a
``token`` file readable only by its owner. A service registers itself once it listens and
removes its record when it stops; callers resolve through ``iris://CLUSTER?endpoint=NAME``.

A token file on local disk is used only when it is private and not empty (``ssh`` treats a
private key the same way): one that others may read or write, or that holds nothing, is
refused with a ``TokenFileError`` that says how to repair it, never reused silently.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import stat
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from marin.storage.files import (
    atomic_write,
    is_local,
    join_url,
    normalize_url,
    url_of,
    url_to_fs,
)

CLUSTERS_ENV = "MARIN_CLUSTERS"
STATE_ENV = "MARIN_STATE_DIR"
TOKEN_ENV = "MARIN_SERVICES_TOKEN"


def state_dir() -> str:
    """marin's local state folder: $MARIN_STATE_DIR, else ~/.marin."""
    return os.environ.get(STATE_ENV) or str(Path.home() / ".marin")


def clusters_root(root: str | None = None) -> str:
    """Where cluster registries live: the argument, $MARIN_CLUSTERS, else a local folder."""
    return normalize_url(root or os.environ.get(CLUSTERS_ENV)
                         or os.path.join(state_dir(), "clusters"))


class TokenFileError(ValueError):
    """A token file that must not be used: shared with others, empty or unreadable."""


def read_token_file(path: str) -> str:
    """The token in a local file, checked as ``ssh`` checks a private key."""
    try:
        mode = os.stat(path).st_mode
        if stat.S_IMODE(mode) & 0o077:
            raise TokenFileError(f"token file {path} is accessible by others (mode "
                                 f"{stat.S_IMODE(mode):04o}); run `chmod 600 {path}`, and "
                                 "replace the token if others may have read it")
        with open(path, encoding="utf-8") as f:
            token = f.read().strip()
    except (OSError, UnicodeDecodeError) as e:
        reason = e.strerror if isinstance(e, OSError) else "it is not UTF-8 text"
        raise TokenFileError(f"cannot read token file {path}: {reason}") from None
    if not token:
        raise TokenFileError(f"token file {path} is empty; write the token into it, or "
                             f"remove it (`rm {path}`) to have a new one generated")
    return token


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

    @classmethod
    def from_json(cls, raw: bytes) -> Endpoint | None:
        """The record in ``raw``, or None when it is not one (corrupted, or written by
        something else): a caller treats it as no record, and the next registration
        replaces it. Fields it does not know are ignored."""
        try:
            value = json.loads(raw)
        except (ValueError, RecursionError):
            return None
        if not isinstance(value, dict) or not {"name", "address"} <= value.keys():
            return None
        known = {k: value[k] for k in _FIELD_TYPES if k in value}
        if any(isinstance(v, bool) or not isinstance(v, _FIELD_TYPES[k])
               for k, v in known.items()):
            return None
        return cls(**known)


_FIELD_TYPES = {"name": str, "address": str, "pid": int, "host": str, "started": (int, float),
                "data": str}


class EndpointRegistry:
    def __init__(self, url: str):
        self.url = normalize_url(url)
        self.fs, self.path = url_to_fs(self.url)
        self.local = is_local(self.url)

    @classmethod
    def for_cluster(cls, cluster: str, root: str | None = None) -> EndpointRegistry:
        if not cluster or "/" in cluster or cluster.startswith("."):
            raise ValueError(f"bad cluster name {cluster!r}: use a plain name such as 'marin'")
        return cls(join_url(clusters_root(root), cluster))

    def _file(self, name: str) -> str:
        cleaned = name.strip("/")
        if not cleaned or ".." in cleaned.split("/"):
            raise ValueError(f"bad endpoint name {name!r}: use a path such as /system/logger")
        return join_url(self.path, "endpoints", f"{cleaned}.json")

    def register(self, endpoint: Endpoint) -> None:
        data = json.dumps(endpoint.to_json(), indent=1).encode()
        # whole or not at all: readers never see half a record
        with atomic_write(url_of(self.fs, self._file(endpoint.name))) as f:
            f.write(data)

    def lookup(self, name: str) -> Endpoint | None:
        try:
            raw = self.fs.cat_file(self._file(name))
        except FileNotFoundError:
            return None
        return Endpoint.from_json(raw)

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
        root = join_url(self.path, "endpoints")
        try:
            files = self.fs.find(root)
        except FileNotFoundError:
            return []
        found = []
        for f in sorted(files):
            if f.endswith(".json"):
                try:
                    endpoint = Endpoint.from_json(self.fs.cat_file(f))
                except FileNotFoundError:
                    continue
                if endpoint is not None:
                    found.append(endpoint)
        return found

    # The token: generated at `marin services up`, readable only by its owner.
    @property
    def token_path(self) -> str:
        return join_url(self.path, "token")

    def ensure_token(self) -> str:
        existing = self.read_token()
        if existing:
            return existing
        token = secrets.token_urlsafe(32)
        self.fs.makedirs(self.path, exist_ok=True)
        if self.local:
            try:
                fd = os.open(self.token_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:  # another `up` made it meanwhile
                return read_token_file(self.token_path)
            with os.fdopen(fd, "w") as f:
                f.write(token)
        else:
            self.fs.pipe_file(self.token_path, token.encode())
        return token

    def read_token(self) -> str | None:
        """$MARIN_SERVICES_TOKEN, else the registry's token (None when it has none);
        ``TokenFileError`` for a local token file that is shared, empty or unreadable."""
        env = os.environ.get(TOKEN_ENV)
        if env:
            return env
        if self.local:
            return read_token_file(self.token_path) if os.path.lexists(self.token_path) \
                else None
        try:
            return self.fs.cat_file(self.token_path).decode().strip() or None
        except (FileNotFoundError, PermissionError):
            return None
