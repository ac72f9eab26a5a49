"""Pins: step outputs that ``marin gc`` keeps whatever the invocation records say.

    pin(prefix, "train/tiny-3f9c01ab")      # <prefix>/.marin/pins/train%2Ftiny-3f9c01ab
    pins(prefix)                            # ["train/tiny-3f9c01ab"]
    unpin(prefix, "train/tiny-3f9c01ab")
"""

from __future__ import annotations

from urllib.parse import quote

from marin.execution.gc_scan import PINS_DIR
from marin.execution.status import INFO_FILE, STATUS_FILE
from marin.storage import get_storage

__all__ = ["PinError", "pin", "pins", "unpin"]


class PinError(ValueError):
    """A pin names no step output, or no pin; the message says which."""


def _path(prefix: str, key: str) -> str:
    return f"{prefix.rstrip('/')}/{PINS_DIR}/{quote(key, safe='')}"


def pin(prefix: str, key: str) -> None:
    storage = get_storage(prefix)
    key = key.strip("/")
    output = f"{prefix.rstrip('/')}/{key}"
    if ".." in key.split("/") or not any(storage.exists_many(
            [f"{output}/{STATUS_FILE}", f"{output}/{INFO_FILE}"])):
        raise PinError(f"no step output {key!r} under {prefix}: name a step key as "
                       "`marin du` lists it (name-hash)")
    storage.write(_path(prefix, key), key.encode())


def pins(prefix: str) -> list[str]:
    storage = get_storage(prefix)
    folder = f"{prefix.rstrip('/')}/{PINS_DIR}"
    blobs = storage.read_many([f"{folder}/{n}" for n in storage.list_dir(folder)])
    return sorted(b.data.decode() for b in blobs if b is not None)


def unpin(prefix: str, key: str) -> None:
    storage = get_storage(prefix)
    path = _path(prefix, key.strip("/"))
    blob = storage.read(path)
    if blob is None:
        raise PinError(f"{key!r} is not pinned under {prefix}; `marin pin --list --prefix "
                       f"{prefix}` lists the pins")
    storage.delete_if_unchanged(path, blob.token)
