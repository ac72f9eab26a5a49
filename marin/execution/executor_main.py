"""The command-line entry of an experiment file.

    # experiments/tiny.py
    steps = [tokenize, train]
    if __name__ == "__main__":
        executor_main(steps, description="a tiny sweep")

    $ python experiments/tiny.py --dry_run true
    $ python experiments/tiny.py --prefix gs://bucket/x --max_concurrent 4 --run_only 'train/.*'
    $ python experiments/tiny.py --train/tiny.learning_rate 3e-3     # a config override
    $ python experiments/tiny.py --force_run 'fit/.*'     # run matching steps again

Options are parsed by draccus from ``ExecutorMainConfig``; ``--STEP.FIELD VALUE`` arguments
override step configs (see ``marin.execution.overrides``).
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from marin.execution.executor import (
    DEFAULT_LEASE_TTL,
    Executor,
    check_positive,
    signals_interrupt,
)
from marin.execution.graph import StepGraph, StepGraphError, StepOrder
from marin.execution.hashing import UnhashableConfigError
from marin.execution.overrides import OverrideError, apply_overrides, split_override_args
from marin.execution.step import ExecutorStep
from marin.storage import StorageError

if TYPE_CHECKING:  # rich, draccus and yaml load when used: a dry run imports less
    from rich.console import Console

DEFAULT_LOCAL_PREFIX = "local_store"


@dataclass
class ExecutorMainConfig:
    """Options of ``executor_main`` and ``marin executor``."""

    prefix: str | None = None
    """Where outputs go: a folder or a storage URL. Default: $MARIN_PREFIX, else ./local_store."""
    dry_run: bool = False
    """Show what would run and why, and write nothing."""
    run_only: list[str] = field(default_factory=list)
    """Regular expressions: run only matching steps (and what they depend on)."""
    force_run_failed: bool = True
    """Retry steps that failed in an earlier run (false: report them as failed instead)."""
    force_run: list[str] = field(default_factory=list)
    """Regular expressions: run matching steps again even if they succeeded before."""
    max_concurrent: int | None = None
    """Steps running at once (default: the number of CPU cores)."""
    backend: str = "local"
    """The runner: local, or a runner plugin's name."""
    json: bool = False
    """Print the plan or the result as JSON on stdout."""
    lease_ttl: float = DEFAULT_LEASE_TTL
    """Seconds without a heartbeat after which another executor takes a step over."""
    show_skipped: bool = True
    """List skipped steps in the dry-run table."""
    all: bool = False
    """Print every step in the dry-run table; plans of more than 50 steps otherwise print a
    summary (counts per action and per name family, and the steps that will run or failed)."""
    ray_address: str | None = None
    """With --backend ray: the cluster to join (default: start a local Ray instance)."""


def resolve_prefix(prefix: str | None) -> str:
    return prefix or os.environ.get("MARIN_PREFIX") or os.path.abspath(DEFAULT_LOCAL_PREFIX)


def executor_main(steps: Sequence[ExecutorStep], description: str | None = None,
                  args: Sequence[str] | None = None) -> None:
    """Parse the command line, then plan (``--dry_run true``) or run ``steps``.

    Exits with status 1 when a step fails, 2 on a usage or configuration error.
    """
    argv = list(sys.argv[1:] if args is None else args)
    try:
        order = StepOrder.of(steps)  # the one walk over the steps' configs
        overrides, rest = split_override_args(argv, order.names)
    except (OverrideError, StepGraphError, TypeError) as e:
        _fail_usage(str(e))
    options = _parse_options(rest)
    code = run_with_options(order, options, overrides, description)
    if code:
        sys.exit(code)


def _parse_options(args: Sequence[str]) -> ExecutorMainConfig:
    """draccus parsing, with a bad value reported in one line (exit status 2)."""
    import argparse

    import draccus

    try:
        with contextlib.redirect_stderr(io.StringIO()) as err:
            return draccus.parse(ExecutorMainConfig, args=_list_options(args),
                                 prog=sys.argv[0])
    except SystemExit as e:
        if e.code in (0, None):  # --help
            raise
        lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
        _fail_usage(lines[-1].split("error: ", 1)[-1] if lines else "invalid arguments")
    except (argparse.ArgumentError, ValueError, TypeError, draccus.ParsingError) as e:
        text = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
        hint = "; booleans are true or false" if "bool" in text.lower() else ""
        _fail_usage(f"{text}{hint}")
    raise AssertionError("unreachable")


_LIST_OPTIONS = ("--run_only", "--force_run")


