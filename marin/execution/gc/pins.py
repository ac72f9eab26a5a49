"""Pins: step outputs that ``marin gc`` keeps whatever the invocation records say.

    pin(prefix, "train/tiny-3f9c01ab")      # <prefix>/.marin/pins/train%2Ftiny-3f9c01ab
    pin(prefix, "./train//tiny-3f9c01ab")   # the same pin: keys are stored as ``step_key``
    pins(prefix)                            # ["train/tiny-3f9c01ab"]
    unpin(prefix, "train/tiny-3f9c01ab")

A pin names a step output by its key, spelled one way (``reach.step_key``), so that the
pin ``pin --list`` shows is the one gc matches; a pin to no step output is refused.
"""

from __future__ import annotations

import os
from urllib.parse import quote

from marin.execution.gc.reach import info_of, is_output, prefix_of, step_key
from marin.execution.gc.scan import PINS_DIR, read_pins
from marin.execution.status import INFO_FILE
from marin.storage import get_storage

__all__ = ["PinError", "damaged_pins", "pin", "pins", "unpin"]


class PinError(ValueError):
    """A pin names no step output, or no pin; the message says which."""


def _path(prefix: str, key: str) -> str:
    return f"{prefix}/{PINS_DIR}/{quote(key, safe='')}"


def _key(prefix: str, text: str) -> str | None:
    """The step key ``text`` names: a key, or the output's path under ``prefix`` (on a
    local disk however either is spelled: ``/abs/P/exp/a-1`` with ``--prefix ./P``)."""
    path = prefix_of(text)
    if "://" not in prefix and "://" not in path:
        base, full = os.path.abspath(prefix), os.path.abspath(path)
        if full.startswith(base + os.sep):
            return step_key(full[len(base) + 1:])
    elif path.startswith(prefix + "/"):
        return step_key(path[len(prefix) + 1:])
    return step_key(text)


def pin(prefix: str, key: str) -> None:
    prefix = prefix_of(prefix)
    storage = get_storage(prefix)
    found = _key(prefix, key)
    if found is None or not is_output(
            found, (), info_of(storage.read(f"{prefix}/{found}/{INFO_FILE}"))):
        raise PinError(f"no step output {key!r} under {prefix}: name a step key as "
                       "`marin du` lists it (name-hash)")
    storage.write(_path(prefix, found), found.encode())


def pins(prefix: str) -> list[str]:
    """The pinned keys, each as ``step_key`` spells it (pins written as typed by older
    versions included)."""
    return sorted(_read(prefix)[0])


def damaged_pins(prefix: str) -> list[str]:
    """The pin files that name no step key (not text, or no key), read as gc reads them:
    while any is there gc keeps every output."""
    return sorted(_read(prefix)[1])


def _read(prefix: str) -> tuple[set[str], list[str]]:
    prefix = prefix_of(prefix)
    storage = get_storage(prefix)
    folder = f"{prefix}/{PINS_DIR}"
    return read_pins(storage, [f"{folder}/{n}" for n in storage.list_dir(folder)])


def unpin(prefix: str, key: str) -> None:
    prefix = prefix_of(prefix)
    storage = get_storage(prefix)
    found = _key(prefix, key)
    folder = f"{prefix}/{PINS_DIR}"
    names = storage.list_dir(folder) if found is not None else []
    blobs = storage.read_many([f"{folder}/{n}" for n in names])
    matching = [(f"{folder}/{n}", b) for n, b in zip(names, blobs, strict=True)
                if b is not None and step_key(b.data.decode(errors="replace")) == found]
    if not matching:
        raise PinError(f"{key!r} is not pinned under {prefix}; `marin pin --list --prefix "
                       f"{prefix}` lists the pins")
    for path, blob in matching:  # an older pin stored as typed, too
        storage.delete_if_unchanged(path, blob.token)
