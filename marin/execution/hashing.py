"""Canonical, process-independent identities for step configs.

    canonical = canonicalize(config, dependency_id=lambda step: ids[step])
    text = canonical_json({"name": "train/tiny", "config": canonical})
    digest = version_hash(text)          # "3f9c01ab"

The canonical form is plain JSON data: dataclass fields become objects, tuples and lists
become arrays, sets become sorted arrays, non-finite floats and non-string dict keys get a
tagged form. A value with no canonical form (a function, an object whose text would be a
memory address) is refused with an error naming its dotted path: hashing through ``str()``
would give a different identity in every process.

The tree is walked by ``config_tree.ConfigVisitor``, the walk that resolution and info files
use too; this module only says what each leaf and marker hashes as.
"""

from __future__ import annotations

import datetime as _dt
import enum
import hashlib
import json
import math
import pathlib
from collections.abc import Callable
from typing import Any

from marin.execution.config_tree import SHORT_INT_BITS, ConfigVisitor, Kind, long_int_problem
from marin.execution.step import (
    ExecutorStep,
    OutputPathOf,
    UnversionedValue,
    VersionedValue,
)

HASH_LENGTH = 8
UNVERSIONED_MARKER = "$unversioned"


class UnhashableConfigError(TypeError):
    """A config value has no canonical form; the message opens with its dotted path (and
    ends with the step, once ``in_step`` added it)."""

    def in_step(self, name: str) -> UnhashableConfigError:
        return UnhashableConfigError(f"{self} (in step {name!r})")


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                              allow_nan=False)  # made once: json.dumps would make one per call


def canonical_json(data: Any) -> str:
    return _CANONICAL.encode(data)


def version_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:HASH_LENGTH]


def canonicalize(value: Any, dependency_id: Callable[[ExecutorStep], str],
                 path: str = "config") -> Any:
    """The canonical JSON data of ``value``; ``dependency_id`` names a dependency step."""
    return _Canonicalizer(dependency_id).visit(value, path)


class _Canonicalizer(ConfigVisitor[Any]):
    """The walk is ``config_tree``'s; this class says what each node hashes as."""

    omit_defaults = True  # an added_field at its default moves no key

    def __init__(self, dependency_id: Callable[[ExecutorStep], str]):
        self._dependency_id = dependency_id

    def visit(self, value: Any, path: str | None = "config") -> Any:
        kind = type(value)  # the common leaves first: most of a config is numbers and text
        if kind is str:
            return _checked_text(value, path)
        if kind is int:
            return value if value.bit_length() <= SHORT_INT_BITS else _checked_int(value, path)
        if kind is bool or value is None:
            return value
        if kind is float:
            return _canonical_float(value)
        return super().visit(value, path)

    def keep_unversioned(self, value: Any) -> bool:
        # An unversioned field is left out of the hash, unless its value is versioned(...).
        return isinstance(value, VersionedValue)

    def marker(self, value: Any, path: str | None) -> Any:
        if isinstance(value, VersionedValue):
            if value.version is not None:
                return {"$version": self.visit(value.version, f"{path}.version")}
            return self.visit(value.value, path)
        if isinstance(value, UnversionedValue):
            return UNVERSIONED_MARKER
        if isinstance(value, ExecutorStep):
            return {"$output_of": self._dependency_id(value), "sub": ""}
        if isinstance(value, OutputPathOf):
            return {"$output_of": self._dependency_id(value.step), "sub": value.sub}
        return {"$this_output": value.sub}  # ThisOutputPath

    def leaf(self, value: Any, path: str | None) -> Any:
        if isinstance(value, bool):
            return value
        if isinstance(value, str):
            return _checked_text(value, path)
        if isinstance(value, int):
            return int(_checked_int(value, path))
        if isinstance(value, float):
            return _canonical_float(value)
        if isinstance(value, enum.Enum):
            return self.visit(value.value, path)
        if isinstance(value, pathlib.PurePath):
            return str(value)
        if isinstance(value, bytes):
            return {"$bytes": value.hex()}
        if isinstance(value, (_dt.datetime, _dt.date, _dt.time)):
            return {"$time": value.isoformat()}
        if type(value).__module__ == "numpy" and hasattr(value, "tolist"):
            return self.visit(value.tolist(), path)
        raise UnhashableConfigError(_refusal(value, str(path)))

    def container(self, value: Any, kind: Kind, items: list[tuple[Any, Any, Any]],
                  path: str | None) -> Any:
        if kind is Kind.RECORD:
            return {name: result for name, _, result in items}
        if kind is Kind.SEQUENCE:
            return [result for _, _, result in items]
        if kind is Kind.SET:  # sorted, so that neither insertion order nor hash seed counts
            return {"$set": sorted((result for _, _, result in items), key=canonical_json)}
        if all(isinstance(key, str) for key, _, _ in items):
            return {_checked_text(key, path, " (a dict key)"): result for key, _, result in items}
        pairs = [[_canonical_key(key, str(path)), result] for key, _, result in items]
        return {"$items": sorted(pairs, key=lambda kv: canonical_json(kv[0]))}


def _canonical_float(value: float) -> Any:
    if math.isfinite(value):
        return value
    return {"$float": "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")}


def _checked_int(value: int, path: str | None, what: str = "") -> int:
    """``value``, or an ``UnhashableConfigError`` when it is too long to write as JSON."""
    problem = long_int_problem(value, path, what)
    if problem is not None:
        raise UnhashableConfigError(problem)
    return value


def _checked_text(value: str, path: str | None, what: str = "") -> str:
    """``value``, or an ``UnhashableConfigError`` when UTF-8 cannot encode it (a lone
    surrogate such as ``"\\ud800"``, or a file name's undecodable byte)."""
    if value.isascii():
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise UnhashableConfigError(
            f"{path}{what}: the text {_clip(value)} holds {value[e.start]!r} at position "
            f"{e.start}, a lone surrogate that UTF-8 cannot encode, so it has no canonical "
            "form; pass valid Unicode text (bytes that are not text as bytes)") from None
    return value


def _clip(value: str, limit: int = 40) -> str:
    text = ascii(value)
    return text if len(text) <= limit else f"{text[:limit - 4]}...{text[-1]}"


def _canonical_key(key: Any, path: str) -> Any:
    if isinstance(key, float) and math.isnan(key):
        raise UnhashableConfigError(
            f"{path}: a dict key is NaN, which never equals itself and has no canonical form; "
            "use a string key instead"
        )
    if isinstance(key, str):
        return _checked_text(key, path, " (a dict key)")
    if isinstance(key, int) and not isinstance(key, bool):
        return _checked_int(key, path, " (a dict key)")
    if key is None or isinstance(key, (bool, float)):
        return _canonical_float(key) if isinstance(key, float) else key
    if isinstance(key, enum.Enum):
        return _canonical_key(key.value, path)
    raise UnhashableConfigError(
        f"{path}: dict key {key!r} of type {type(key).__name__} has no canonical form; "
        "use str, int, float, bool or None keys"
    )


def _refusal(value: Any, path: str) -> str:
    kind = type(value).__name__
    if callable(value):
        what = f"a callable ({getattr(value, '__qualname__', kind)})"
    else:
        what = f"a value of type {type(value).__module__}.{kind}"
    return (
        f"{path}: {what} has no canonical form, so it cannot be part of the step's hash. "
        "Wrap it as versioned(value, version='<name or version>') to give it an identity, "
        "or unversioned(value) (or declare the field with unversioned_field()) if it does "
        "not change the step's result."
    )
