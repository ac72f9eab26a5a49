"""Command-line overrides of step configs, draccus style.

    python experiments/isoflop.py --train/tiny.optimizer.learning_rate 3e-3
    order = apply_overrides(StepOrder.of(steps), {"train/tiny.optimizer.learning_rate": "3e-3"})
    graph = StepGraph.from_order(order, prefix)      # the walk is reused, not repeated

An override names a step and a dotted field path. The value is parsed as YAML and decoded
by draccus to the field's declared type; where a record class declares a
``BARE_NAME_FIELD``, a bare string stands for the record with that field set, as in Python
(``--train/tiny.trackers '["json", {"type": "wandb"}]'``: ``TrackerConfig("json")``...).
The step gets a new config, and every step that depends on it is rebuilt to point at the
new one, so hashes change exactly as if the file had been edited.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import os
import types
import typing
from collections.abc import Callable, Sequence
from typing import Any

from marin.execution.config_tree import ConfigStructureError, map_leaves, with_fields
from marin.execution.graph import StepOrder, dependency_edges
from marin.execution.step import (
    ExecutorStep,
    OutputPathOf,
    ThisOutputPath,
    is_external_path_field,
)


class OverrideError(ValueError):
    """An override names no step or field, or its value does not fit the field's type."""


def split_override_args(args: Sequence[str],
                        step_names: Sequence[str] | Callable[[], Sequence[str]]
                        ) -> tuple[dict[str, str], list[str]]:
    """Separate ``--STEP.field value`` / ``--STEP.field=value`` from the other arguments.

    ``step_names`` may be a function returning the names: it is called only when an
    argument looks like an override, so a plain command never walks a large graph."""
    names: set[str] | None = None
    overrides: dict[str, str] = {}
    rest: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        key = arg[2:].split("=", 1)[0] if arg.startswith("--") else ""
        if "." in key and names is None:
            names = set(step_names() if callable(step_names) else step_names)
        if "." in key and _names_a_step(key, names or set()):
            if "=" in arg:
                overrides[key] = arg.split("=", 1)[1]
            elif i + 1 < len(args):
                overrides[key] = args[i + 1]
                i += 1
            else:
                raise OverrideError(f"override {arg} has no value")
        else:
            rest.append(arg)
        i += 1
    return overrides, rest


def _names_a_step(key: str, names: set[str]) -> bool:
    """Whether ``key`` is ``<a step name>.<field...>``."""
    dot = key.find(".")
    while dot > 0:
        if key[:dot] in names:
            return True
        dot = key.find(".", dot + 1)
    return False


def apply_overrides(walked: StepOrder, overrides: dict[str, str],
                    prefix: str | None = None) -> StepOrder:
    """The walk ``walked`` with ``overrides`` applied (its walk reused). With ``prefix``, an
    override that replaces an output placeholder must name a path under ``prefix``, unless
    the field is declared with ``external_path_field``."""
    if not overrides:
        return walked
    return _overridden(walked, overrides, prefix)


def _overridden(walked: StepOrder, overrides: dict[str, str], prefix: str | None
                ) -> StepOrder:
    order = walked.steps
    by_name = {s.name: s for s in order}
    per_step: dict[str, list[tuple[list[str], str]]] = {}
    for key, value in overrides.items():
        name = max((n for n in by_name if key.startswith(f"{n}.")), key=len, default=None)
        if name is None:
            raise OverrideError(f"override --{key}: no step is named {key.split('.')[0]!r}; "
                                f"steps are: {', '.join(sorted(by_name))}")
        per_step.setdefault(name, []).append((key[len(name) + 1:].split("."), value))
    replaced: dict[int, ExecutorStep] = {}
    new_order: list[ExecutorStep] = []
    new_deps: dict[int, list[ExecutorStep]] = {}
    new_nonblocking: dict[int, frozenset[int]] = {}
    dropped = False
    for step in order:
        config = step.config
        deps = walked.dependencies[id(step)]
        if any(id(d) in replaced for d in deps):
            try:
                config = map_leaves(config, lambda leaf: _repoint(leaf, replaced))
            except ConfigStructureError as e:
                raise e.in_step(step.name) from None
        for path, value in per_step.get(step.name, []):
            config = _set_field(config, path, value, step.name, prefix)
        new = step
        if config is not step.config:
            new = replaced[id(step)] = step.with_config(config)
        mapped = [replaced.get(id(d), d) for d in deps]
        unwaited = walked.nonblocking.get(id(step))
        if unwaited:
            unwaited = frozenset(id(replaced.get(id(d), d)) for d in deps if id(d) in unwaited)
        if step.name in per_step:  # a field set by value may have been a dependency
            own, unwaited = dependency_edges(new)
            dropped |= len(own) != len(mapped)
            mapped = own
        new_order.append(new)
        new_deps[id(new)] = mapped
        if unwaited:
            new_nonblocking[id(new)] = unwaited
    roots = [replaced.get(id(s), s) for s in walked.roots]
    if dropped:  # a dependency replaced by a value: what is still reachable, walked again
        return StepOrder.of(roots)
    return StepOrder(roots, new_order, new_deps, new_nonblocking)


