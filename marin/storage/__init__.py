"""Storage backends behind one small interface, chosen by URL scheme.

    from marin.storage import get_storage
    storage = get_storage("gs://my-bucket/experiments")     # or s3://, memory://, a local path
    blob = storage.read("gs://my-bucket/experiments/step-1a2b3c4d/.executor_status")

See ``marin.storage.base.Storage`` for the operations and their guarantees.
"""

from __future__ import annotations

from urllib.parse import urlparse

from marin.storage._local import LocalStorage
from marin.storage._memory import MemoryStorage
from marin.storage.base import Blob, Storage, StorageError

__all__ = ["Blob", "Storage", "StorageError", "UnknownSchemeError", "get_storage", "scheme_of"]

_BUILTIN: dict[str, type[Storage]] = {"file": LocalStorage, "memory": MemoryStorage}
_INSTANCES: dict[str, Storage] = {}


class UnknownSchemeError(StorageError):
    """No storage backend handles the URL's scheme."""


def scheme_of(url: str) -> str:
    scheme = urlparse(url).scheme
    return scheme if len(scheme) > 1 else "file"  # "C:" style drive letters are local


def get_storage(url: str) -> Storage:
    """The backend for ``url``'s scheme (one shared instance per scheme)."""
    scheme = scheme_of(url)
    storage = _INSTANCES.get(scheme)
    if storage is None:
        cls = _BUILTIN.get(scheme)
        if cls is None:
            known = ", ".join(f"{s}://" for s in sorted(_BUILTIN))
            raise UnknownSchemeError(
                f"no storage backend for {url!r} (scheme {scheme}://); known schemes: {known}"
            )
        storage = _INSTANCES[scheme] = cls()
    return storage
