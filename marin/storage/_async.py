"""A base for object stores reached through an fsspec async filesystem (gcsfs, s3fs):
single operations run on the filesystem's event loop; ``read_many`` gathers many reads at
once instead of paying one round trip after another.

asyncio and fsspec are imported when a remote store is first used, not with
``marin.storage``: a local dry run never needs them."""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from typing import Any

from marin.storage.base import Blob, FileEntry, MissingSourceError, Storage, StorageError


def split_bucket_url(url: str, scheme: str) -> tuple[str, str]:
    """``("bucket", "key/path")`` of ``scheme://bucket/key/path``, or a StorageError."""
    prefix = f"{scheme}://"
    if not url.startswith(prefix):
        raise StorageError(f"not a {prefix} URL: {url!r}")
    bucket, _, key = url[len(prefix):].partition("/")
    if not bucket:
        raise StorageError(f"{url!r} names no bucket")
    return bucket, key


class UnreachableError(StorageError):
    """Nothing answers at a storage endpoint."""


def check_reachable(endpoint: str, what: str, timeout: float = 5.0) -> None:
    """Fail in one line, within ``timeout``, when nothing answers at ``endpoint`` (a URL),
    instead of after the client library's retries (a minute or more)."""
    import socket
    from urllib.parse import urlparse

    parsed = urlparse(endpoint if "://" in endpoint else f"http://{endpoint}")
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        socket.create_connection((parsed.hostname or "", port), timeout=timeout).close()
    except OSError as e:
        reason = e.strerror or str(e) or type(e).__name__
        raise UnreachableError(f"cannot reach {what} at {endpoint} ({reason}); check the network, "
                           "or the endpoint setting if it is an emulator") from None


