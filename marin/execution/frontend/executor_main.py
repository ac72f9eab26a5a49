"""The command-line entry of an experiment file.

    # experiments/tiny.py
    steps = [tokenize, train]
    if __name__ == "__main__":
        result = executor_main(steps, description="a tiny sweep")   # InvocationResult, or Plan

    # an experiment with options of its own (see marin.execution.experiments.Experiment)
    experiment = Experiment(build, options=SweepOptions, preflight=refusal)
    if __name__ == "__main__":
        executor_main(experiment)

    $ python experiments/tiny.py --dry-run
    $ python experiments/tiny.py --prefix gs://bucket/x --max_concurrent 4 --run_only 'train/.*'
    $ python experiments/tiny.py --train/tiny.learning_rate 3e-3     # a config override
    $ python experiments/tiny.py --help      # every option, and how to override a field

Options are the fields of ``ExecutorMainConfig`` (``marin.execution.frontend.options``) and of the
experiment's options class, each under both spellings (``--dry_run true`` or
``--dry-run``); ``--STEP.FIELD VALUE`` arguments override step configs (see
``marin.execution.overrides``). ``marin executor EXP`` parses and runs through the same
functions (``parse_invocation``, ``run_invocation``).

Design note: this module is the front end. It parses, spells the core's messages for the
user's command (``Style``), prints, and chooses the exit status; the core
(``Executor.plan``/``run``) takes a built ``StepGraph`` and typed values.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import sys
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from marin.execution.errors import one_line
from marin.execution.executor import Executor, InvocationResult, gc_paused, signals_interrupt
from marin.execution.experiments import Experiment, experiment_id
from marin.execution.frontend.command_line import (
    HelpRequested,
    Invocation,
    Style,
    UsageError,
    parse_invocation,
)
from marin.execution.frontend.options import ExecutorMainConfig
from marin.execution.graph import StepCollection, StepGraph, StepGraphError
from marin.execution.hashing import UnhashableConfigError
from marin.execution.json_report import dumps_report
from marin.execution.overrides import OverrideError, apply_overrides
from marin.execution.packs import plan_packs
from marin.execution.planning import Plan
from marin.execution.step import ExecutorStep
from marin.storage import StorageError

if TYPE_CHECKING:  # rich, draccus and yaml load when used: a dry run imports less
    from rich.console import Console

__all__ = [
    "DEFAULT_LOCAL_PREFIX",
    "ExecutorMainConfig",
    "executor_main",
    "exit_code",
    "resolve_prefix",
    "run_invocation",
]

DEFAULT_LOCAL_PREFIX = "local_store"


def resolve_prefix(prefix: str | None) -> str:
    return prefix or os.environ.get("MARIN_PREFIX") or os.path.abspath(DEFAULT_LOCAL_PREFIX)


def executor_main(steps: Sequence[ExecutorStep] | StepCollection | Experiment,
                  description: str | None = None, args: Sequence[str] | None = None, *,
                  exit_on_failure: bool = True
                  ) -> InvocationResult | Plan:
    """Parse the command line, then plan (``--dry-run``) or run ``steps`` (a list, a
    ``StepCollection`` such as an IsoFLOP study, or an ``Experiment`` with options of its
    own). Returns the ``InvocationResult`` of the invocation, or the
    ``Plan`` of a dry run; each step's output path and state are in it.

    ``--help`` prints the options and exits 0; a usage or configuration error exits 2. A
    run that fails or is interrupted exits non-zero, unless ``exit_on_failure`` is false:
    then the failed result is returned (for scripts and notebooks)."""
    experiment = steps if isinstance(steps, Experiment) else Experiment(steps)
    if description is not None:
        experiment = dataclasses.replace(experiment, description=description)
    argv = list(sys.argv[1:] if args is None else args)
    try:
        with gc_paused():
            invocation = parse_invocation(experiment, argv, Style.DRACCUS, prog=sys.argv[0])
    except HelpRequested as h:
        sys.stdout.write(h.text)
        sys.exit(0)
    except UsageError as e:
        _fail_usage(str(e))
    result = run_invocation(invocation, entry_point(), Style.DRACCUS)
    code = exit_code(result)
    if code and (exit_on_failure or not isinstance(result, (InvocationResult, Plan))):
        sys.exit(code)
    return result  # type: ignore[return-value]


def entry_point() -> str:
    """The experiment a ``python FILE`` or ``python -m MODULE`` process runs: the script's
    path as given, or the module's name."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and spec.name and spec.name != "__main__":
        return spec.name.removesuffix(".__main__")
    path = getattr(main, "__file__", None)
    if path:
        return os.path.relpath(path) if not os.path.relpath(path).startswith("..") else path
    return sys.argv[0] if sys.argv and sys.argv[0] else "<interactive>"


