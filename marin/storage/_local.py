"""Local-disk storage: atomic rename for writes, hard links for exclusive create, and a
``flock`` on the parent folder to make compare-and-swap atomic between processes.

Design note: records are not forced to disk one by one (no ``fsync``). Atomicity between
processes comes from rename, link and ``flock``, which need none; an ``fsync`` per record
cost more than the rest of a small step's bookkeeping together. After an operating-system
crash or a power cut a record may be missing or unreadable: a status then reads as not done
(the step runs again), a lease as free (its holder died with the machine), and a SUCCESS
is checked against the names it committed before its output is reused."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import uuid
from collections.abc import Callable, Iterator, Sequence

from marin.storage.base import Blob, FileEntry, MissingSourceError, Storage, StorageError


def local_path(url: str) -> str:
    return url[len("file://"):] if url.startswith("file://") else url


class LocalStorage(Storage):
    scheme = "file"

    def read(self, path: str) -> Blob | None:
        try:
            data = _read_file(local_path(path))
        except (FileNotFoundError, NotADirectoryError):
            return None
        except IsADirectoryError:
            raise StorageError(f"{path} is a folder where a file is expected; remove or "
                               "rename it") from None
        except OSError as e:
            raise StorageError(f"cannot read {path}: {e.strerror or e}") from e
        return Blob(path, data, _token(data))

    def read_many(self, paths: Sequence[str]) -> list[Blob | None]:
        # Local reads are cheaper than the thread hand-off.
        return [self.read(p) for p in paths]

    def write(self, path: str, data: bytes) -> None:
        target = local_path(path)
        tmp = temporary_name(target)
        try:
            _write_new(tmp, data)
            os.replace(tmp, target)
        except OSError as e:
            _unlink_quietly(tmp)
            raise StorageError(f"cannot write {path}: {e.strerror or e}") from e

    def create_if_absent(self, path: str, data: bytes) -> str | None:
        target = local_path(path)
        tmp = temporary_name(target)
        try:
            _write_new(tmp, data)
            os.link(tmp, target)
            return _token(data)
        except FileExistsError:
            return None
        except OSError as e:
            raise StorageError(f"cannot create {path}: {e.strerror or e}") from e
        finally:
            _unlink_quietly(tmp)

    def compare_and_swap(self, path: str, token: str, data: bytes) -> str | None:
        target = local_path(path)
        with _folder_lock(target):
            current = self.read(path)
            if current is None or current.token != token:
                return None
            self.write(path, data)
            return _token(data)

    def delete_if_unchanged(self, path: str, token: str) -> bool:
        target = local_path(path)
        with _folder_lock(target):
            current = self.read(path)
            if current is None or current.token != token:
                return False
            os.unlink(target)
            return True

    def list_dir(self, path: str) -> list[str]:
        try:
            return os.listdir(local_path(path))
        except (FileNotFoundError, NotADirectoryError):
            return []

    def exists(self, path: str) -> bool:
        return os.path.exists(local_path(path))

    def exists_many(self, paths: Sequence[str]) -> list[bool]:
        return [self.exists(p) for p in paths]

    def move_tree(self, src: str, dst: str) -> list[str]:
        source, target = local_path(src), local_path(dst)
        try:
            names = sorted(os.listdir(source))
        except FileNotFoundError:
            return []
        os.makedirs(target, exist_ok=True)
        for name in names:
            _replace(os.path.join(source, name), os.path.join(target, name))
        return names

    def commit_tree(self, src: str, dst: str, names: Sequence[str],
                    keep: Callable[[str], bool],
                    after_each: Callable[[str], None] | None = None) -> None:
        """One rename per name (a folder replaced is moved aside first); the names of
        ``dst`` that go are removed last, a hidden folder moved aside by a stopped call
        with them."""
        source, target = local_path(src), local_path(dst)
        os.makedirs(target, exist_ok=True)
        for name in names:
            old, new = os.path.join(source, name), os.path.join(target, name)
            if os.path.lexists(old):
                _replace(old, new)
            elif not os.path.lexists(new):
                raise MissingSourceError(f"cannot commit {old}: it is in neither {src} nor "
                                         f"{dst}")
            if after_each is not None:
                after_each(name)
        wanted = set(names)
        for name in os.listdir(target):
            if name not in wanted and not keep(name):
                _remove(os.path.join(target, name))

    def copy_tree(self, src: str, dst: str) -> None:
        if os.path.isdir(local_path(src)):
            shutil.copytree(local_path(src), local_path(dst), dirs_exist_ok=True)

    def delete_tree(self, path: str) -> None:
        shutil.rmtree(local_path(path), ignore_errors=True)

    def list_files(self, path: str) -> list[FileEntry]:
        """Links are listed as files of their own and never followed: nothing outside
        ``path`` is listed (or, by ``delete_files``, deleted)."""
        found = []
        for folder, dirs, files in os.walk(local_path(path)):
            for name in files + [d for d in dirs if os.path.islink(os.path.join(folder, d))]:
                full = os.path.join(folder, name)
                try:
                    st = os.lstat(full)
                except FileNotFoundError:
                    continue
                found.append(FileEntry(full, st.st_size, st.st_mtime))
        return found

    def delete_files(self, paths: Sequence[str], root: str | None = None) -> None:
        folders = set()
        for path in paths:
            with contextlib.suppress(FileNotFoundError, NotADirectoryError):
                os.unlink(local_path(path))
            folders.add(os.path.dirname(local_path(path)))
        top = None if root is None else os.path.abspath(local_path(root))
        for folder in sorted(folders, key=len, reverse=True):  # the folders left empty
            while (top is not None and os.path.abspath(folder).startswith(top + os.sep)
                   and os.path.isdir(folder) and not os.path.islink(folder)):
                try:
                    os.rmdir(folder)
                except OSError:
                    break
                folder = os.path.dirname(folder)

    def check_writable(self, path: str) -> None:
        folder = local_path(path)
        if os.path.exists(folder) and not os.path.isdir(folder):
            raise StorageError(f"prefix {path} is a file, not a folder; choose another --prefix")
        probe = os.path.join(folder, f".marin-write-probe-{uuid.uuid4().hex}")
        try:
            os.makedirs(folder, exist_ok=True)
            _write_new(probe, b"")
        except OSError as e:
            # Removing a probe that was never created would fail again (on a read-only file
            # system) and hide this error behind that one.
            with contextlib.suppress(OSError):
                os.unlink(probe)
            raise StorageError(
                f"prefix {path} is not writable ({e.strerror or e}); choose another --prefix, "
                "or fix the folder's permissions or the mount (read-only?)"
            ) from None
        try:
            os.unlink(probe)
        except OSError as e:
            raise StorageError(f"prefix {path}: cannot remove the write probe {probe} "
                               f"({e.strerror or e}); check the folder's permissions") from None


def _read_file(path: str) -> bytes:
    """The whole file, through raw descriptor calls (no buffered file object): status and
    lease files are small and read by the thousand."""
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(fd)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _token(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def temporary_name(target: str) -> str:
    """A hidden, unique name beside ``target``, for a file renamed onto it once whole."""
    folder, name = os.path.split(target)
    return os.path.join(folder, f".{name}.tmp-{uuid.uuid4().hex}")


def _write_new(path: str, data: bytes) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _replace(old: str, new: str) -> None:
    """Rename ``old`` onto ``new``, whatever ``new`` is (a file, a folder, a link)."""
    if os.path.isdir(new) and not os.path.islink(new):
        # A folder cannot be replaced in one rename: move the old one aside first.
        aside = temporary_name(new)
        os.replace(new, aside)
        shutil.rmtree(aside, ignore_errors=True)
    elif os.path.lexists(new) and os.path.isdir(old) and not os.path.islink(old):
        os.unlink(new)  # a folder cannot be renamed onto a file either
    os.replace(old, new)


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        _unlink_quietly(path)


def _unlink_quietly(path: str) -> None:
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        os.unlink(path)


@contextlib.contextmanager
def _folder_lock(target: str) -> Iterator[None]:
    fd = os.open(os.path.dirname(target) or ".", os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
