"""The one walk over config trees: hashing, placeholder resolution and info files use it.

    deps = [p.step for p in iter_leaves(config) if isinstance(p, OutputPathOf)]
    resolved = map_leaves(config, lambda leaf: "/out" if isinstance(leaf, ThisOutputPath)
                          else leaf)

    class CountMarkers(ConfigVisitor):          # a fold: results flow from leaves up
        def leaf(self, value, path): return 0
        def marker(self, value, path): return 1
        def container(self, value, kind, items, path): return sum(r for _, _, r in items)

Every node of a config is one ``Kind``, decided once per class by ``kind_of``:

* ``MARKER``: a placeholder or marker of ``marin.execution.step`` (a step, its output
  path, this step's output path, ``versioned``, ``unversioned``);
* ``RECORD``: a dataclass instance or a pydantic model, whose children are its fields;
* ``MAPPING``: any ``collections.abc.Mapping``, whose children are its values;
* ``SEQUENCE``: a list or tuple (named tuples included), children by position;
* ``SET``: a set or frozenset, children unordered (whoever needs an order sorts);
* ``LEAF``: everything else: numbers, strings, bytes, enums, paths, opaque objects.

Design note: the walk and the rules above live here only. Hashing
(``marin.execution.hashing``), resolution (``map_leaves``) and ``.executor_info`` encoding
(``marin.execution.status``) differ only in what they make of leaves and markers and how
they combine a container's results, so a container type added here reaches all three.

Every walk refuses a config that contains itself (``l = []; l.append(l)``, a dict holding
itself) and one nested more than ``MAX_DEPTH`` levels deep, with a ``ConfigStructureError``
naming the field path: a cycle would make the walk endless, and a 100,000-deep nesting
would end it in a ``RecursionError``. A value shared by two fields is no cycle: only a
container inside itself is.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Generic, TypeVar

from marin.execution.step import (
    ExecutorStep,
    OutputPathOf,
    ThisOutputPath,
    UnversionedValue,
    VersionedValue,
    is_added_field,
    is_unversioned_field,
)

R = TypeVar("R")
_ATOMS = frozenset({str, int, float, bool, type(None), bytes})

MARKERS = (ExecutorStep, OutputPathOf, ThisOutputPath, VersionedValue, UnversionedValue)

#: How deeply containers may nest in a config; real configs stay far below.
MAX_DEPTH = 100


class ConfigStructureError(ValueError):
    """A config contains itself, or nests deeper than ``MAX_DEPTH``; the message names the
    field path (and the step, once ``in_step`` added it)."""

    def in_step(self, name: str) -> ConfigStructureError:
        return ConfigStructureError(f"step {name!r}: {self}")


def _cycle_error(path: str | None, back_to: str | None) -> ConfigStructureError:
    where = _short(path) if path is not None else "a field"
    target = f" (back to {_short(back_to)})" if back_to is not None else ""
    return ConfigStructureError(
        f"{where}: the config contains itself{target}; a config must be a tree: put a copy "
        "there, or pass the shared value's name instead")


def _depth_error(path: str | None) -> ConfigStructureError:
    where = _short(path) if path is not None else "a field"
    return ConfigStructureError(
        f"{where}: the config nests more than {MAX_DEPTH} levels deep; pass deep data as a "
        "file (a path in the config) instead")


def _short(path: str, limit: int = 120) -> str:
    return path if len(path) <= limit else f"{path[:limit - 3]}..."


class Kind(enum.Enum):
    LEAF = "leaf"
    MARKER = "marker"
    RECORD = "record"
    MAPPING = "mapping"
    SEQUENCE = "sequence"
    SET = "set"


_KINDS: dict[type, Kind] = {}
_RECORD_FIELDS: dict[type, tuple[tuple[str, bool, Any], ...]] = {}

#: ``record_fields``'s third item for a field that is walked at any value
ALWAYS = object()


def kind_of(value: Any) -> Kind:
    """The kind of ``value``'s node; decided once per class."""
    cls = type(value)
    kind = _KINDS.get(cls)
    if kind is None:
        kind = _KINDS[cls] = _classify(cls)
    return kind


def _classify(cls: type) -> Kind:
    if issubclass(cls, MARKERS):
        return Kind.MARKER
    # Before the containers: a str or int enum, a numpy float are leaves.
    if issubclass(cls, (str, bytes, int, float, enum.Enum)):
        return Kind.LEAF
    if dataclasses.is_dataclass(cls) or _is_pydantic_model_class(cls):
        return Kind.RECORD
    if issubclass(cls, Mapping):
        return Kind.MAPPING
    if issubclass(cls, (list, tuple)):
        return Kind.SEQUENCE
    if issubclass(cls, (set, frozenset)):
        return Kind.SET
    return Kind.LEAF


