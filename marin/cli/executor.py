"""The ``marin executor`` command: plan or run an experiment's steps.

    marin executor --dry-run experiments/isoflop_3e19.py
    marin executor --prefix gs://bucket/x --max-concurrent 4 experiments.tiny --json
    marin executor experiments/tiny.py --help          # the experiment's options too

The same parsing and running as ``python EXPERIMENT.py``
(``marin.execution.frontend.command_line``), spelled with dashes.
"""

from __future__ import annotations

import argparse
import os
import sys

from marin.cli.console import error, say

__all__ = ["exit_at_once", "register"]


def register(sub: argparse._SubParsersAction) -> None:
    ex = sub.add_parser("executor", help="plan or run an experiment's steps", add_help=False,
                        description="Plan (--dry-run) or run the steps of an experiment file "
                        "or module. The experiment's own options and --STEP.FIELD VALUE "
                        "overrides of step configs go after the experiment (marin executor "
                        "EXPERIMENT --help lists them). A runner's own options are "
                        "--BACKEND-KEY VALUE (--ray-address HOST:PORT) or --runner-option "
                        "KEY=VALUE.")
    ex.add_argument("experiment", nargs="?", help="path to an experiment file, or a module name")
    ex.add_argument("-h", "--help", action="store_true", help="show this help (with an "
                    "EXPERIMENT: its options and overrides too) and exit")
    from marin.execution.frontend.options import add_options

    add_options(ex, positionals=True)  # the fields of ExecutorMainConfig, both spellings
    ex.set_defaults(handler=_executor, help_parser=ex)


def _executor(args: argparse.Namespace, extra: list[str]) -> int:
    """``marin executor``: the experiment's declaration, then the same parsing and running
    as ``python EXPERIMENT.py`` (``marin.execution.frontend.command_line``), spelled with dashes."""

    from marin.execution.executor import gc_paused
    from marin.execution.experiments import (
        ExperimentError,
        experiment_of_module,
        find_experiments,
        load_experiment,
    )
    from marin.execution.frontend.command_line import (
        HelpRequested,
        Style,
        UsageError,
        parse_invocation,
    )
    from marin.execution.frontend.executor_main import exit_code, run_invocation

    if not args.experiment:
        if args.help:
            args.help_parser.print_help()
            return 0
        found = find_experiments()
        listing = "\n".join(f"  {p}" for p in found) or "  (none under ./experiments)"
        say("marin executor needs an EXPERIMENT (a file or module). Experiments "
            f"found:\n{listing}", stderr=True)
        return 2
    try:
        with gc_paused():  # the experiment's steps, then the one walk over their configs
            experiment = experiment_of_module(load_experiment(args.experiment))
            invocation = parse_invocation(experiment, args.raw, Style.CLI,
                                          prog="marin executor", positional="experiment")
    except HelpRequested as h:
        sys.stdout.write(h.text)
        return 0
    except ExperimentError as e:
        return error(_misplaced_experiment(args.experiment, extra) or str(e))
    except UsageError as e:
        return error(str(e))
    global exit_at_once
    exit_at_once = invocation.options.dry_run
    return exit_code(run_invocation(invocation, args.experiment, Style.CLI))


def _misplaced_experiment(taken: str, extra: list[str]) -> str | None:
    """When an override's value was read as the experiment (``--STEP.field VALUE`` written
    before it), the message names the experiment file that came later and the right order.
    Only for a name that is no file at all; an experiment given as a module name later on
    is not recognised, and the plain error stands."""
    if os.path.exists(taken):
        return None
    later = next((a for a in extra if a.endswith(".py") and os.path.isfile(a)), None)
    if later is None:
        return None
    return (f"{taken!r} was read as the experiment, but {later} comes later: overrides "
            "(--STEP.field VALUE) go after the experiment, as in marin executor OPTIONS "
            f"{later} OVERRIDES")


exit_at_once = False  # set by a dry run: nothing is left to finish at exit
