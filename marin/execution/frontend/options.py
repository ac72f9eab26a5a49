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
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from marin.execution.executor import DEFAULT_LEASE_TTL
from marin.execution.frontend.arguments import (
    OptionsError,
    add_fields,
    field_help,
    given,
    spellings,
)
from marin.execution.frontend.arguments import normalize as _normalize

__all__ = ["ExecutorMainConfig", "OptionsError", "RaisingParser", "add_options", "normalize",
           "options_from", "parse_options", "spellings"]


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
        "retry steps that failed in an earlier invocation (false, or --no-retry-failed: report "
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
    pack: int = field(default=1, metadata=_doc(
        "train up to N ready steps of one pack key (one model shape) together in one "
        "process, capped by what fits on one device; 1 (the default) packs nothing"))
    runner_options: dict[str, str] = field(default_factory=dict, metadata=_doc(
        "KEY=VALUE handed to the runner as it is (repeatable); the runner declares its keys"))


_RUNNER_OPTION = "runner_options"
_NEGATIONS = {f.metadata["negation"]: f.name for f in dataclasses.fields(ExecutorMainConfig)
              if f.metadata.get("negation")}


def add_options(parser: argparse.ArgumentParser | argparse._ArgumentGroup,
                positionals: bool) -> None:
    """Register every field of ``ExecutorMainConfig`` on ``parser``, under both spellings.
    ``positionals``: the command also takes positional arguments (``marin executor``), so a
    list option takes one value per use."""
    add_fields(parser, ExecutorMainConfig, positionals, skip=(_RUNNER_OPTION,))
    parser.add_argument(*spellings("runner_option"), action="append", dest=_RUNNER_OPTION,
                        metavar="KEY=VALUE", default=argparse.SUPPRESS,
                        help=field_help(ExecutorMainConfig)[_RUNNER_OPTION])


def normalize(args: Sequence[str], positionals: bool, extra: Sequence[type] = ()) -> list[str]:
    """Booleans of ``ExecutorMainConfig`` (and of the ``extra`` option classes) given as
    ``--flag`` or ``--flag VALUE`` become ``--flag=VALUE``, and ``--no-retry-failed``
    ``--force_run_failed=false``; a runner's ``--BACKEND-KEY VALUE`` keeps its value."""
    heads = _backend_heads(args)
    joined: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if heads and arg.startswith(heads) and "=" not in arg and i < len(args) \
                and not args[i].startswith("--"):
            joined.append(f"{arg}={args[i]}")  # a runner's flag keeps its value
            i += 1
        else:
            joined.append(arg)
    return _normalize(joined, [ExecutorMainConfig, *extra], positionals, _NEGATIONS)


def _backend_heads(args: Sequence[str]) -> tuple[str, ...]:
    """``--NAME-`` and ``--NAME_`` for the backend the arguments choose (none for local)."""
    backend = "local"
    for i, arg in enumerate(args):
        if arg in spellings("backend") and i + 1 < len(args):
            backend = args[i + 1]
        elif arg.split("=", 1)[0] in spellings("backend") and "=" in arg:
            backend = arg.split("=", 1)[1]
    return () if backend == "local" else (f"--{backend}-", f"--{backend}_")


def options_from(namespace: argparse.Namespace, unknown: Sequence[str] = (),
                 base: dict[str, Any] | None = None) -> tuple[ExecutorMainConfig, list[str]]:
    """The options a parsed ``namespace`` holds (over ``base``, values from a config file),
    with runner options taken from ``unknown`` (``--BACKEND-KEY VALUE``); returns the
    arguments still not understood."""
    values = {**(base or {}), **given(namespace, ExecutorMainConfig)}
    runner = _runner_pairs(getattr(namespace, _RUNNER_OPTION, []))
    values.pop(_RUNNER_OPTION, None)
    backend = values.get("backend", "local")
    from_flags, rest = _backend_flags(unknown, backend)
    from_file = (base or {}).get(_RUNNER_OPTION, {})
    options = ExecutorMainConfig(**values, runner_options={**from_file, **from_flags,
                                                           **runner})
    return options, rest


def parse_options(args: Sequence[str], prog: str | None = None) -> ExecutorMainConfig:
    """Parse an experiment file's command line (no positionals); OptionsError in one line."""
    parser = RaisingParser(prog=prog, description="Plan or run this experiment's steps.")
    add_options(parser, positionals=False)
    namespace, unknown = parser.parse_known_args(normalize(args, positionals=False))
    options, rest = options_from(namespace, unknown)
    if rest:
        raise OptionsError(f"unrecognized arguments: {' '.join(rest)} (see --help; "
                           "overrides look like --STEP_NAME.field value)")
    return options


class RaisingParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are ``OptionsError``, in one line."""

    def error(self, message: str):  # type: ignore[override]
        raise OptionsError(message)


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
