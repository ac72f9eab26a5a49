"""Reading and writing files at any URL marin stores to: local paths, gs://, s3://.

    from marin.storage.files import join_url, open_url
    with open_url(join_url(config.output_path, "counts.json"), "w") as f:
        json.dump(counts, f)

A step that writes with ``open()`` and ``os.makedirs`` works only on a local prefix: on
``gs://bucket/x`` it would create a local folder named ``gs:``. These helpers go through
the filesystem of the storage plugin for the URL's scheme, so they use the same
credentials, emulator settings (``STORAGE_EMULATOR_HOST``, ``AWS_ENDPOINT_URL_S3``) and
one-line credential errors as the executor's own status and lease files.
"""

from __future__ import annotations

from typing import IO, Any

import fsspec

from marin.storage import get_storage, scheme_of

__all__ = ["exists", "filesystem", "join_url", "open_url"]


def filesystem(url: str) -> Any:
    """The fsspec filesystem for ``url``: the storage plugin's own for object stores, a
    local filesystem that creates parent folders on write otherwise."""
    if scheme_of(url) == "file":
        return fsspec.filesystem("file", auto_mkdir=True)
    storage = get_storage(url)
    fs = getattr(storage, "fs", None)
    return fs if fs is not None else fsspec.core.url_to_fs(url)[0]


def open_url(url: str, mode: str = "rb", **kwargs: Any) -> IO:
    """Open ``url`` like ``open()``; writing creates parent folders where they exist."""
    return filesystem(url).open(_local_path(url), mode, **kwargs)


def exists(url: str) -> bool:
    return filesystem(url).exists(_local_path(url))


def join_url(base: str, *parts: str) -> str:
    """``base/part/...`` with exactly one slash between pieces (for URLs and paths)."""
    pieces = [base.rstrip("/")] + [p.strip("/") for p in parts if p.strip("/")]
    return "/".join(pieces)


def _local_path(url: str) -> str:
    return url.removeprefix("file://") if scheme_of(url) == "file" else url
