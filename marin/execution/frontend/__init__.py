"""The executor's front end: the command line of an experiment, parsed, run and printed.

    from marin.execution.frontend import Style, executor_main, parse_invocation

    invocation = parse_invocation(experiment, ["--dry-run"], Style.DRACCUS)
    executor_main([train])          # python experiments/x.py [--dry-run] [--STEP.FIELD V]

``options`` (``ExecutorMainConfig``, the executor's options, defined once), ``arguments``
(a parser generated from frozen dataclasses), ``command_line`` (the executor's options, the
experiment's and ``--STEP.FIELD`` overrides, parsed into one ``Invocation``),
``executor_main`` (the entry of an experiment file, and the exit status) and ``render`` (plans
and results, for people and for scripts). The front end builds on the core; the core
(``Executor``, planning, the graph) imports none of it and takes a built graph and typed
values.
"""

from marin.execution.frontend.command_line import Invocation, Style, parse_invocation
from marin.execution.frontend.executor_main import executor_main
from marin.execution.frontend.options import ExecutorMainConfig

__all__ = ["ExecutorMainConfig", "Invocation", "Style", "executor_main", "parse_invocation"]
