"""JSON for the scaling laws' frozen dataclasses, driven by their type hints, and the
versioned files made of them.

    data = encode(fit)                       # dataclasses, tuples, dicts, enums, floats (NaN too)
    fit = decode(StudyFit, data, "fit.json")  # the same value back; bad data: ArtifactError
    outcome = RunOutcome.from_json(read_json(path), where=path)   # an Artifact: checked

A class with its own ``to_json``/``from_json`` (``RunSummary``, the calibration and
comparison results) is written and read through them. Floats that are not finite are
written as the strings ``"nan"``, ``"inf"`` and ``"-inf"``, so every file is strict JSON.

Design note: one codec for every artifact keeps the field names of a file and of its class
the same by construction; a renamed field is a new format version (``Artifact.OLDER``,
``_previous``), handled by the artifact's own class.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import math
import sys
import types
import typing
from collections.abc import Mapping
from enum import Enum
from functools import cache
from typing import Any, ClassVar

from marin.storage.files import open_url

__all__ = ["Artifact", "ArtifactError", "decode", "decode_fields", "encode", "encode_fields",
           "read_json"]


class ArtifactError(ValueError):
    """A study file cannot be read; the message names the file and the problem."""


def encode(value: Any) -> Any:
    """``value`` as JSON data."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        # a class's own JSON may hold NaN: it is made strict here too
        return encode(value.to_json()) if _custom(type(value)) else encode_fields(value)
    if isinstance(value, Mapping):
        return {str(k): encode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    if isinstance(value, Enum):  # a RunStatus: its string
        return value.value
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if hasattr(value, "tolist"):  # a numpy scalar or array
        return encode(value.tolist())
    return value


def encode_fields(value: Any) -> dict[str, Any]:
    """A dataclass's fields as JSON data (its own ``to_json`` builds on this)."""
    return {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)}


def decode_fields(cls: type, data: Any, where: str) -> Any:
    """A dataclass from its fields' JSON data (its own ``from_json`` builds on this)."""
    return _guarded(_dataclass, cls, data, where)


def decode(cls: Any, data: Any, where: str) -> Any:
    """``data`` read as type ``cls``; ``where`` names the file in errors."""
    return _guarded(_decode, cls, data, where)


def _guarded(read: Any, cls: Any, data: Any, where: str) -> Any:
    """``read(cls, data, where)`` with any error as one ``ArtifactError`` naming ``where``."""
    try:
        return read(cls, data, where)
    except ArtifactError:
        raise
    except (TypeError, ValueError, KeyError) as e:
        raise ArtifactError(f"{where}: not a valid {_name(cls)} ({e})") from None


def _custom(cls: type) -> bool:
    return callable(getattr(cls, "to_json", None)) and callable(getattr(cls, "from_json", None))


def _decode(cls: Any, data: Any, where: str) -> Any:
    origin = typing.get_origin(cls)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(cls) if a is not type(None)]
        if data is None:
            return None
        return _decode(options[0], data, where)
    if cls is Any:
        return data
    if origin is tuple:
        args = typing.get_args(cls)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_decode(args[0], v, where) for v in _list(data, cls, where))
        items = _list(data, cls, where)
        if len(items) != len(args):
            raise ArtifactError(f"{where}: expected {len(args)} values, got {len(items)}")
        return tuple(_decode(a, v, where) for a, v in zip(args, items, strict=True))
    if origin in (dict, Mapping) or cls is dict:
        args = typing.get_args(cls) or (str, Any)
        if not isinstance(data, Mapping):
            raise ArtifactError(f"{where}: expected an object for {_name(cls)}, got "
                                f"{type(data).__name__}")
        return {str(k): _decode(args[1], v, where) for k, v in data.items()}
    if dataclasses.is_dataclass(cls):
        if _custom(cls):
            if "where" in inspect.signature(cls.from_json).parameters:
                return cls.from_json(data, where=where)
            return cls.from_json(data)
        return _dataclass(cls, data, where)
    if cls is float:
        if isinstance(data, str) and data in ("nan", "inf", "-inf"):
            return float(data)
        if isinstance(data, bool) or not isinstance(data, (int, float)):
            raise ArtifactError(f"{where}: expected a number, got {data!r}")
        return float(data)
    if cls is int:
        if isinstance(data, bool) or not isinstance(data, (int, float)) or data != int(data):
            raise ArtifactError(f"{where}: expected an integer, got {data!r}")
        return int(data)
    if cls is bool:
        if not isinstance(data, bool):
            raise ArtifactError(f"{where}: expected true or false, got {data!r}")
        return data
    if isinstance(cls, type) and issubclass(cls, Enum):
        try:
            return cls(data)
        except ValueError:
            raise ArtifactError(f"{where}: {data!r} is no {cls.__name__}; expected one of "
                                f"{', '.join(m.value for m in cls)}") from None
    if cls is str:
        if not isinstance(data, str):
            raise ArtifactError(f"{where}: expected a string, got {data!r}")
        return data
    return data