class AsyncObjectStorage(Storage):
    """Subclasses provide ``fs`` (an fsspec AsyncFileSystem) and ``_read_async``."""

    read_concurrency = 64
    has_folders = False

    @property
    @abc.abstractmethod
    def fs(self) -> Any: ...

    @abc.abstractmethod
    async def _read_async(self, path: str) -> Blob | None: ...

    def _run(self, coro: Any) -> Any:
        try:
            loop = self.fs.loop  # may raise (no credentials): the coroutine never starts
        except BaseException:
            coro.close()
            raise
        from fsspec.asyn import sync

        return sync(loop, lambda: coro)

    def read(self, path: str) -> Blob | None:
        return self._run(self._read_async(path))

    def read_many(self, paths: Sequence[str]) -> list[Blob | None]:
        async def gather() -> list[Blob | None]:
            import asyncio

            limit = asyncio.Semaphore(self.read_concurrency)

            async def one(path: str) -> Blob | None:
                async with limit:
                    return await self._read_async(path)

            return list(await asyncio.gather(*(one(p) for p in paths)))

        return self._run(gather()) if paths else []

    def exists(self, path: str) -> bool:
        return self.read(path) is not None or bool(self.list_dir(path))

    def exists_many(self, paths: Sequence[str]) -> list[bool]:
        async def gather() -> list[bool]:
            import asyncio

            limit = asyncio.Semaphore(self.read_concurrency)

            async def one(path: str) -> bool:
                async with limit:
                    return bool(await self.fs._exists(path))

            return list(await asyncio.gather(*(one(p) for p in paths)))

        return self._run(gather()) if paths else []

    def _files_under(self, folder: str) -> tuple[str, list[str]]:
        base = self.fs._strip_protocol(folder).rstrip("/")
        self.fs.invalidate_cache()
        return base, [f for f in self.fs.find(base) if f.startswith(base + "/")]

    def move_tree(self, src: str, dst: str) -> list[str]:
        base, files = self._files_under(src)
        self._copy_files(base, files, dst)
        if files:
            self.fs.rm(files)
        self.fs.invalidate_cache()
        return sorted({f[len(base) + 1:].split("/", 1)[0] for f in files})

    def commit_tree(self, src: str, dst: str, names: Sequence[str],
                    keep: Callable[[str], bool],
                    after_each: Callable[[str], None] | None = None) -> None:
        """Server-side copies, name by name; then one many-object delete of every file of
        ``dst`` that ``src`` lacks, within the names replaced as well as outside them.
        ``src`` stays whole: a repeated call copies it again."""
        base, files = self._files_under(src)
        by_name: dict[str, list[str]] = {}
        for f in files:
            by_name.setdefault(f[len(base) + 1:].split("/", 1)[0], []).append(f)
        for name in names:
            if name not in by_name:
                raise MissingSourceError(f"cannot commit {src}/{name}: the attempt has no "
                                         "such file or folder any more")
            self._copy_files(base, by_name[name], dst)
            if after_each is not None:
                after_each(name)
        wanted, chosen = {f[len(base) + 1:] for f in files}, set(names)
        target, present = self._files_under(dst)
        stale = []
        for f in present:
            relative = f[len(target) + 1:]
            top = relative.split("/", 1)[0]
            if not keep(top) and (top not in chosen or relative not in wanted):
                stale.append(f)
        if stale:
            self._delete_keys(stale)
        self.fs.invalidate_cache()

    def copy_tree(self, src: str, dst: str) -> None:
        base, files = self._files_under(src)
        self._copy_files(base, files, dst)

    def delete_tree(self, path: str) -> None:
        _, files = self._files_under(path)
        if files:
            self.fs.rm(files)
        self.fs.invalidate_cache()

    def _copy_files(self, base: str, files: list[str], dst: str) -> None:
        target = self.fs._strip_protocol(dst).rstrip("/")
        if files:  # server-side copies, no data through this machine
            self.fs.copy(files, [f"{target}/{f[len(base) + 1:]}" for f in files])

    def list_files(self, path: str) -> list[FileEntry]:
        base = self.fs._strip_protocol(path).rstrip("/")
        self.fs.invalidate_cache()
        scheme = path.split("://", 1)[0]
        found = self.fs.find(base, detail=True)
        return [FileEntry(f"{scheme}://{name}", int(info.get("size") or 0), _mtime(info))
                for name, info in found.items() if name.startswith(base + "/")]

    def delete_files(self, paths: Sequence[str], root: str | None = None) -> None:
        """Deleted by ``_delete_keys``, the store's many-object delete. A file already gone
        is no error."""
        if paths:
            self._delete_keys([self.fs._strip_protocol(p) for p in paths])
            self.fs.invalidate_cache()

    def _delete_keys(self, keys: list[str]) -> None:
        """Delete ``keys`` (bucket/key, no scheme). Here: fsspec's many-object delete (s3fs
        sends DeleteObjects, 1,000 keys a request); a subclass whose library has none that
        works everywhere overrides it (GCS: batch requests, see marin_gcs)."""
        try:
            self.fs.rm(keys)
        except FileNotFoundError:
            pass

    async def _delete_singly(self, keys: list[str]) -> None:
        """One delete request per key, ``read_concurrency`` at a time (404 is no error)."""
        import asyncio

        limit = asyncio.Semaphore(self.read_concurrency)

        async def one(key: str) -> None:
            async with limit:
                try:
                    await self.fs._rm_file(key)
                except FileNotFoundError:
                    pass

        await asyncio.gather(*(one(k) for k in keys))

    def check_writable(self, path: str) -> None:
        probe = f"{path.rstrip('/')}/.marin-write-probe"
        try:
            token = self.create_if_absent(probe, b"")
            if token is not None:
                self.delete_if_unchanged(probe, token)
        except OSError as e:
            raise StorageError(f"prefix {path} is not writable: {e}") from e


def _mtime(info: dict[str, Any]) -> float:
    """The modification time in a gcsfs or s3fs listing entry (0 when it has none)."""
    value = info.get("updated") or info.get("LastModified") or info.get("mtime")
    if value is None:
        return 0.0
    if hasattr(value, "timestamp"):
        return float(value.timestamp())
    from datetime import datetime

    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0