def _is_pydantic_model_class(cls: type) -> bool:
    # No model can exist before pydantic is imported, so an unimported pydantic answers no.
    pydantic = sys.modules.get("pydantic")
    return pydantic is not None and issubclass(cls, pydantic.BaseModel)


def record_fields(cls: type) -> tuple[tuple[str, bool, Any], ...]:
    """A record class's field names, each with whether it is declared unversioned and, for
    an ``added_field``, its default (``ALWAYS`` for any other field)."""
    fields = _RECORD_FIELDS.get(cls)
    if fields is None:
        if dataclasses.is_dataclass(cls):
            fields = tuple((f.name, is_unversioned_field(f),
                            f.default if is_added_field(f) else ALWAYS)
                           for f in dataclasses.fields(cls))
        else:
            fields = tuple((name, False, ALWAYS)
                           for name in cls.model_fields)  # type: ignore[attr-defined]
        _RECORD_FIELDS[cls] = fields
    return fields


def children(value: Any, kind: Kind) -> list[tuple[Any, Any]]:
    """``(key, child)`` pairs: field name, mapping key, position, or None in a set."""
    if kind is Kind.RECORD:
        return [(name, getattr(value, name)) for name, _, _ in record_fields(type(value))]
    if kind is Kind.MAPPING:
        return list(value.items())
    if kind is Kind.SEQUENCE:
        return list(enumerate(value))
    if kind is Kind.SET:
        return [(None, item) for item in value]
    return []


def child_values(value: Any, kind: Kind) -> Any:
    """The children of ``children(value, kind)`` without their keys (an iterable)."""
    if kind is Kind.RECORD:
        return [getattr(value, name) for name, _, _ in record_fields(type(value))]
    if kind is Kind.MAPPING:
        return value.values()
    return value if kind is Kind.SEQUENCE or kind is Kind.SET else ()


def child_path(path: str, kind: Kind, key: Any) -> str:
    """The dotted path of a child, as error messages print it: ``config.model.layers[2]``."""
    if kind is Kind.RECORD:
        return f"{path}.{key}"
    if kind is Kind.MAPPING:
        return f"{path}[{_key_text(key)}]"
    if kind is Kind.SEQUENCE:
        return f"{path}[{key}]"
    return f"{path}{{}}"


#: No int of at most this many bits has more digits than Python writes as text by default
#: (4300, ``sys.set_int_max_str_digits``): only larger ones need ``long_int_problem``.
SHORT_INT_BITS = 14000


def long_int_problem(value: int, path: str | None, what: str = "") -> str | None:
    """Why the int ``value`` at ``path`` cannot be written as JSON (too many digits for
    Python to write as text), or None when it can."""
    if value.bit_length() <= SHORT_INT_BITS:
        return None
    try:
        str(value)
    except ValueError:
        return (f"{path}{what}: an integer of about {_digits(value)} digits, more than the "
                f"{sys.get_int_max_str_digits()} Python writes as text, cannot be written; "
                "pass it as a string, or as a float if an approximation will do")
    return None


def _digits(value: int) -> int:
    return int(value.bit_length() * 0.30103) + 1


def _key_text(key: Any) -> str:
    try:
        return repr(key)
    except ValueError:  # an int too long to write as text
        if isinstance(key, int):
            return f"<an int of about {_digits(key)} digits>"
        return f"<a {type(key).__name__}>"


def rebuild(value: Any, kind: Kind, items: list[tuple[Any, Any, Any]]) -> Any:
    """``value`` with its children replaced by the new ones in ``(key, old, new)`` items;
    ``value`` itself when no child changed."""
    if all(new is old for _, old, new in items):
        return value
    if kind is Kind.RECORD:
        changes = {key: new for key, old, new in items if new is not old}
        if dataclasses.is_dataclass(value):
            return with_fields(value, changes)
        return value.model_copy(update=changes)
    if kind is Kind.MAPPING:
        if isinstance(value, dict):
            rebuilt = copy.copy(value)  # keeps a dict subclass and its attributes
            rebuilt.update((key, new) for key, _, new in items)
            return rebuilt
        return type(value)({key: new for key, _, new in items})
    news = [new for _, _, new in items]
    if kind is Kind.SEQUENCE and hasattr(value, "_fields"):  # a named tuple
        return type(value)(*news)
    return type(value)(news)


def with_fields(obj: Any, changes: dict[str, Any]) -> Any:
    # copy + setattr instead of dataclasses.replace: fields with init=False survive, and
    # __post_init__ validation does not run on placeholder strings a second time.
    rebuilt = copy.copy(obj)
    for name, value in changes.items():
        object.__setattr__(rebuilt, name, value)
    return rebuilt


