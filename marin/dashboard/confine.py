"""Which paths of a local prefix the dashboard may read: those that stay inside after every
symbolic link is followed.

    confine = Confinement("/data/runs")
    confine.folder("/data/runs/train/tiny-1a2b3c4d")     # False when it links outside
    confine.inside("/data/runs/train/tiny-1a2b3c4d", "logs/train.log")   # in that folder?

A step folder must resolve inside the prefix, and a file inside its step folder. Object
stores (gs://, s3://) have no links: everything under such a prefix is inside.

Design note: a poll checks every step, so each folder's answer is kept for ``ttl``
seconds. The rule itself is the storage layer's ``resolve_under``: one ``lstat`` per path
component, and a full resolution only where a component is a link. The check and the read
are two calls, so a link swapped in between is read once; the dashboard never writes.
"""

from __future__ import annotations

import os
import stat
import threading
import time

from marin.storage import StorageError
from marin.storage.files import local_path, resolve_under

__all__ = ["Confinement"]


class Confinement:
    """Containment checks under one prefix (thread-safe, cached for ``ttl`` seconds)."""

    def __init__(self, prefix: str, ttl: float = 5.0):
        local = local_path(prefix)
        self.prefix = None if local is None else os.path.abspath(local)
        self.ttl = ttl
        self._lock = threading.Lock()
        self._folders: dict[str, tuple[float, bool]] = {}

    def folder(self, path: str) -> bool:
        """Whether ``path`` (a folder under the prefix) resolves inside the prefix."""
        if self.prefix is None:
            return True
        now = time.monotonic()
        cached = self._folders.get(path)
        if cached is not None and now - cached[0] < self.ttl:
            return cached[1]
        ok = _resolves_under(self.prefix, path)
        with self._lock:
            self._folders[path] = (now, ok)
        return ok

    def inside(self, folder: str, rel: str) -> bool:
        """Whether ``folder/rel`` resolves inside ``folder`` (itself inside the prefix)."""
        if self.prefix is None:
            return True
        if not self.folder(folder):
            return False
        return _resolves_under(folder, os.path.join(folder, rel))

    def record(self, folder: str, name: str) -> bool:
        """``inside`` for a file directly in ``folder``, at the cost of one ``lstat`` when
        it is no link (status, lease and info files are checked by the thousand)."""
        if self.prefix is None:
            return True
        if not self.folder(folder):
            return False
        try:
            is_link = stat.S_ISLNK(os.lstat(os.path.join(folder, name)).st_mode)
        except OSError:  # nothing there (or unreadable): the read says so
            return True
        return not is_link or self.inside(folder, name)


def _resolves_under(prefix: str, path: str) -> bool:
    try:
        resolve_under(prefix, path)
    except StorageError:
        return False
    return True
