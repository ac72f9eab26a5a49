"""Storage backends behind one small interface, chosen by URL scheme.

    from marin.storage import get_storage
    storage = get_storage("gs://my-bucket/experiments")     # or s3://, memory://, a local path
    blob = storage.read("gs://my-bucket/experiments/step-1a2b3c4d/.executor_status")

See ``marin.storage.base.Storage`` for the operations and their guarantees.
"""

from __future__ import annotations

import threading
from urllib.parse import urlparse

from marin import registry
from marin.storage._async import (
    AsyncObjectStorage,
    UnreachableError,
    check_reachable,
    split_bucket_url,
)
from marin.storage._local import LocalStorage
from marin.storage._memory import MemoryStorage
from marin.storage.base import Blob, FileEntry, MissingSourceError, Storage, StorageError

__all__ = ["AsyncObjectStorage", "Blob", "FileEntry", "LocalStorage", "MemoryStorage",
           "MissingSourceError", "Storage",
           "StorageError", "UnknownSchemeError", "UnreachableError", "check_reachable",
           "get_storage", "scheme_of", "split_bucket_url"]

# Used when marin runs from a source tree without its entry points installed.
_FALLBACK: dict[str, type[Storage]] = {"file": LocalStorage, "memory": MemoryStorage}
_INSTANCES: dict[str, Storage] = {}
_LOCK = threading.Lock()

registry.declare_group(
    "marin.storage", expected="a subclass of marin.storage.Storage with a `scheme` attribute",
    fits=lambda obj: isinstance(obj, type) and issubclass(obj, Storage)
    and isinstance(getattr(obj, "scheme", None), str))


class UnknownSchemeError(StorageError):
    """No storage backend handles the URL's scheme."""


def scheme_of(url: str) -> str:
    if ":" not in url.partition("/")[0]:
        return "file"  # a plain path: no scheme to parse
    scheme = urlparse(url).scheme
    return scheme if len(scheme) > 1 else "file"  # "C:" style drive letters are local


def get_storage(url: str) -> Storage:
    """The backend for ``url``'s scheme (one shared instance per scheme), found in the
    ``marin.storage`` plugin group."""
    scheme = scheme_of(url)
    storage = _INSTANCES.get(scheme)
    if storage is not None:
        return storage
    with _LOCK:
        if scheme not in _INSTANCES:
            _INSTANCES[scheme] = _backend_class(url, scheme)()
        return _INSTANCES[scheme]


def _backend_class(url: str, scheme: str) -> type[Storage]:
    try:
        return registry.load("storage", scheme)
    except registry.PluginNotFoundError:
        if scheme in _FALLBACK:
            return _FALLBACK[scheme]
        known = sorted({*registry.names("storage"), *_FALLBACK})
        raise UnknownSchemeError(
            f"no storage backend for {url!r} (scheme {scheme}://); installed schemes: "
            f"{', '.join(s + '://' for s in known)}. A backend for another scheme is a plugin "
            "in the marin.storage entry-point group (see docs/plugins.md)."
        ) from None
    except registry.PluginError as e:
        raise UnknownSchemeError(f"storage backend for {url!r} is unusable: {e}") from e


def reset_storage_instances() -> None:
    """Drop cached backends (tests that change credentials or emulator settings)."""
    with _LOCK:
        _INSTANCES.clear()
