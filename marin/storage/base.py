"""The storage interface the executor needs: atomic writes, leases, batched reads.

    storage = get_storage("file:///tmp/marin")
    token = storage.create_if_absent("/tmp/marin/step/.executor_lease", b"me")
    if token is not None:                       # this call created it
        token = storage.compare_and_swap("/tmp/marin/step/.executor_lease", token, b"renewed")

Every backend implements the same few operations with the same guarantees:
``create_if_absent`` and ``compare_and_swap`` are atomic across processes and machines
(exclusive create on disk, generation preconditions on GCS, conditional puts on S3), and
``read_many`` does not cost one sequential round trip per path.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any


class StorageError(OSError):
    """A storage operation failed; the message names the URL."""


class MissingSourceError(StorageError):
    """A name ``commit_tree`` is to put in place is in neither folder."""


@dataclass(frozen=True)
class Blob:
    """The contents of one object and the token that ``compare_and_swap`` checks."""

    path: str
    data: bytes
    token: Any


@dataclass(frozen=True)
class FileEntry:
    """One file of a listing: its full path (with the scheme), bytes, and modification
    time (seconds since the epoch)."""

    path: str
    size: int
    mtime: float


class Storage(abc.ABC):
    """One storage backend (a URL scheme)."""

    #: How many reads ``read_many`` keeps in flight.
    read_concurrency: int = 32
    #: Whether empty folders exist on their own (local disks). Object stores have none: a
    #: folder that no object was ever written under needs no deleting.
    has_folders: bool = True

    @abc.abstractmethod
    def read(self, path: str) -> Blob | None:
        """The object at ``path``, or None when there is none."""

    def read_many(self, paths: Sequence[str]) -> list[Blob | None]:
        """``read`` for many paths, concurrently; results in the order of ``paths``."""
        if len(paths) <= 1:
            return [self.read(p) for p in paths]
        with ThreadPoolExecutor(min(self.read_concurrency, len(paths))) as pool:
            return list(pool.map(self.read, paths))

    @abc.abstractmethod
    def write(self, path: str, data: bytes) -> None:
        """Replace the object at ``path`` atomically: readers see the old or the new data."""

    @abc.abstractmethod
    def create_if_absent(self, path: str, data: bytes) -> Any | None:
        """Create ``path`` with ``data`` unless it exists: the new object's token, or None
        when the object already existed."""

    @abc.abstractmethod
    def compare_and_swap(self, path: str, token: Any, data: bytes) -> Any | None:
        """Replace ``path`` only if it still holds the version ``token`` came from: the new
        token, or None when the object changed or vanished in between."""

    @abc.abstractmethod
    def delete_if_unchanged(self, path: str, token: Any) -> bool:
        """Delete ``path`` only if it still holds the version ``token`` came from."""

    @abc.abstractmethod
    def list_dir(self, path: str) -> list[str]:
        """Names directly under ``path`` (empty when it does not exist)."""

    @abc.abstractmethod
    def exists(self, path: str) -> bool: ...

    @abc.abstractmethod
    def check_writable(self, path: str) -> None:
        """Raise StorageError naming ``path`` when objects cannot be written under it."""

    def exists_many(self, paths: Sequence[str]) -> list[bool]:
        """``exists`` for many paths, concurrently; results in the order of ``paths``."""
        if len(paths) <= 1:
            return [self.exists(p) for p in paths]
        with ThreadPoolExecutor(min(self.read_concurrency, len(paths))) as pool:
            return list(pool.map(self.exists, paths))

    @abc.abstractmethod
    def move_tree(self, src: str, dst: str) -> list[str]:
        """Move everything under folder ``src`` to the same relative paths under ``dst``,
        replacing what is there; returns the names moved to the top of ``dst``."""

    def commit_tree(self, src: str, dst: str, names: Sequence[str],
                    keep: Callable[[str], bool],
                    after_each: Callable[[str], None] | None = None) -> None:
        """Make ``dst`` hold exactly ``src``'s files: each of ``names`` (the top-level names
        of ``src`` when the commit began) replaces the same name of ``dst`` whole, and every
        other top-level name of ``dst`` goes unless ``keep(name)``. ``after_each(name)``
        runs once each name is in place (it may raise to stop the commit).

        Repeatable: a call stopped at any point (a kill, a crash) and made again with the
        same arguments finishes the same commit. On disk ``src``'s names are renamed away,
        so one found only in ``dst`` counts as moved; on object stores ``src`` is copied
        and left whole for the caller to delete. A name found in neither raises
        ``MissingSourceError``."""
        raise StorageError(f"the backend for {dst} cannot commit a step's files: it has no "
                           "commit_tree (see marin.storage.base.Storage)")

    @abc.abstractmethod
    def copy_tree(self, src: str, dst: str) -> None:
        """Copy everything under folder ``src`` to the same relative paths under ``dst``."""

    @abc.abstractmethod
    def delete_tree(self, path: str) -> None:
        """Delete the folder ``path`` and everything under it (nothing when absent)."""

    def list_files(self, path: str) -> list[FileEntry]:
        """Every file under folder ``path``, at any depth, with its size and time."""
        raise StorageError(f"the backend for {path} cannot list files; gc and du need it")

    def delete_files(self, paths: Sequence[str], root: str | None = None) -> None:
        """Delete the files ``paths`` (those already gone are no error), in batches where
        the store has them (GCS batch requests, S3 DeleteObjects). On a local disk the
        folders this leaves empty are removed too, up to ``root`` (kept; None: no folder)."""
        raise StorageError(f"the backend for {paths[0] if paths else '?'} cannot delete files")

    def bucket_info(self, url: str) -> Any:
        """Location, location type and storage class of the bucket holding ``url``."""
        from marin.storage.bucket import local_bucket_info

        return local_bucket_info(url)
