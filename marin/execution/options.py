"""The executor's options, defined once: ``executor_main`` and ``marin executor`` parse the
same fields, each under both spellings.

    options = parse_options(["--dry-run", "--max_concurrent", "4"])   # ExecutorMainConfig

    $ python experiments/x.py --dry_run true --run_only 'train/.*'
    $ marin executor --dry-run --run-only 'train/.*' experiments/x.py
    $ marin executor --backend ray --runner-option address=10.0.0.2:6379 experiments/x.py

Every option is accepted as ``--name_with_underscores`` and as ``--name-with-dashes``. A
boolean takes an optional value: ``--dry-run``, ``--dry_run true``, ``--dry-run=false``. A
list option takes one value per use in ``marin executor`` (repeat it) and every value up to
the next option in an experiment file (``--run_only A B``, or ``--run_only '[A, B]'``).

Runner options are opaque to the executor: ``--runner-option KEY=VALUE`` (repeatable) and,
for the runner that ``--backend NAME`` names, ``--NAME-KEY VALUE`` (so the Ray runner's
``--ray-address``) reach the runner as ``KEY=VALUE``; the runner declares the keys it
accepts (``Runner.options``), and an undeclared one is refused in one line.

Design note: a dataclass is the one definition; the argument parser is generated from it,
so a new option is one field, and neither front end can drift from the other.
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from marin.execution.executor import DEFAULT_LEASE_TTL


def _doc(text: str, negation: str | None = None) -> dict[str, Any]:
    """A field's metadata: its help text, and the flag that sets it to false, if any."""
    return {"help": text, "negation": negation}


@dataclass(frozen=True)
class ExecutorMainConfig:
    """Options of ``executor_main`` and ``marin executor`` (each field's ``help`` is its
    documentation, shown by ``--help``)."""

    prefix: str | None = field(default=None, metadata=_doc(
        "where outputs go: a folder or a storage URL (default: $MARIN_PREFIX, else "
        "./local_store)"))
    dry_run: bool = field(default=False, metadata=_doc(
        "show what would run and why, and write nothing"))
    run_only: list[str] = field(default_factory=list, metadata=_doc(
        "regular expressions: run only matching steps and what they depend on"))
    force_run_failed: bool = field(default=True, metadata=_doc(
        "retry steps that failed in an earlier run (false, or --no-retry-failed: report "
        "them as failed instead)", negation="no-retry-failed"))
    force_run: list[str] = field(default_factory=list, metadata=_doc(
        "regular expressions: run matching steps again even if they succeeded before"))
    max_concurrent: int | None = field(default=None, metadata=_doc(
        "steps running at once (default: the number of CPU cores)"))
    backend: str = field(default="local", metadata=_doc(
        "the runner: local, or a runner plugin's name (marin plugins list)"))
    json: bool = field(default=False, metadata=_doc(
        "print the plan or the result as JSON on stdout"))
    lease_ttl: float = field(default=DEFAULT_LEASE_TTL, metadata=_doc(
        "seconds without a heartbeat after which another executor takes a step over"))
    show_skipped: bool = field(default=True, metadata=_doc(
        "list skipped steps in the dry-run table (default true; --show-skipped false "
        "hides them)"))
    all: bool = field(default=False, metadata=_doc(
        "with --dry-run: print every step; plans of more than 50 steps otherwise print a "
        "summary"))
    runner_options: dict[str, str] = field(default_factory=dict, metadata=_doc(
        "KEY=VALUE handed to the runner as it is (repeatable); the runner declares its keys"))


class OptionsError(ValueError):
    """The command line's options cannot be parsed (one line, naming the option)."""


_BOOL_WORDS = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}
_RUNNER_OPTION = "runner_options"


def _types() -> dict[str, Any]:
    return typing.get_type_hints(ExecutorMainConfig)