def _repoint(leaf: Any, replaced: dict[int, ExecutorStep]) -> Any:
    if isinstance(leaf, ExecutorStep) and id(leaf) in replaced:
        return replaced[id(leaf)]
    if isinstance(leaf, OutputPathOf) and id(leaf.step) in replaced:
        return leaf.of_step(replaced[id(leaf.step)])
    return leaf


def _set_field(obj: Any, path: list[str], raw: str, where: str,
               prefix: str | None = None) -> Any:
    name, rest = path[0], path[1:]
    label = f"{where}.{name}"
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        fields = {f.name: f for f in dataclasses.fields(obj)}
        if name not in fields:
            raise OverrideError(f"override {label}: {type(obj).__name__} has no field {name!r}; "
                                f"fields are: {', '.join(fields)}")
        current = getattr(obj, name)
        if rest:
            new = _set_field(current, rest, raw, label, prefix)
        else:
            field_type = typing.get_type_hints(type(obj)).get(name, Any)
            new = _decode(field_type, raw, label)
            if prefix is not None and isinstance(current, _PLACEHOLDERS) \
                    and not is_external_path_field(fields[name]):
                _check_under_prefix(new, prefix, label)
        return with_fields(obj, {name: new})
    if isinstance(obj, dict):
        if name not in obj:
            raise OverrideError(f"override {label}: no key {name!r}; keys are: "
                                f"{', '.join(map(str, obj))}")
        import yaml

        out = dict(obj)
        out[name] = _set_field(obj[name], rest, raw, label, prefix) if rest \
            else yaml.safe_load(raw)
        if not rest and prefix is not None and isinstance(obj[name], _PLACEHOLDERS):
            _check_under_prefix(out[name], prefix, label)
        return out
    raise OverrideError(f"override {label}: cannot set a field on a {type(obj).__name__}")


_PLACEHOLDERS = (ThisOutputPath, OutputPathOf, ExecutorStep)


def _check_under_prefix(value: Any, prefix: str, label: str) -> None:
    text = str(value)
    if not _is_under(text, prefix):
        raise OverrideError(
            f"override {label}={text!r}: an output path must stay under the prefix {prefix}; "
            "drop the override, or declare the field with external_path_field() if it "
            "names an input from elsewhere")


def _is_under(path: str, prefix: str) -> bool:
    if "://" in prefix or "://" in path:
        parts = path.split("/")
        return path.startswith(prefix.rstrip("/") + "/") and ".." not in parts
    base = os.path.normpath(os.path.abspath(prefix))
    return os.path.normpath(os.path.abspath(path)).startswith(base.rstrip(os.sep) + os.sep)


def _decode(field_type: Any, raw: str, label: str) -> Any:
    import draccus  # with yaml, only when an override is given
    import yaml

    try:
        return draccus.decode(field_type, _expand_bare_names(field_type, yaml.safe_load(raw)))
    except Exception as e:
        raise OverrideError(f"override {label}={raw!r}: not a valid {field_type}: {e}") from e


def _expand_bare_names(field_type: Any, value: Any) -> Any:
    """``value`` with every bare name that stands for a record (a ``str`` where a record
    class with a ``BARE_NAME_FIELD`` is declared) written as that record's fields, as the
    record class itself reads it in Python: ``"json"`` for ``TrackerConfig("json")``."""
    origin, args = typing.get_origin(field_type), typing.get_args(field_type)
    if origin is typing.Union or origin is types.UnionType:
        options = [a for a in args if a is not type(None)]
        return _expand_bare_names(options[0], value) if len(options) == 1 else value
    if dataclasses.is_dataclass(field_type) and isinstance(value, str):
        bare = getattr(field_type, "BARE_NAME_FIELD", None)
        return {bare: value} if isinstance(bare, str) else value
    if dataclasses.is_dataclass(field_type) and isinstance(value, dict):
        try:
            hints = typing.get_type_hints(field_type)
        except (NameError, TypeError):  # annotations that do not resolve: left to draccus
            return value
        return {k: _expand_bare_names(hints[k], v) if k in hints else v
                for k, v in value.items()}
    if isinstance(value, list) and args and origin in _SEQUENCES:
        fixed = origin is tuple and Ellipsis not in args  # tuple[A, B]: a type per position
        return [_expand_bare_names(args[i] if fixed and i < len(args) else args[0], v)
                for i, v in enumerate(value)]
    if isinstance(value, dict) and origin in _MAPPINGS and len(args) == 2:
        return {k: _expand_bare_names(args[1], v) for k, v in value.items()}
    return value


_SEQUENCES = (list, tuple, set, frozenset, collections.abc.Sequence)
_MAPPINGS = (dict, collections.abc.Mapping)
