"""A command-line parser generated from frozen dataclasses: one rule set for every option.

    parser = argparse.ArgumentParser()
    add_fields(parser, StudyOptions, positionals=False)
    namespace, rest = parser.parse_known_args(normalize(args, [StudyOptions], False))
    options = StudyOptions(**given(namespace, StudyOptions))

Every field is accepted as ``--name_with_underscores`` and as ``--name-with-dashes``. A
boolean takes an optional value (``--yes``, ``--yes true``, ``--yes=false``); a list takes
one value per use when the command also has positionals, else every value up to the next
option (``--run_only A B``) or draccus's ``[A, B]``. ``--help`` shows each field's type,
default and help text: the ``help`` of its metadata, or its entry in the class docstring's
``Attributes:`` section. ``--config_path FILE.yaml`` reads values from a YAML mapping of
field names; the command line wins over the file.

Design note: the executor's options (``ExecutorMainConfig``) and an experiment's own options
go through these functions, so both follow the same rules in both front ends.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import types
import typing
from collections.abc import Sequence
from typing import Any

__all__ = ["CONFIG_PATH", "OptionsError", "add_fields", "field_help", "given", "kind_of",
           "load_config_file", "normalize", "spellings"]


class OptionsError(ValueError):
    """The command line's options cannot be parsed (one line, naming the option)."""


#: The option that names a YAML file of option values.
CONFIG_PATH = "config_path"

_BOOL_WORDS = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}


def spellings(name: str) -> list[str]:
    """``--dry-run`` and ``--dry_run`` for the field ``dry_run``."""
    return list(dict.fromkeys([f"--{name.replace('_', '-')}", f"--{name.replace('-', '_')}"]))


def kind_of(annotation: Any) -> Any:
    """bool, list, dict, int, float or str: what the parser makes of a field's type."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    base = typing.get_origin(annotation) or annotation
    if base in (typing.Union, types.UnionType) and args:
        return kind_of(args[0])
    if base is tuple:
        return list
    return base


def _types(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def parse_bool(text: str) -> bool:
    try:
        return _BOOL_WORDS[text.lower()]
    except KeyError:
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}") from None


def _type_name(annotation: Any) -> str:
    return getattr(annotation, "__name__", None) or str(annotation).replace("typing.", "")


def _default_text(f: dataclasses.Field) -> str:
    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        value = f.default_factory()  # type: ignore[misc]
    else:
        return "required"
    if isinstance(value, bool):
        return str(value).lower()
    return "none" if value in (None, [], {}, ()) else str(value)


def field_help(cls: type) -> dict[str, str]:
    """Each field's help: its metadata's ``help``, else its ``Attributes:`` docstring entry."""
    documented: dict[str, str] = {}
    current = None
    in_attributes = False
    for line in (cls.__doc__ or "").splitlines():
        stripped = line.strip()
        if stripped == "Attributes:":
            in_attributes = True
            continue
        if not in_attributes:
            continue
        match = re.match(r"(\w+):\s*(.*)", stripped)
        if match and match.group(1) in {f.name for f in dataclasses.fields(cls)}:
            current = match.group(1)
            documented[current] = match.group(2)
        elif stripped and current:
            documented[current] += " " + stripped
        elif not stripped:
            current = None
    return {f.name: f.metadata.get("help") or documented.get(f.name, "")
            for f in dataclasses.fields(cls)}


def add_fields(parser: argparse.ArgumentParser | argparse._ArgumentGroup, cls: type,
               positionals: bool, skip: Sequence[str] = ()) -> None:
    """Register every field of ``cls`` (but ``skip``) under both spellings; nothing is set
    for an option not given, so ``given`` returns only what the command line said."""
    kinds = _types(cls)
    helps = field_help(cls)
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        kind = kind_of(kinds[f.name])
        text = f"{helps[f.name]} ({_type_name(kinds[f.name])}, default: {_default_text(f)})"
        common = {"dest": f.name, "default": argparse.SUPPRESS, "help": text}
        if kind is bool:
            parser.add_argument(*spellings(f.name), type=parse_bool, metavar="BOOL", **common)
        elif kind is list:
            parser.add_argument(*spellings(f.name), metavar="VALUE",
                                **({"action": "append"} if positionals
                                   else {"action": "extend", "nargs": "+"}), **common)
        else:
            parser.add_argument(*spellings(f.name), type=kind,
                                metavar={int: "N", float: "NUMBER"}.get(kind, f.name.upper()),
                                **common)


def add_config_path(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(*spellings(CONFIG_PATH), dest=CONFIG_PATH, default=None,
                        metavar="FILE.yaml", help="option values from a YAML file of "
                        "field: value pairs; the command line wins over it")


def normalize(args: Sequence[str], classes: Sequence[type], positionals: bool,
              negations: dict[str, str] | None = None) -> list[str]:
    """Booleans given as ``--flag`` or ``--flag VALUE`` become ``--flag=VALUE``, and a
    negation (``negations``: flag name -> the field it sets false) the field it negates,
    before the parser sees them. Arguments after ``--STEP.FIELD`` overrides are left alone
    where they are values."""
    flags = {s: f.name for cls in classes for f in dataclasses.fields(cls)
             if kind_of(_types(cls)[f.name]) is bool for s in spellings(f.name)}
    negated = {s: field for name, field in (negations or {}).items() for s in spellings(name)}
    out: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg in negated:
            out.append(f"--{negated[arg]}=false")
        elif arg in flags:
            nxt = args[i] if i < len(args) else None
            if nxt is not None and (nxt.lower() in _BOOL_WORDS
                                    or (not positionals and not nxt.startswith("--"))):
                out.append(f"{arg}={nxt}")
                i += 1
            else:
                out.append(f"{arg}=true")
        else:
            out.append(arg)
    return out


def given(namespace: argparse.Namespace, cls: type) -> dict[str, Any]:
    """The fields of ``cls`` that ``namespace`` holds, lists in draccus's syntax expanded."""
    kinds = _types(cls)
    out = {f.name: getattr(namespace, f.name) for f in dataclasses.fields(cls)
           if hasattr(namespace, f.name)}
    for name, value in out.items():
        if kind_of(kinds[name]) is list and isinstance(value, list):
            out[name] = expand_lists(value)
    return out


