"""How a config's dataclass fields take part in a step's key: the field markers.

    @dataclass(frozen=True)
    class TrainConfig:
        learning_rate: float
        log_every: int = unversioned_field(default=10)      # left out of the key
        decay_shape: str = added_field(default="linear")    # in the key unless the default
        data_root: str = external_path_field(default="")    # may point outside the prefix

``hashing`` and ``config_tree`` read the markers through ``is_unversioned_field``,
``is_added_field`` and ``is_external_path_field``; ``marin.execution.step`` re-exports
them under the names it always had.
"""

from __future__ import annotations

import dataclasses
from dataclasses import field
from typing import Any

__all__ = ["ADDED_METADATA_KEY", "EXTERNAL_METADATA_KEY", "UNVERSIONED_METADATA_KEY",
           "added_field", "external_path_field", "is_added_field", "is_external_path_field",
           "is_unversioned_field", "unversioned_field"]

UNVERSIONED_METADATA_KEY = "marin.unversioned"
ADDED_METADATA_KEY = "marin.added"
EXTERNAL_METADATA_KEY = "marin.external_path"


def unversioned_field(**kwargs: Any) -> Any:
    """A dataclass ``field(...)`` whose value does not affect the step's result and is left
    out of the hash, e.g. ``num_workers: int = unversioned_field(default=4)``."""
    metadata = dict(kwargs.pop("metadata", None) or {})
    metadata[UNVERSIONED_METADATA_KEY] = True
    return field(metadata=metadata, **kwargs)


def added_field(*, default: Any, **kwargs: Any) -> Any:
    """A dataclass ``field(default=...)`` added to a config that existing steps already
    hash: versioned, but left out of the hash while it holds ``default``, so no existing
    step key moves; any other value is hashed as usual. ``default`` must be an immutable
    value (None, a number, a string), compared with ``==``, e.g.
    ``decay_shape: str = added_field(default="linear")``."""
    if default is dataclasses.MISSING or isinstance(default, (list, dict, set)):
        raise TypeError("added_field needs an immutable default (None, a number, a string), "
                        f"got {default!r}")
    metadata = dict(kwargs.pop("metadata", None) or {})
    metadata[ADDED_METADATA_KEY] = True
    return field(default=default, metadata=metadata, **kwargs)


def is_added_field(f: dataclasses.Field) -> bool:
    return bool(f.metadata.get(ADDED_METADATA_KEY, False))


def external_path_field(**kwargs: Any) -> Any:
    """A dataclass ``field(...)`` holding a path outside the prefix (an external input):
    a command-line override may point it anywhere. Overrides of other fields whose value
    is an output placeholder must stay under the prefix."""
    metadata = dict(kwargs.pop("metadata", None) or {})
    metadata[EXTERNAL_METADATA_KEY] = True
    return field(metadata=metadata, **kwargs)


def is_external_path_field(f: dataclasses.Field) -> bool:
    return bool(f.metadata.get(EXTERNAL_METADATA_KEY, False))


def is_unversioned_field(f: dataclasses.Field) -> bool:
    return bool(f.metadata.get(UNVERSIONED_METADATA_KEY, False))
