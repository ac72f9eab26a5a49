"""Walking and rebuilding config trees (dataclasses, pydantic models, lists, dicts).

    deps = [p.step for p in iter_leaves(config) if isinstance(p, OutputPathOf)]
    resolved = map_leaves(config, lambda leaf: "/out" if isinstance(leaf, ThisOutputPath)
                          else leaf)

``map_leaves`` rebuilds only the containers whose contents changed, so unchanged parts
of a config keep their identity.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

from marin.execution.step import (
    ExecutorStep,
    OutputPathOf,
    ThisOutputPath,
    UnversionedValue,
    VersionedValue,
)

_MARKERS = (ExecutorStep, OutputPathOf, ThisOutputPath, VersionedValue, UnversionedValue)
_ATOMS = frozenset({str, int, float, bool, type(None), bytes})
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def iter_leaves(value: Any) -> Iterator[Any]:
    """Every placeholder or marker in ``value`` (including inside versioned/unversioned)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if type(item) in _ATOMS:
            continue
        if isinstance(item, (VersionedValue, UnversionedValue)):
            yield item
            stack.append(item.value)
        elif isinstance(item, _MARKERS):
            yield item
        else:
            stack.extend(_children(item))


def map_leaves(value: Any, fn: Callable[[Any], Any]) -> Any:
    """Rebuild ``value`` with every marker ``m`` replaced by ``fn(m)``."""
    if isinstance(value, _MARKERS):
        return fn(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {}
        for f in dataclasses.fields(value):
            old = getattr(value, f.name)
            new = map_leaves(old, fn)
            if new is not old:
                changes[f.name] = new
        return with_fields(value, changes) if changes else value
    if hasattr(type(value), "model_fields") and hasattr(value, "model_copy"):
        changes = {}
        for name in type(value).model_fields:
            old = getattr(value, name)
            new = map_leaves(old, fn)
            if new is not old:
                changes[name] = new
        return value.model_copy(update=changes) if changes else value
    if isinstance(value, dict):
        items = {k: map_leaves(v, fn) for k, v in value.items()}
        if all(items[k] is value[k] for k in value):
            return value
        rebuilt = copy.copy(value)
        rebuilt.update(items)
        return rebuilt
    if isinstance(value, (list, tuple)):
        items = [map_leaves(v, fn) for v in value]
        if all(a is b for a, b in zip(items, value, strict=True)):
            return value
        if isinstance(value, list):
            return type(value)(items)
        if hasattr(value, "_fields"):  # namedtuple
            return type(value)(*items)
        return type(value)(items)
    return value


def _children(value: Any) -> list[Any]:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [getattr(value, name) for name in _field_names(type(value))]
    if hasattr(type(value), "model_fields") and hasattr(value, "model_copy"):
        return [getattr(value, name) for name in type(value).model_fields]
    if isinstance(value, dict):
        return list(value.values())
    if isinstance(value, (list, tuple, set, frozenset)):
        return list(value)
    return []


def with_fields(obj: Any, changes: dict[str, Any]) -> Any:
    # copy + setattr instead of dataclasses.replace: fields with init=False survive, and
    # __post_init__ validation does not run on placeholder strings a second time.
    rebuilt = copy.copy(obj)
    for name, value in changes.items():
        object.__setattr__(rebuilt, name, value)
    return rebuilt


def _field_names(cls: type) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return names
