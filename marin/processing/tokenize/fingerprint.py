"""Content fingerprints of input files, with a cache of local files' hashes.

    fingerprint_files(list_inputs(["data/*.txt"]))     # 16 hex digits
    content_hash("data/a.txt")                         # "sha256:...", read once per version

A file's identity is its name, its size and its content: the store's own checksum where
the listing has one (GCS md5 or crc32c, S3 ETag, the Hub's blob id) and a SHA-256 of the
bytes on local disk. Local hashes are remembered under ``$MARIN_CACHE_DIR/content-hashes``
(``~/.cache/marin`` by default, or the ``hash_cache`` folder given), keyed by the path, the
size, the modification and change times and the inode, so an unchanged file is not read
again and a touched one is read once more, to the same hash.

Files on other stores with no checksum in their listing (HTTP) are identified by their size
and modification time, as the store reports them.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from marin._cache_dir import cache_dir
from marin.storage.files import local_path, url_to_fs

__all__ = ["InputFile", "content_hash", "default_hash_cache", "fingerprint_files"]


@dataclass(frozen=True)
class InputFile:
    """One input file as listed: its URL, size and the store's checksum."""

    url: str
    size: int
    checksum: str | None = None
    """The store's own content checksum (``md5:...``, ``crc32c:...``, ``etag:...``), when
    its listing gives one; None on local disk, where the content is hashed instead."""


def default_hash_cache() -> str:
    return str(cache_dir() / "content-hashes")


def fingerprint_files(files: Sequence[InputFile], hash_cache: str | None = None) -> str:
    digest = hashlib.sha256()
    for f in files:
        local = local_path(f.url)
        if f.checksum is not None:
            content = f.checksum
        elif local is not None:
            content = content_hash(local, hash_cache)
        else:
            fs, path = url_to_fs(f.url)
            info = fs.info(path)
            content = json.dumps([info.get("mtime"), info.get("LastModified")], default=str)
        digest.update(json.dumps([f.url, f.size, content]).encode())
    return digest.hexdigest()[:16]


def content_hash(path: str, hash_cache: str | None = None) -> str:
    """``sha256:<hex>`` of the local file ``path``, from the cache when the file has not
    changed since it was last hashed."""
    st = os.stat(path)
    key = hashlib.sha256(json.dumps([os.path.realpath(path), st.st_size, st.st_mtime_ns,
                                     st.st_ctime_ns, st.st_ino]).encode()).hexdigest()
    entry = Path(hash_cache or default_hash_cache()) / key[:2] / key
    with contextlib.suppress(OSError, UnicodeDecodeError):
        cached = entry.read_text().strip()
        if cached.startswith("sha256:"):
            return cached
    with open(path, "rb") as f:
        value = "sha256:" + hashlib.file_digest(f, "sha256").hexdigest()
    with contextlib.suppress(OSError):  # an unwritable cache only costs a read next time
        entry.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=entry.parent, delete=False) as tmp:
            tmp.write(value)
        os.replace(tmp.name, entry)
    return value
