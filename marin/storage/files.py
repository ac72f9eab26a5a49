"""Reading and writing files at any URL marin stores to: local paths, gs://, s3://, memory://.

    from marin.storage.files import atomic_write, join_url, open_url
    with atomic_write(join_url(config.output_path, "counts.json"), "w") as f:
        json.dump(counts, f)                 # appears whole at the URL, or not at all
    with open_url(join_url(config.output_path, "counts.json")) as f:
        counts = json.load(f)

This module is the one place for URL handling outside the executor's own records:

* **Joining**: ``join_url(base, *parts)`` puts exactly one ``/`` between pieces, whether
  or not ``base`` ends with one.
* **Schemes**: ``normalize_url`` spells every URL one way (``gcs://`` is ``gs://``,
  ``s3a://`` is ``s3://``, ``file://x`` is the path ``x``); ``url_to_fs`` gives the
  filesystem and its path for a URL, and ``url_of`` turns such a path back into a URL of
  the same scheme, so listings (``glob``, ``find``) return URLs callers can open again.
* **Containment**: ``resolve_under(prefix, url)`` follows symbolic links and refuses, with
  one ``StorageError`` line, a URL that leads outside ``prefix`` (a folder or file under the
  prefix that links elsewhere, a ``..``); it returns the path to open.
* **Atomic writes**: ``atomic_write`` writes to a temporary file and moves it into place
  when the block ends without an error (a rename on disk; one upload on object stores,
  where an object appears only once its upload completes). An exception leaves nothing at
  the URL, and no temporary file behind. ``move_into_place`` does the same for a finished
  local file.

A step that writes with ``open()`` and ``os.makedirs`` works only on a local prefix: on
``gs://bucket/x`` it would create a local folder named ``gs:``. These helpers go through
the filesystem of the storage plugin for the URL's scheme (``marin.storage``), so they use
the same credentials, emulator settings (``STORAGE_EMULATOR_HOST``, ``AWS_ENDPOINT_URL_S3``)
and one-line credential errors as the executor's own status and lease files. A scheme no
plugin handles but fsspec knows (``http://``, ``hf://``) is read through fsspec.

Design note: the storage plugins (``marin.storage.get_storage``) are the backends, with
the guarantees leases need; this module is the library that steps, tokenization,
profiling and the dashboard use to read and write ordinary files through them.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from typing import IO, Any

from marin.storage import StorageError, UnknownSchemeError, get_storage, scheme_of
from marin.storage._local import temporary_name

__all__ = ["atomic_write", "exists", "filesystem", "find", "glob", "is_local", "join_url",
           "local_path", "move_into_place", "normalize_url", "open_url", "resolve_under",
           "url_of", "url_to_fs"]

#: Other spellings of a scheme, and the one marin uses.
SCHEME_ALIASES = {"gcs": "gs", "s3a": "s3", "local": "file"}


def join_url(base: str, *parts: str) -> str:
    """``base/part/...`` with exactly one slash between pieces (for URLs and paths).

    ``join_url("gs://b/x/", "/y", "z.json") == "gs://b/x/y/z.json"``; empty parts are
    skipped, and a root (``/`` or ``gs://``) keeps its slashes."""
    pieces = [p.strip("/") for p in parts if p.strip("/")]
    root = base.rstrip("/")
    if not root or root.endswith(":"):  # "", "/" or "gs://": the slashes belong to the root
        return base + "/".join(pieces)
    return "/".join([root, *pieces])


def normalize_url(url: str) -> str:
    """``url`` spelled the one way marin compares and stores URLs: the canonical scheme
    (``gcs://b/x`` is ``gs://b/x``), a local path without ``file://``, and no trailing
    slash (except for a root)."""
    scheme, sep, rest = url.partition("://")
    if sep and "::" not in url:
        scheme = SCHEME_ALIASES.get(scheme.lower(), scheme.lower())
        url = rest if scheme == "file" else f"{scheme}://{rest}"
    stripped = url.rstrip("/")
    return stripped if stripped and not stripped.endswith(":") else url


def is_local(url: str) -> bool:
    """Whether ``url`` names a path on this machine's disks (a plain path or ``file://``)."""
    return scheme_of(normalize_url(url)) == "file"


def local_path(url: str) -> str | None:
    """The path on disk that ``url`` names, or None for a URL of another scheme."""
    url = normalize_url(url)
    return url if scheme_of(url) == "file" else None


def resolve_under(prefix: str, url: str) -> str:
    """The path to open for ``url``, which must lie under ``prefix`` once symbolic links
    are followed: ``url`` itself when no link lies between the prefix and it, else the path
    the links lead to. A ``StorageError`` naming both (one line) when it leads outside: a
    step folder that links to a folder elsewhere, a file that links to ``/etc/passwd``, a
    ``..`` part. Object stores have no links: their URLs are compared as text.

    ``resolve_under("/data/p", "/data/p/step-1a2b/x.json") == "/data/p/step-1a2b/x.json"``
    """
    root, target = local_path(prefix), local_path(url)
    if root is None or target is None:
        return _remote_under(normalize_url(prefix), normalize_url(url))
    root, target = os.path.abspath(root), os.path.abspath(target)
    if target != root and not target.startswith(root.rstrip(os.sep) + os.sep):
        raise StorageError(f"{url} is not under the prefix {prefix}; only paths under the "
                           "prefix are read or written there")
    if not _link_below(root, target):
        return target
    real_root, real = os.path.realpath(root), os.path.realpath(target)
    if real != real_root and not real.startswith(real_root.rstrip(os.sep) + os.sep):
        raise StorageError(
            f"{url} leads outside the prefix {prefix} (to {real}) through a symbolic link; "
            "remove the link, or move what it points to under the prefix")
    return real


def _link_below(root: str, target: str) -> bool:
    """Whether a part of ``target`` below ``root`` is a symbolic link (one ``lstat`` per
    part, up to the first that does not exist)."""
    path = root
    for part in target[len(root):].split(os.sep):
        if not part:
            continue
        path = os.path.join(path, part)
        try:
            if stat.S_ISLNK(os.lstat(path).st_mode):
                return True
        except (FileNotFoundError, NotADirectoryError):
            return False
    return False


def _remote_under(prefix: str, url: str) -> str:
    rest = url[len(prefix):] if url.startswith(prefix) else None
    if rest is None or (rest and not (rest.startswith("/") or prefix.endswith("/"))) or any(
            part in (".", "..") for part in rest.split("/")):
        raise StorageError(f"{url} is not under the prefix {prefix}; only paths under the "
                           "prefix are read or written there")
    return url


def filesystem(url: str) -> Any:
    """The fsspec filesystem for ``url``: the storage plugin's own for object stores, a
    local filesystem that creates parent folders on write otherwise."""
    return url_to_fs(url)[0]


def url_to_fs(url: str) -> tuple[Any, str]:
    """``(filesystem, path)`` for ``url``: what fsspec's ``url_to_fs`` returns, but the
    filesystem is the storage plugin's (same credentials and emulator settings)."""
    import fsspec

    url = normalize_url(url)
    if "::" in url:  # a chained URL (simplecache::gs://...): fsspec's own business
        return fsspec.core.url_to_fs(url)
    scheme = scheme_of(url)
    if scheme == "file":
        fs = fsspec.filesystem("file", auto_mkdir=True)
    else:
        try:
            fs = getattr(get_storage(url), "fs", None)
        except UnknownSchemeError:
            if scheme not in fsspec.available_protocols():
                raise
            fs = None
        if fs is None:
            return fsspec.core.url_to_fs(url)
    return fs, fs._strip_protocol(url)


def url_of(fs: Any, path: str) -> str:
    """The URL of ``path`` on ``fs`` (a path from ``url_to_fs``, ``fs.glob``, ``fs.find``):
    a plain path on local disks, ``scheme://path`` with the canonical scheme otherwise."""
    if "://" in path:
        return normalize_url(path)
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    protocol = SCHEME_ALIASES.get(protocol, protocol)
    if protocol == "file":
        return path
    return f"{protocol}://{path.lstrip('/')}"


def open_url(url: str, mode: str = "rb", **kwargs: Any) -> IO:
    """Open ``url`` like ``open()``; writing creates parent folders where they exist.
    ``compression="infer"`` reads ``.gz`` / ``.zst`` files decompressed."""
    fs, path = url_to_fs(url)
    return fs.open(path, mode, **kwargs)


def exists(url: str) -> bool:
    fs, path = url_to_fs(url)
    return fs.exists(path)


def glob(pattern: str) -> list[str]:
    """URLs of the files and folders matching ``pattern`` (``*``, ``?``, ``[...]``), sorted."""
    fs, path = url_to_fs(pattern)
    return sorted(url_of(fs, p) for p in fs.glob(path))


def find(url: str) -> list[str]:
    """URLs of every file at or under ``url``, sorted; empty when nothing is there."""
    fs, path = url_to_fs(url)
    try:
        return sorted(url_of(fs, p) for p in fs.find(path))
    except FileNotFoundError:
        return []


@contextlib.contextmanager
def atomic_write(url: str, mode: str = "wb", **kwargs: Any) -> Iterator[IO]:
    """A file to write ``url``'s contents to: they appear at ``url`` whole when the block
    ends, and nothing appears (no partial file, no temporary left) when it raises.

    ``mode`` is ``"wb"`` or ``"w"``; keyword arguments go to ``open()`` (``encoding``)."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_write writes whole files: mode 'w' or 'wb', not {mode!r}")
    target = local_path(url)
    if target is not None:  # a temporary beside the target: the rename stays on one disk
        folder = os.path.dirname(os.path.abspath(target))
        os.makedirs(folder, exist_ok=True)
        tmp = temporary_name(os.path.abspath(target))
    else:
        fd, tmp = tempfile.mkstemp(prefix="marin-upload-")
        os.close(fd)
    try:
        with open(tmp, mode, **kwargs) as f:
            yield f
        move_into_place(tmp, url)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def move_into_place(local_source: str, url: str) -> None:
    """Move the finished local file ``local_source`` to ``url`` so that it appears whole: a
    rename on disk (a copy beside the target first when the two are on different disks),
    one upload on object stores. ``local_source`` is gone afterwards."""
    target = local_path(url)
    if target is None:
        fs, path = url_to_fs(url)
        fs.put_file(local_source, path)
        os.unlink(local_source)
        return
    os.makedirs(os.path.dirname(os.path.abspath(target)), exist_ok=True)
    try:
        os.replace(local_source, target)
    except OSError as e:
        if e.errno != errno.EXDEV:
            raise
        tmp = temporary_name(os.path.abspath(target))
        try:
            shutil.copyfile(local_source, tmp)
            os.replace(tmp, target)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        os.unlink(local_source)
