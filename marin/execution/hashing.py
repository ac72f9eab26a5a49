"""Canonical, process-independent identities for step configs.

    canonical = canonicalize(config, dependency_id=lambda step: ids[step])
    text = canonical_json({"name": "train/tiny", "config": canonical})
    digest = version_hash(text)          # "3f9c01ab"

The canonical form is plain JSON data: dataclass fields become objects, tuples and lists
become arrays, sets become sorted arrays, non-finite floats and non-string dict keys get a
tagged form. A value with no canonical form (a function, an object whose text would be a
memory address) is refused with an error naming its dotted path: hashing through ``str()``
would give a different identity in every process.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import enum
import hashlib
import json
import math
import pathlib
from collections.abc import Callable, Mapping
from typing import Any

from marin.execution.step import (
    ExecutorStep,
    OutputPathOf,
    ThisOutputPath,
    UnversionedValue,
    VersionedValue,
    is_unversioned_field,
)

HASH_LENGTH = 8
UNVERSIONED_MARKER = "$unversioned"


class UnhashableConfigError(TypeError):
    """A config value has no canonical form; the message names its dotted path."""


def canonical_json(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False)


def version_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:HASH_LENGTH]


def canonicalize(value: Any, dependency_id: Callable[[ExecutorStep], str],
                 path: str = "config") -> Any:
    """The canonical JSON data of ``value``; ``dependency_id`` names a dependency step."""
    return _Canonicalizer(dependency_id).convert(value, path, force=False)


class _Canonicalizer:
    def __init__(self, dependency_id: Callable[[ExecutorStep], str]):
        self._dependency_id = dependency_id

    def convert(self, value: Any, path: str, force: bool) -> Any:
        kind = type(value)
        if kind is str or kind is int or kind is bool or value is None:
            return value
        if kind is float:
            return _canonical_float(value)
        if kind is ExecutorStep:
            return {"$output_of": self._dependency_id(value), "sub": ""}
        if isinstance(value, (bool, str)):
            return value
        if isinstance(value, int):
            return int(value)
        if isinstance(value, float):
            return _canonical_float(value)
        if isinstance(value, VersionedValue):
            if value.version is not None:
                return {"$version": self.convert(value.version, f"{path}.version", True)}
            return self.convert(value.value, path, force=True)
        if isinstance(value, UnversionedValue):
            return UNVERSIONED_MARKER
        if isinstance(value, ExecutorStep):
            value = OutputPathOf(value)
        if isinstance(value, OutputPathOf):
            return {"$output_of": self._dependency_id(value.step), "sub": value.sub}
        if isinstance(value, ThisOutputPath):
            return {"$this_output": value.sub}
        if isinstance(value, enum.Enum):
            return self.convert(value.value, path, force)
        if isinstance(value, pathlib.PurePath):
            return str(value)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return self._dataclass(value, path, force)
        if _is_pydantic_model(value):
            return {name: self.convert(getattr(value, name), f"{path}.{name}", force)
                    for name in type(value).model_fields}
        if isinstance(value, Mapping):
            return self._mapping(value, path, force)
        if isinstance(value, (list, tuple)):
            return [self.convert(v, f"{path}[{i}]", force) for i, v in enumerate(value)]
        if isinstance(value, (set, frozenset)):
            items = [self.convert(v, f"{path}{{}}", force) for v in value]
            return {"$set": sorted(items, key=canonical_json)}
        if isinstance(value, bytes):
            return {"$bytes": value.hex()}
        if isinstance(value, (_dt.datetime, _dt.date, _dt.time)):
            return {"$time": value.isoformat()}
        if type(value).__module__ == "numpy" and hasattr(value, "tolist"):
            return self.convert(value.tolist(), path, force)
        raise UnhashableConfigError(_refusal(value, path))

    def _dataclass(self, value: Any, path: str, force: bool) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, unversioned in _hashed_fields(type(value)):
            item = getattr(value, name)
            if unversioned and not isinstance(item, VersionedValue):
                continue
            out[name] = self.convert(item, f"{path}.{name}", force)
        return out

    def _mapping(self, value: Mapping, path: str, force: bool) -> Any:
        if all(isinstance(k, str) for k in value):
            return {k: self.convert(v, f"{path}[{k!r}]", force) for k, v in value.items()}
        items = []
        for k, v in value.items():
            key = _canonical_key(k, path)
            items.append([key, self.convert(v, f"{path}[{k!r}]", force)])
        return {"$items": sorted(items, key=lambda kv: canonical_json(kv[0]))}


_FIELDS: dict[type, tuple[tuple[str, bool], ...]] = {}


def _hashed_fields(cls: type) -> tuple[tuple[str, bool], ...]:
    """A dataclass's field names, each with whether it is unversioned; cached per class."""
    fields = _FIELDS.get(cls)
    if fields is None:
        fields = _FIELDS[cls] = tuple((f.name, is_unversioned_field(f))
                                      for f in dataclasses.fields(cls))
    return fields


def _canonical_float(value: float) -> Any:
    if math.isfinite(value):
        return value
    return {"$float": "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")}


def _canonical_key(key: Any, path: str) -> Any:
    if isinstance(key, float) and math.isnan(key):
        raise UnhashableConfigError(
            f"{path}: a dict key is NaN, which never equals itself and has no canonical form; "
            "use a string key instead"
        )
    if key is None or isinstance(key, (bool, int, float, str)):
        return _canonical_float(key) if isinstance(key, float) else key
    if isinstance(key, enum.Enum):
        return _canonical_key(key.value, path)
    raise UnhashableConfigError(
        f"{path}: dict key {key!r} of type {type(key).__name__} has no canonical form; "
        "use str, int, float, bool or None keys"
    )


def _is_pydantic_model(value: Any) -> bool:
    return hasattr(type(value), "model_fields") and hasattr(value, "model_dump")


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