def exit_code(result: InvocationResult | Plan | int) -> int:
    """0 for a plan or an invocation that succeeded; 1 for a failed one, 128 + the signal for an
    interrupted one; an int is a usage error's status already."""
    if isinstance(result, int):
        return result
    if isinstance(result, Plan):
        return 0
    if result.interrupted:
        return 128 + (result.interrupt_signal or 2)
    return 0 if result.ok else 1


def run_invocation(invocation: Invocation, experiment: str, style: Style
                   ) -> InvocationResult | Plan | int:
    """Plan or run what ``invocation`` asks, printing as its options say: the ``Plan`` of a
    dry run, the ``InvocationResult`` of a run, or 2 after a one-line error. ``experiment`` names
    the experiment in the invocation record (``<prefix>/.marin/invocations``).

    The steps were walked once (``invocation.order``); the overrides are applied to that
    walk, and the result hashed once into the ``StepGraph`` that is planned and run."""
    from rich.console import Console

    from marin.execution.frontend.render import print_plan, print_result

    options = invocation.options
    description = invocation.experiment.description
    out = Console(stderr=options.json)
    if not out.is_terminal:
        out.width = 160  # tables in logs and pipes keep their columns
    _configure_logging(out)
    try:
        with gc_paused():
            prefix = resolve_prefix(options.prefix)
            order = apply_overrides(invocation.order, invocation.overrides, prefix)
            executor = Executor(prefix, options.max_concurrent,
                                options.backend, lease_ttl=options.lease_ttl,
                                runner_options=options.runner_options, pack=options.pack)
            for warning in executor.prefix_warnings():
                out.print(f"[yellow]warning:[/] {warning}", highlight=False, soft_wrap=True)
            graph = StepGraph.from_order(order, executor.prefix)
            if options.dry_run:
                plan = executor.plan(graph, options.run_only, options.force_run_failed,
                                     force_run=options.force_run)
                _spell_plan(plan, style)
                packs = plan_packs(plan, options.pack)
                if options.json:
                    print(dumps_report({**plan.to_json(), "packs": [
                        [e.node.key for e in pack] for pack in packs]}))
                else:
                    if description:
                        out.print(f"[bold]{description}[/]")
                    print_plan(plan, out, options.show_skipped, show_all=options.all,
                               packs=packs)
                    _after(invocation, plan)
                return plan
        refusal = _preflight(invocation)
        if refusal:
            _print_error(style.spell(refusal))
            return 2
        if description and not options.json:
            out.print(f"[bold]{description}[/]")
        from marin.execution.progress import SilentProgress, progress_for

        progress = SilentProgress() if options.json and not out.is_terminal else \
            progress_for(out)
        with _stdout_to_stderr(options.json), signals_interrupt():
            result = executor.run(graph, options.run_only, options.force_run_failed, progress,
                                  force_run=options.force_run,
                                  experiment=experiment_id(experiment, invocation.experiment,
                                                           invocation.experiment_options))
    except BrokenPipeError:
        raise  # the reader went away (``| head``): not a configuration error
    except (UnhashableConfigError, StepGraphError, OverrideError, StorageError,
            ValueError, ConnectionError) as e:
        _print_error(style.spell(one_line(e)))
        return 2
    _spell_plan(result.plan, style)
    result.steps = [dataclasses.replace(step, error=style.spell(step.error)) if step.error
                    else step for step in result.steps]
    if options.json:
        print(dumps_report({"plan": result.plan.to_json(), "result": result.to_json()}))
    else:
        print_result(result, out)
        _after(invocation, result)
    return result


def _preflight(invocation: Invocation) -> str | None:
    """The experiment's refusal of a real invocation, if it declares a preflight (never called
    for a dry run or ``--help``)."""
    hook = invocation.experiment.preflight
    return hook(invocation.experiment_options, invocation.options) if hook else None


def _after(invocation: Invocation, result: Any) -> None:
    hook = invocation.experiment.after
    if hook is not None:
        hook(result, invocation.experiment_options)


def _spell_plan(plan: Plan, style: Style) -> None:
    """The plan's reasons in the user's spelling of the options they name."""
    for entry in plan.entries:
        if "`" in entry.reason:
            entry.reason = style.spell(entry.reason)


def _print_error(message: str) -> None:
    from rich.console import Console

    Console(stderr=True).print(f"[bold red]error:[/] {message}", highlight=False,
                               soft_wrap=True)


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
    _print_error(message)
    sys.exit(2)