def expand_lists(values: list[str]) -> list[str]:
    """``[A, B]`` (draccus's list syntax) as two values."""
    out: list[str] = []
    for text in values:
        if isinstance(text, str) and text.startswith("["):
            import yaml

            try:
                parsed = yaml.safe_load(text)
            except yaml.YAMLError:  # not a list: a regular expression such as "[ab]c"
                parsed = None
            if isinstance(parsed, list):
                out.extend(str(v) for v in parsed)
                continue
        out.append(text)
    return out


def load_config_file(path: str, classes: Sequence[type]) -> list[dict[str, Any]]:
    """The values a YAML file gives the fields of each class in ``classes`` (one mapping
    per class, in order); OptionsError in one line naming the file and the key."""
    import yaml

    try:
        with open(path, encoding="utf-8") as f:
            data = yaml.safe_load(f)
    except OSError as e:
        raise OptionsError(f"--config_path {path}: cannot read it ({e.strerror or e})") from None
    except yaml.YAMLError as e:
        where = getattr(e, "problem_mark", None)
        at = f" at line {where.line + 1}" if where is not None else ""
        raise OptionsError(f"--config_path {path}: not valid YAML{at}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise OptionsError(f"--config_path {path}: expected a mapping of option: value, got "
                           f"a {type(data).__name__}")
    out: list[dict[str, Any]] = [{} for _ in classes]
    for key, value in data.items():
        name = str(key).replace("-", "_")
        for slot, cls in zip(out, classes, strict=True):
            kinds = _types(cls)
            if name in kinds:
                slot[name] = _decode(kinds[name], value, f"--config_path {path}: {key}")
                break
        else:
            known = sorted({f.name for cls in classes for f in dataclasses.fields(cls)})
            raise OptionsError(f"--config_path {path}: unknown option {key!r}; options are: "
                               f"{', '.join(known)}")
    return out


def _decode(annotation: Any, value: Any, label: str) -> Any:
    kind = kind_of(annotation)
    if value is None:
        return None
    if kind is bool and isinstance(value, str):
        try:
            return parse_bool(value)
        except argparse.ArgumentTypeError as e:
            raise OptionsError(f"{label}: {e}") from None
    if kind is list:
        return [str(v) for v in (value if isinstance(value, list) else [value])]
    if kind is dict:
        if not isinstance(value, dict):
            raise OptionsError(f"{label}: expected a mapping, got {value!r}")
        return {str(k): str(v) for k, v in value.items()}
    if kind in (int, float, str, bool):
        if kind is int and isinstance(value, float) and not value.is_integer():
            raise OptionsError(f"{label}: expected a whole number, got {value!r}")
        try:
            return kind(value)
        except (TypeError, ValueError):
            raise OptionsError(f"{label}: expected {kind.__name__}, got {value!r}") from None
    return value
