"""An experiment's command line: the executor's options, the experiment's, and overrides.

    invocation = parse_invocation(experiment, ["--dry-run", "--hardware", "tpu-v5p",
                                               "--fit/zipf.top_k", "500"], Style.DRACCUS)
    invocation.options.dry_run                # True (ExecutorMainConfig)
    invocation.experiment_options.hardware    # "tpu-v5p" (the experiment's dataclass)
    invocation.overrides                      # {"fit/zipf.top_k": "500"}

Both front ends (``python EXP.py`` through ``executor_main``, and ``marin executor EXP``)
parse here, with one parser generated from ``ExecutorMainConfig`` and the experiment's
options class (``marin.execution.frontend.arguments``); ``--help`` (``HelpRequested``) lists both,
and how to override a step's field with an example taken from the experiment's steps.
``Style`` spells option names the way the user's front end does: the core's messages name
an option's field in backquotes (`` `run_only` ``), and ``Style.spell`` turns that into
``--run_only`` or ``--run-only``.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from marin.execution.errors import one_line
from marin.execution.experiments import Experiment, ExperimentError
from marin.execution.frontend.arguments import (
    CONFIG_PATH,
    OptionsError,
    add_config_path,
    add_fields,
    given,
    load_config_file,
)
from marin.execution.frontend.options import (
    ExecutorMainConfig,
    RaisingParser,
    add_options,
    normalize,
    options_from,
)
from marin.execution.graph import StepGraphError, StepOrder
from marin.execution.overrides import OverrideError, split_override_args
from marin.execution.step import ExecutorStep, OutputPathOf, ThisOutputPath

__all__ = ["HelpRequested", "Invocation", "Style", "UsageError", "parse_invocation"]


class UsageError(ValueError):
    """A bad command line or experiment declaration, in one line (exit status 2)."""


class HelpRequested(Exception):
    """``--help`` was given; ``text`` is the help."""

    def __init__(self, text: str):
        super().__init__(text)
        self.text = text


class Style(enum.Enum):
    """How the user's front end spells options: ``--run_only`` or ``--run-only``."""

    DRACCUS = "_"
    CLI = "-"

    def flag(self, field: str) -> str:
        return "--" + field.replace("_", self.value)

    def spell(self, text: str) -> str:
        """``text`` with each backquoted option field spelled as this front end's flag."""
        negated = "--no-retry-failed was given" if self is Style.CLI \
            else f"{self.flag('force_run_failed')} is false"
        text = text.replace("`force_run_failed` is false", negated)
        return _FIELD.sub(lambda m: self.flag(m.group(1)), text)


_FIELD = re.compile(r"`([a-z][a-z0-9_]*)`")


@dataclass(frozen=True)
class Invocation:
    """What a command line asks of an experiment."""

    experiment: Experiment
    options: ExecutorMainConfig
    experiment_options: Any
    order: StepOrder
    overrides: dict[str, str]


def parse_invocation(experiment: Experiment, args: Sequence[str], style: Style,
                     prog: str | None = None, positional: str | None = None) -> Invocation:
    """Parse ``args`` for ``experiment``. ``positional``: the command's positional argument
    (``marin executor``'s experiment), which makes list options take one value per use.
    Raises ``HelpRequested`` for ``--help``/``-h`` and ``UsageError`` for a bad line."""
    cls = experiment.options
    _check_names(cls)
    parser = _parser(cls, prog, positional)
    args = list(args)
    if "-h" in args or "--help" in args:
        raise HelpRequested(help_text(experiment, parser))
    extra = (cls,) if cls is not None else ()
    try:
        namespace, unknown = parser.parse_known_args(
            normalize(args, positionals=positional is not None, extra=extra))
        bases = [{}, {}]
        if getattr(namespace, CONFIG_PATH, None):
            bases = [*load_config_file(namespace.config_path, [ExecutorMainConfig, *extra]),
                     {}]
        options, rest = options_from(namespace, unknown, base=bases[0])
        values = {**bases[1], **given(namespace, cls)} if cls is not None else {}
        experiment_options = cls(**values) if cls is not None else None
    except OptionsError as e:
        raise UsageError(str(e)) from None
    except (TypeError, ValueError) as e:  # the options class refused a value
        raise UsageError(f"{cls.__name__ if cls else 'options'}: {one_line(e)}") from None
    try:
        steps = experiment.build(experiment_options)
        order = StepOrder.of(steps)  # the one walk over the steps' configs
        overrides, rest = split_override_args(rest, order.names)
    except (ExperimentError, OverrideError, StepGraphError, TypeError, ValueError,
            LookupError) as e:
        raise UsageError(one_line(e)) from None
    if rest:
        raise UsageError(f"unrecognized arguments: {' '.join(rest)} (see --help; overrides "
                         "look like --STEP_NAME.field value)")
    return Invocation(experiment, options, experiment_options, order, overrides)


def _check_names(cls: type | None) -> None:
    if cls is None:
        return
    taken = {f.name for f in dataclasses.fields(ExecutorMainConfig)} | {CONFIG_PATH,
                                                                          "runner_option"}
    clash = sorted(taken & {f.name for f in dataclasses.fields(cls)})
    if clash:
        raise UsageError(f"{cls.__name__}.{clash[0]}: the executor has an option of that "
                         "name; rename the experiment's field")


def _parser(cls: type | None, prog: str | None, positional: str | None
            ) -> argparse.ArgumentParser:
    parser = RaisingParser(prog=prog, add_help=False, allow_abbrev=False,
                           formatter_class=argparse.RawDescriptionHelpFormatter,
                           description="Plan (--dry-run) or run this experiment's steps.")
    if positional:
        parser.add_argument(positional, help="path to an experiment file, or a module name")
    parser.add_argument("-h", "--help", action="store_true", help="show this help and exit")
    add_config_path(parser)
    add_options(parser.add_argument_group("executor options"),
                positionals=positional is not None)
    if cls is not None:
        add_fields(parser.add_argument_group(f"options of this experiment ({cls.__name__})"),
                   cls, positionals=positional is not None)
    return parser


def help_text(experiment: Experiment, parser: argparse.ArgumentParser) -> str:
    """The parser's help, then how to override a step's field, with an example."""
    lines = [parser.format_help().rstrip(), "", "step overrides:",
             "  --STEP.FIELD VALUE    set a field of a step's config (a new version of "
             "that step and of what depends on it)"]
    try:
        steps = experiment.build(experiment.default_options())
        example = override_example(StepOrder.of(steps).steps)
    except Exception:
        example = None
    if example:
        lines.append(f"  for example: {example}")
    if experiment.description:
        lines += ["", experiment.description]
    return "\n".join(lines) + "\n"


def override_example(steps: Sequence[ExecutorStep]) -> str | None:
    """``--STEP.FIELD VALUE`` for the last step with a plain (number, text, boolean) field."""
    for step in reversed(steps):
        config = step.config
        if not dataclasses.is_dataclass(config) or isinstance(config, type):
            continue
        for f in dataclasses.fields(config):
            value = getattr(config, f.name)
            if isinstance(value, (ThisOutputPath, OutputPathOf, ExecutorStep)):
                continue
            if isinstance(value, bool):
                return f"--{step.name}.{f.name} {str(value).lower()}"
            if isinstance(value, (int, float)) or (isinstance(value, str) and value
                                                   and " " not in value):
                return f"--{step.name}.{f.name} {value}"
    return None