class ConfigVisitor(Generic[R]):
    """A fold over a config tree: ``visit`` returns the result for a node from the results
    of its children. Subclasses say what a leaf and a marker give (``leaf``, ``marker``)
    and how a container combines its children's ``(key, child, result)`` items
    (``container``); ``path`` is the node's dotted path (None when not tracked).
    A dataclass field declared ``unversioned_field`` is walked unless
    ``keep_unversioned(value)`` says no; one declared ``added_field`` is left out while it
    holds its default when ``omit_defaults`` (hashing) is set."""

    omit_defaults = False
    """Leave out each ``added_field`` that holds its default (what the hash does)."""
    _on_path: dict[int, str | None] | None = None
    """The containers (and markers) being walked, from the root down: id to path."""

    def visit(self, value: Any, path: str | None = "config") -> R:
        cls = type(value)
        kind = _KINDS.get(cls) or kind_of(value)
        if kind is Kind.LEAF:
            return self.leaf(value, path)
        on_path = self._on_path
        if on_path is None:
            on_path = self._on_path = {}
        key = id(value)
        if key in on_path:
            raise _cycle_error(path, on_path[key])
        if len(on_path) >= MAX_DEPTH:
            raise _depth_error(path)
        on_path[key] = path
        try:
            if kind is Kind.MARKER:
                return self.marker(value, path)
            # The children of each kind, as ``children`` lists them; inlined, as this loop
            # is the hot path of hashing 10,000-step graphs.
            visit = self.visit
            items: list[tuple[Any, Any, R]]
            if kind is Kind.RECORD:
                items = []
                for name, unversioned, default in _RECORD_FIELDS.get(cls) or record_fields(cls):
                    child = getattr(value, name)
                    if unversioned and not self.keep_unversioned(child):
                        continue
                    if default is not ALWAYS and self.omit_defaults and _is_default(
                            child, default):
                        continue
                    items.append((name, child,
                                  visit(child, None if path is None else f"{path}.{name}")))
            elif path is None:
                items = [(k, child, visit(child, None)) for k, child in children(value, kind)]
            elif kind is Kind.SEQUENCE:
                items = [(i, child, visit(child, f"{path}[{i}]"))
                         for i, child in enumerate(value)]
            else:
                items = [(k, child, visit(child, child_path(path, kind, k)))
                         for k, child in children(value, kind)]
            return self.container(value, kind, items, path)
        finally:
            del on_path[key]

    def keep_unversioned(self, value: Any) -> bool:
        return True

    def leaf(self, value: Any, path: str | None) -> R:
        return value

    def marker(self, value: Any, path: str | None) -> R:
        return value

    def container(self, value: Any, kind: Kind, items: list[tuple[Any, Any, R]],
                  path: str | None) -> R:
        raise NotImplementedError


def _is_default(value: Any, default: Any) -> bool:
    """``value`` is an ``added_field``'s ``default`` (of its type: ``1`` is not ``True``)."""
    return value is default or (type(value) is type(default) and value == default)


class _Mapper(ConfigVisitor[Any]):
    def __init__(self, fn: Callable[[Any], Any]):
        self._fn = fn

    def marker(self, value: Any, path: str | None) -> Any:
        return self._fn(value)

    def container(self, value: Any, kind: Kind, items: list[tuple[Any, Any, Any]],
                  path: str | None) -> Any:
        return rebuild(value, kind, items)


def map_leaves(value: Any, fn: Callable[[Any], Any]) -> Any:
    """Rebuild ``value`` with every marker ``m`` replaced by ``fn(m)``. Only the containers
    whose contents changed are rebuilt, so unchanged parts keep their identity; a set of
    placeholders becomes a set (of the same type) of what they resolve to."""
    return _Mapper(fn).visit(value, None)


def iter_leaves(value: Any) -> Iterator[Any]:
    """Every placeholder or marker in ``value`` (including inside versioned/unversioned),
    each object once, however often the config refers to it; a cycle ends the walk there."""
    stack = [value]
    seen: set[int] = set()  # a container met again (shared, or inside itself) is not walked
    while stack:
        item = stack.pop()
        cls = type(item)
        if cls in _ATOMS:
            continue
        kind = _KINDS.get(cls) or kind_of(item)
        if kind is Kind.LEAF:
            continue
        if id(item) in seen:
            continue
        seen.add(id(item))
        if kind is Kind.MARKER:
            yield item
            if isinstance(item, (VersionedValue, UnversionedValue)):
                stack.append(item.value)
        else:
            stack.extend(child_values(item, kind))
