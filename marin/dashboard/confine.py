"""Which paths of a local prefix the dashboard may read: those that stay inside after every
symbolic link is followed.

    confine = Confinement("/data/runs")
    confine.folder("/data/runs/train/tiny-1a2b3c4d")     # False when it links outside
    confine.inside("/data/runs/train/tiny-1a2b3c4d", "logs/train.log")   # in that folder?

A step folder must resolve inside the prefix, and a file inside its step folder. Object
stores (gs://, s3://) have no links: everything under such a prefix is inside.

Design note: a poll checks every step, so a folder is checked one path component at a
time, each component (``train/`` is shared by many steps) and each folder's answer kept for
``ttl`` seconds; only a component that is a link is resolved. Files are resolved in full with
``realpath`` and compared by ``commonpath``. The check and the read are two calls, so a
link swapped in between is read once; the dashboard never writes.
"""

from __future__ import annotations

import os
import stat
import threading
import time

from marin.storage.files import local_path

__all__ = ["Confinement"]


class Confinement:
    """Containment checks under one prefix (thread-safe, cached for ``ttl`` seconds)."""

    def __init__(self, prefix: str, ttl: float = 5.0):
        local = local_path(prefix)
        self.prefix = None if local is None else os.path.abspath(local)
        self._root = None if local is None else os.path.realpath(local)
        self.ttl = ttl
        self._lock = threading.Lock()
        self._components: dict[str, tuple[float, bool]] = {}
        self._folders: dict[str, tuple[float, bool]] = {}

    def folder(self, path: str) -> bool:
        """Whether ``path`` (a folder under the prefix) resolves inside the prefix."""
        if self.prefix is None:
            return True
        now = time.monotonic()
        cached = self._folders.get(path)
        if cached is not None and now - cached[0] < self.ttl:
            return cached[1]
        ok = self._walk(os.path.abspath(path))
        with self._lock:
            self._folders[path] = (now, ok)
        return ok

    def _walk(self, path: str) -> bool:
        assert self.prefix is not None
        if not _within(path, self.prefix):
            return False
        rel = os.path.relpath(path, self.prefix)
        current = self.prefix
        for part in ([] if rel == "." else rel.split(os.sep)):
            current = os.path.join(current, part)
            if not self._component_inside(current):
                return False
        return True

    def inside(self, folder: str, rel: str) -> bool:
        """Whether ``folder/rel`` resolves inside ``folder`` (itself inside the prefix)."""
        if self.prefix is None:
            return True
        if not self.folder(folder):
            return False
        real_folder = os.path.realpath(folder)
        return _within(os.path.realpath(os.path.join(folder, rel)), real_folder)

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

    def _component_inside(self, path: str) -> bool:
        now = time.monotonic()
        cached = self._components.get(path)
        if cached is not None and now - cached[0] < self.ttl:
            return cached[1]
        try:
            is_link = stat.S_ISLNK(os.lstat(path).st_mode)
        except OSError:
            is_link = False  # absent: nothing to read there
        ok = not is_link or _within(os.path.realpath(path), self._root or "/")
        with self._lock:
            self._components[path] = (now, ok)
        return ok


def _within(path: str, root: str) -> bool:
    try:
        return os.path.commonpath([path, root]) == root
    except ValueError:  # different drives, or a relative path
        return False