def _list_options(args: Sequence[str]) -> list[str]:
    """``--run_only A --run_only B`` (or ``--run_only A B``, or draccus's own ``[A, B]``)
    as the one JSON list that draccus reads."""
    import yaml

    out: list[str] = []
    lists: dict[str, list[str]] = {}
    i = 0
    while i < len(args):
        name, eq, value = args[i].partition("=")
        i += 1
        if name not in _LIST_OPTIONS:
            out.append(args[i - 1])
            continue
        values = [value] if eq else []
        while not eq and i < len(args) and not args[i].startswith("--"):
            values.append(args[i])
            i += 1
        for text in values:
            parsed = yaml.safe_load(text) if text.startswith("[") else None
            lists.setdefault(name, []).extend(
                [str(v) for v in parsed] if isinstance(parsed, list) else [text])
    for name, values in lists.items():
        out += [name, json.dumps(values)]
    return out


def _check_options(options: ExecutorMainConfig, spelling: str) -> None:
    dash = "-" if spelling == "cli" else "_"
    check_positive(f"--max{dash}concurrent", options.max_concurrent, integer=True)
    check_positive(f"--lease{dash}ttl", options.lease_ttl)


def run_with_options(steps: Sequence[ExecutorStep] | StepOrder, options: ExecutorMainConfig,
                     overrides: dict[str, str] | None = None,
                     description: str | None = None, spelling: str = "draccus") -> int:
    """Plan or run ``steps`` as ``options`` say; returns the process exit code. ``spelling``
    ("draccus" or "cli") names options in messages the way the user typed them.

    The steps are walked once (``StepOrder``), the overrides applied to that walk, and the
    result hashed once into the ``StepGraph`` that is planned and run."""
    from rich.console import Console

    from marin.execution.render import print_plan, print_result

    out = Console(stderr=options.json)
    if not out.is_terminal:
        out.width = 160  # tables in logs and pipes keep their columns
    _configure_logging(out)
    try:
        _check_options(options, spelling)
        prefix = resolve_prefix(options.prefix)
        order = steps if isinstance(steps, StepOrder) else StepOrder.of(steps)
        order = apply_overrides(order, overrides or {}, prefix)
        executor = Executor(prefix, options.max_concurrent,
                            options.backend, lease_ttl=options.lease_ttl,
                            runner_options=_runner_options(options))
        for warning in executor.prefix_warnings():
            out.print(f"[yellow]warning:[/] {warning}", highlight=False, soft_wrap=True)
        graph: StepGraph = executor.graph(order)
        if options.dry_run:
            plan = executor.plan(graph, options.run_only, options.force_run_failed,
                                 force_run=options.force_run, spelling=spelling)
            if options.json:
                print(json.dumps(plan.to_json(), indent=1, default=str))
            else:
                if description:
                    out.print(f"[bold]{description}[/]")
                print_plan(plan, out, options.show_skipped, show_all=options.all)
            return 0
        if description and not options.json:
            out.print(f"[bold]{description}[/]")
        from marin.execution.progress import SilentProgress, progress_for

        progress = SilentProgress() if options.json and not out.is_terminal else \
            progress_for(out)
        with _stdout_to_stderr(options.json), signals_interrupt():
            result = executor.run(graph, options.run_only, options.force_run_failed, progress,
                                  force_run=options.force_run, spelling=spelling)
    except (UnhashableConfigError, StepGraphError, OverrideError, StorageError,
            ValueError, ConnectionError) as e:
        Console(stderr=True).print(f"[bold red]error:[/] {_one_line(e)}", highlight=False,
                                   soft_wrap=True)
        return 2
    if options.json:
        print(json.dumps({"plan": result.plan.to_json(), "result": result.to_json()},
                         indent=1, default=str))
    else:
        print_result(result, out)
    if result.interrupted:
        return 128 + (result.interrupt_signal or 2)
    return 0 if result.ok else 1


def _one_line(e: BaseException) -> str:
    lines = [ln for ln in str(e).strip().splitlines() if ln.strip()]
    return " ".join(ln.strip() for ln in lines) if lines else type(e).__name__


@contextlib.contextmanager
def _stdout_to_stderr(active: bool) -> Iterator[None]:
    """With --json, stdout carries only the JSON: step output (Python prints and writes to
    file descriptor 1 by child processes alike) goes to stderr while steps run."""
    if not active:
        yield
        return
    sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:
        saved = None
    if saved is not None:
        os.dup2(2, 1)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stderr.flush()
        if saved is not None:
            os.dup2(saved, 1)
            os.close(saved)


def _runner_options(options: ExecutorMainConfig) -> dict[str, object]:
    return {"address": options.ray_address} if options.backend == "ray" else {}


def _configure_logging(console: Console) -> None:
    root = logging.getLogger("marin")
    if not root.handlers:
        from rich.logging import RichHandler

        root.addHandler(RichHandler(console=console, show_path=False, show_time=False))
        root.setLevel(logging.INFO)
        root.propagate = False


def _fail_usage(message: str) -> None:
    from rich.console import Console

    Console(stderr=True).print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    sys.exit(2)