def _kind(annotation: Any) -> Any:
    """bool, list, dict, int, float or str: what the parser makes of a field."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    base = typing.get_origin(annotation) or annotation
    if base in (typing.Union, types.UnionType) and args:
        return _kind(args[0])
    return base


def _bool(text: str) -> bool:
    try:
        return _BOOL_WORDS[text.lower()]
    except KeyError:
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}") from None


def spellings(name: str) -> list[str]:
    """``--dry-run`` and ``--dry_run`` for the field ``dry_run``."""
    return list(dict.fromkeys([f"--{name.replace('_', '-')}", f"--{name.replace('-', '_')}"]))


def add_options(parser: argparse.ArgumentParser, positionals: bool) -> None:
    """Register every field on ``parser``, under both spellings; nothing is set for an
    option not given, so ``options_from`` keeps the dataclass's defaults.
    ``positionals``: the command also takes positional arguments (``marin executor``), so a
    list option takes one value per use."""
    kinds = _types()
    for f in dataclasses.fields(ExecutorMainConfig):
        kind = _kind(kinds[f.name])
        common = {"dest": f.name, "default": argparse.SUPPRESS, "help": f.metadata["help"]}
        if f.name == _RUNNER_OPTION:
            parser.add_argument(*spellings("runner_option"), action="append",
                                metavar="KEY=VALUE", **common)
        elif kind is bool:
            parser.add_argument(*spellings(f.name), type=_bool, metavar="BOOL", **common)
        elif kind is list:
            parser.add_argument(*spellings(f.name), metavar="REGEX",
                                **({"action": "append"} if positionals
                                   else {"action": "extend", "nargs": "+"}), **common)
        else:
            parser.add_argument(*spellings(f.name), type=kind,
                                metavar={int: "N", float: "NUMBER"}.get(kind, f.name.upper()),
                                **common)


def normalize(args: Sequence[str], positionals: bool) -> list[str]:
    """Booleans given as ``--flag`` or ``--flag VALUE`` become ``--flag=VALUE``, and a
    negation (``--no-retry-failed``) the field it negates, before the parser sees them."""
    kinds = _types()
    flags = {s: f.name for f in dataclasses.fields(ExecutorMainConfig)
             if _kind(kinds[f.name]) is bool for s in spellings(f.name)}
    negations = {s: f.name for f in dataclasses.fields(ExecutorMainConfig)
                 if f.metadata["negation"] for s in spellings(f.metadata["negation"])}
    heads = _backend_heads(args)
    out: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if heads and arg.startswith(heads) and "=" not in arg and i < len(args) \
                and not args[i].startswith("--"):
            out.append(f"{arg}={args[i]}")  # a runner's flag keeps its value
            i += 1
        elif arg in negations:
            out.append(f"--{negations[arg]}=false")
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


def _backend_heads(args: Sequence[str]) -> tuple[str, ...]:
    """``--NAME-`` and ``--NAME_`` for the backend the arguments choose (none for local)."""
    backend = "local"
    for i, arg in enumerate(args):
        if arg in spellings("backend") and i + 1 < len(args):
            backend = args[i + 1]
        elif arg.split("=", 1)[0] in spellings("backend") and "=" in arg:
            backend = arg.split("=", 1)[1]
    return () if backend == "local" else (f"--{backend}-", f"--{backend}_")


def options_from(namespace: argparse.Namespace, unknown: Sequence[str] = ()
                 ) -> tuple[ExecutorMainConfig, list[str]]:
    """The options a parsed ``namespace`` holds, with runner options taken from
    ``unknown`` (``--BACKEND-KEY VALUE``); returns the arguments still not understood."""
    given = {f.name: getattr(namespace, f.name) for f in dataclasses.fields(ExecutorMainConfig)
             if hasattr(namespace, f.name)}
    kinds = _types()
    for name, value in given.items():
        if name != _RUNNER_OPTION and _kind(kinds[name]) is list:
            given[name] = _expand_lists(value)
    runner = _runner_pairs(given.pop(_RUNNER_OPTION, []))
    backend = given.get("backend", "local")
    from_flags, rest = _backend_flags(unknown, backend)
    options = ExecutorMainConfig(**given, runner_options={**from_flags, **runner})
    return options, rest


def parse_options(args: Sequence[str], prog: str | None = None) -> ExecutorMainConfig:
    """Parse an experiment file's command line (no positionals); OptionsError in one line."""
    parser = _RaisingParser(prog=prog, description="Plan or run this experiment's steps.")
    add_options(parser, positionals=False)
    namespace, unknown = parser.parse_known_args(normalize(args, positionals=False))
    options, rest = options_from(namespace, unknown)
    if rest:
        raise OptionsError(f"unrecognized arguments: {' '.join(rest)} (see --help; "
                           "overrides look like --STEP_NAME.field value)")
    return options


class _RaisingParser(argparse.ArgumentParser):
    def error(self, message: str):  # type: ignore[override]
        raise OptionsError(message)


def _expand_lists(values: list[str]) -> list[str]:
    """``[A, B]`` (draccus's list syntax) as two values."""
    out: list[str] = []
    for text in values:
        if text.startswith("["):
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


def _runner_pairs(pairs: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or not key:
            raise OptionsError(f"--runner-option {pair!r}: expected KEY=VALUE, for example "
                               "--runner-option address=10.0.0.2:6379")
        out[key] = value
    return out


def _backend_flags(args: Sequence[str], backend: str) -> tuple[dict[str, str], list[str]]:
    """``--BACKEND-KEY VALUE`` / ``--BACKEND_KEY=VALUE`` for the chosen backend."""
    found: dict[str, str] = {}
    rest: list[str] = []
    heads = {f"--{backend}-", f"--{backend}_"}
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        head = next((h for h in heads if arg.startswith(h)), None)
        if head is None or backend == "local":
            rest.append(arg)
            continue
        key, eq, value = arg[len(head):].partition("=")
        if not eq:
            if i >= len(args) or args[i].startswith("--"):
                raise OptionsError(f"{arg} needs a value")
            value = args[i]
            i += 1
        found[key.replace("-", "_")] = value
    return found, rest
