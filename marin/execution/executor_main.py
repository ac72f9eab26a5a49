"""The command-line entry of an experiment file.

    # experiments/tiny.py
    steps = [tokenize, train]
    if __name__ == "__main__":
        executor_main(steps, description="a tiny sweep")

    $ python experiments/tiny.py --dry_run true
    $ python experiments/tiny.py --prefix gs://bucket/x --max_concurrent 4 --run_only 'train/.*'
    $ python experiments/tiny.py --train/tiny.learning_rate 3e-3     # a config override
    $ python experiments/tiny.py --force_run 'fit/.*'     # run matching steps again

Options are the fields of ``ExecutorMainConfig`` (``marin.execution.options``), each under
both spellings (``--dry_run true`` or ``--dry-run``); ``--STEP.FIELD VALUE`` arguments
override step configs (see ``marin.execution.overrides``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from marin.execution.executor import Executor, check_positive, gc_paused, signals_interrupt
from marin.execution.graph import StepGraph, StepGraphError, StepOrder
from marin.execution.hashing import UnhashableConfigError
from marin.execution.json_report import dumps_report
from marin.execution.options import ExecutorMainConfig, OptionsError, parse_options
from marin.execution.overrides import OverrideError, apply_overrides, split_override_args
from marin.execution.step import ExecutorStep
from marin.storage import StorageError

if TYPE_CHECKING:  # rich, draccus and yaml load when used: a dry run imports less
    from rich.console import Console

DEFAULT_LOCAL_PREFIX = "local_store"


def resolve_prefix(prefix: str | None) -> str:
    return prefix or os.environ.get("MARIN_PREFIX") or os.path.abspath(DEFAULT_LOCAL_PREFIX)


def executor_main(steps: Sequence[ExecutorStep], description: str | None = None,
                  args: Sequence[str] | None = None) -> None:
    """Parse the command line, then plan (``--dry_run true``) or run ``steps``.

    Exits with status 1 when a step fails, 2 on a usage or configuration error.
    """
    argv = list(sys.argv[1:] if args is None else args)
    try:
        with gc_paused():
            order = StepOrder.of(steps)  # the one walk over the steps' configs
        overrides, rest = split_override_args(argv, order.names)
    except (OverrideError, StepGraphError, TypeError) as e:
        _fail_usage(str(e))
    options = _parse_options(rest)
    code = run_with_options(order, options, overrides, description)
    if code:
        sys.exit(code)


def _parse_options(args: Sequence[str]) -> ExecutorMainConfig:
    """The options (``marin.execution.options``), a bad one reported in one line (exit 2)."""
    try:
        return parse_options(args, prog=sys.argv[0])
    except OptionsError as e:
        _fail_usage(str(e))
    raise AssertionError("unreachable")


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
        with gc_paused():
            _check_options(options, spelling)
            prefix = resolve_prefix(options.prefix)
            order = steps if isinstance(steps, StepOrder) else StepOrder.of(steps)
            order = apply_overrides(order, overrides or {}, prefix)
            executor = Executor(prefix, options.max_concurrent,
                                options.backend, lease_ttl=options.lease_ttl,
                                runner_options=options.runner_options)
            for warning in executor.prefix_warnings():
                out.print(f"[yellow]warning:[/] {warning}", highlight=False, soft_wrap=True)
            graph: StepGraph = executor.graph(order)
            if options.dry_run:
                plan = executor.plan(graph, options.run_only, options.force_run_failed,
                                     force_run=options.force_run, spelling=spelling)
                if options.json:
                    print(dumps_report(plan.to_json()))
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
    except BrokenPipeError:
        raise  # the reader went away (``| head``): not a configuration error
    except (UnhashableConfigError, StepGraphError, OverrideError, StorageError,
            ValueError, ConnectionError) as e:
        Console(stderr=True).print(f"[bold red]error:[/] {_one_line(e)}", highlight=False,
                                   soft_wrap=True)
        return 2
    if options.json:
        print(dumps_report({"plan": result.plan.to_json(), "result": result.to_json()}))
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