def _dataclass(cls: type, data: Any, where: str) -> Any:
    if not isinstance(data, Mapping):
        raise ArtifactError(f"{where}: expected an object for {cls.__name__}, got "
                            f"{type(data).__name__}")
    hints = _hints(cls)
    values = {}
    for f in dataclasses.fields(cls):
        if f.name in data:
            values[f.name] = _decode(hints[f.name], data[f.name], where)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ArtifactError(f"{where}: {cls.__name__} lacks the field {f.name!r}")
    return cls(**values)


def _list(data: Any, cls: Any, where: str) -> list:
    if not isinstance(data, (list, tuple)):
        raise ArtifactError(f"{where}: expected a list for {_name(cls)}, got "
                            f"{type(data).__name__}")
    return list(data)


@cache
def _hints(cls: type) -> dict[str, Any]:
    """The class's field types. A module may name types it imports only when a file is
    read (heavy ones, numpy's and scipy's) in a function ``_lazy_types()``."""
    module = sys.modules[cls.__module__]
    lazy = getattr(module, "_lazy_types", None)
    return typing.get_type_hints(cls, {**vars(module), **(lazy() if lazy else {})})


def _name(cls: Any) -> str:
    return getattr(cls, "__name__", str(cls))


class Artifact:
    """``to_json``/``from_json`` with the format and version checked."""

    FORMAT: ClassVar[str]
    VERSION: ClassVar[int]
    OLDER: ClassVar[tuple[int, ...]] = ()  # earlier versions that read as this one

    def to_json(self) -> dict[str, Any]:
        return {"format": self.FORMAT, "version": self.VERSION, **encode_fields(self)}

    @classmethod
    def from_json(cls, data: Any, where: str = "data"):
        if not isinstance(data, dict):
            raise ArtifactError(f"{where}: expected a JSON object, got {type(data).__name__}")
        if "format" not in data:
            return cls._previous(data, where)
        if data["format"] != cls.FORMAT or data.get("version") not in (cls.VERSION,
                                                                       *cls.OLDER):
            older = (f" (version {', '.join(map(str, cls.OLDER))} still reads)"
                     if cls.OLDER else "")
            raise ArtifactError(
                f"{where} is of format {data['format']!r} version {data.get('version')!r}; "
                f"a {cls.__name__} is {cls.FORMAT!r} version {cls.VERSION}{older}: use the "
                "marin that wrote it, or rerun the step")
        return decode_fields(cls, {k: v for k, v in data.items()
                                   if k not in ("format", "version")}, where)

    @classmethod
    def _previous(cls, data: dict[str, Any], where: str):
        raise ArtifactError(f"{where} has no format; it is not a {cls.__name__} "
                            f"({cls.FORMAT!r} version {cls.VERSION})")


def read_json(path: str) -> Any:
    """The JSON file at ``path``; None where there is none; not JSON: ``ArtifactError``."""
    try:
        with open_url(path, "r") as f:
            text = f.read()
    except FileNotFoundError:
        return None
    try:
        return json.loads(text)
    except ValueError as e:
        raise ArtifactError(f"{path} is not valid JSON ({e}); the step that wrote it did "
                            "not finish: rerun it") from None
