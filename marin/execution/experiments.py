"""Experiments: what one declares, and finding and loading experiment files.

    experiment = Experiment(build, options=StudyOptions, preflight=refusal,
                            description="an IsoFLOP sweep", after=print_study_summary)
    if __name__ == "__main__":
        executor_main(experiment)

    module = load_experiment("experiments/isoflop_3e19.py")   # or "experiments.isoflop_3e19"
    declared = experiment_of_module(module)                   # what `marin executor` runs
    experiment_id("experiments/isoflop_3e19.py", declared, options)   # for the record

An experiment is a Python file or module with a module-level ``experiment`` (an
``Experiment``), or a ``steps`` list (or a value holding its steps, as an IsoFLOP study
does), or a function ``steps()`` that returns one.
``Experiment`` is the one place an experiment declares its own options (a frozen dataclass
parsed with the executor's options, by the same rules), the ``steps`` built from them, a
``preflight`` that may refuse a real invocation in one line (never called for ``--help`` or a dry
run), and ``after``, called with the result (the run's, or the plan of a dry run) and the
options. A step built with a name or sub-path that cannot be a path
under the prefix (``ExecutorStep("..", ...)``, ``this_output_path("../x")``) is reported as
one line naming the file and line that built it.

An experiment's identity in its invocation records (``experiment_id``, which ``marin gc``
keeps the versions of) is its script's resolved path and its name: the file's stem or the
module's last part, followed by each of its own options given a value other than the
default. ``./train.py``, ``train.py`` and its absolute path are one experiment; two files
named ``train.py`` in two folders, or one sweep run with ``--budget=1e18`` and with
``--budget=3e18``, are two.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import importlib.util
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, is_dataclass
from pathlib import Path
from types import ModuleType, TracebackType
from typing import Any

from marin.execution.graph import StepCollection
from marin.execution.invocation_record import ExperimentId
from marin.execution.step import ExecutorStep, StepDefinitionError

__all__ = ["EXPERIMENT_MODULE_PREFIX", "Experiment", "ExperimentError", "experiment_id",
           "experiment_of_module", "find_experiments", "load_experiment", "steps_of"]

#: Experiment files are loaded as modules named with this prefix and the file's stem.
EXPERIMENT_MODULE_PREFIX = "marin_experiment_"


class ExperimentError(ValueError):
    """The experiment cannot be found or does not define steps."""


@dataclass(frozen=True)
class Experiment:
    """What an experiment declares.

    Attributes:
        steps: the steps (a list, or a ``StepCollection`` such as an IsoFLOP study), or a
            function of the options that builds them.
        options: a frozen dataclass of the experiment's own options (``--FIELD VALUE``).
        preflight: ``preflight(options, executor_options)`` before a real invocation: a one-line
            refusal, or None to go on.
        description: printed above the plan or the invocation's progress.
        after: ``after(result, options)`` once the plan or the invocation is done (not with
            ``--json``): the experiment's own report.
    """

    steps: (Sequence[ExecutorStep] | StepCollection
            | Callable[[Any], Sequence[ExecutorStep] | StepCollection])
    options: type | None = None
    preflight: Callable[[Any, Any], str | None] | None = None
    description: str | None = None
    after: Callable[[Any, Any], None] | None = None

    def __post_init__(self) -> None:
        if self.options is not None and not (isinstance(self.options, type)
                                             and is_dataclass(self.options)):
            raise ExperimentError(f"Experiment(options=...) must be a dataclass, got "
                                  f"{self.options!r}")

    def default_options(self) -> Any:
        return None if self.options is None else self.options()

    def build(self, options: Any) -> list[ExecutorStep]:
        """The steps for ``options``, checked to be steps."""
        steps = self.steps(options) if callable(self.steps) else self.steps
        return _checked_steps(steps, "steps")


def experiment_of_module(module: ModuleType) -> Experiment:
    """The module's ``experiment``, or an ``Experiment`` of its ``steps``."""
    declared = getattr(module, "experiment", None)
    if isinstance(declared, Experiment):
        return declared
    return Experiment(steps_of(module))


def experiment_id(label: str, experiment: Experiment, options: Any) -> ExperimentId:
    """Which experiment an invocation of ``label`` (a file's path as typed, or a module's name)
    with the experiment's ``options`` is: its script's resolved path and its name."""
    script = _script_of(label)
    base = Path(script).stem if script else label
    if script and base in ("__main__", "__init__"):  # a package: its folder
        base = Path(script).parent.name
    if script is None and "." in label and not label.endswith(".py"):
        base = label.rpartition(".")[2]
    return ExperimentId(label, script, base + _given_options(experiment, options))


def _script_of(label: str) -> str | None:
    module = sys.modules.get(label)
    path = getattr(module, "__file__", None)
    with contextlib.suppress(OSError):  # a label no file can have (too long): no script
        if path is None and Path(label).is_file():
            path = label
    if path is None:
        main = sys.modules.get("__main__")
        spec = getattr(main, "__spec__", None)
        if spec is not None and spec.name.removesuffix(".__main__") == label:
            path = getattr(main, "__file__", None)
    return os.path.realpath(path) if path else None


def _given_options(experiment: Experiment, options: Any) -> str:
    """`` --field=value`` for each of the experiment's options not at its default."""
    if options is None or not is_dataclass(options):
        return ""
    try:
        default = experiment.default_options()
    except (TypeError, ValueError):  # no defaults to compare with: every option is given
        default = None
    return "".join(f" --{f.name}={getattr(options, f.name)!r}"
                   for f in dataclasses.fields(options)
                   if default is None or getattr(options, f.name) != getattr(default, f.name))


def find_experiments(root: Path | None = None) -> list[Path]:
    """Experiment files under ``./experiments`` (files that call ``executor_main``)."""
    folder = (root or Path.cwd()) / "experiments"
    if not folder.is_dir():
        return []
    found = []
    for path in sorted(folder.rglob("*.py")):
        try:
            if "executor_main" in path.read_text(encoding="utf-8", errors="replace"):
                found.append(path)
        except OSError:
            continue
    return found


def load_experiment(spec: str) -> ModuleType:
    try:
        return _load(spec)
    except StepDefinitionError as e:
        raise ExperimentError(f"{_built_at(e.__traceback__) or spec}: {e}") from None


def _built_at(tb: TracebackType | None) -> str | None:
    """``file:line`` of the innermost frame outside marin itself: where the step was built."""
    where = None
    for frame, line in traceback.walk_tb(tb):
        name = frame.f_code.co_filename
        if not name.startswith((_MARIN_ROOT, "<")):  # "<string>": dataclass __init__
            where = f"{name}:{line}"
    return where


_MARIN_ROOT = str(Path(__file__).resolve().parent.parent) + os.sep


def _load(spec: str) -> ModuleType:
    path = Path(spec)
    if spec.endswith(".py") or path.exists():
        if not path.is_file():
            raise ExperimentError(f"experiment file {spec} does not exist{_known()}")
        return _load_file(path.resolve())
    cwd = os.getcwd()
    added = cwd not in sys.path and "" not in sys.path
    if added:  # the module form names modules of the current folder, as `python -m` does
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(spec)
    except ModuleNotFoundError as e:
        if e.name and spec.startswith(e.name):
            raise ExperimentError(f"no experiment file or module named {spec!r}{_known()}") from e
        raise
    finally:
        if added and cwd in sys.path:
            sys.path.remove(cwd)


def steps_of(module: ModuleType) -> list[ExecutorStep]:
    where = getattr(module, "__file__", module.__name__)
    steps = getattr(module, "steps", None)
    if steps is None:
        raise ExperimentError(f"{where} defines no `steps` (a list of ExecutorStep, or a "
                              "function returning one)")
    if callable(steps):
        steps = steps()
    return _checked_steps(steps, where)


def _checked_steps(steps: Any, where: str) -> list[ExecutorStep]:
    if not isinstance(steps, (list, tuple)) and isinstance(steps, StepCollection):
        steps = steps.steps  # a study, or any value holding its steps
    if not isinstance(steps, (list, tuple)):
        raise ExperimentError(f"{where}: `steps` must be a list of ExecutorStep, "
                              f"got {type(steps).__name__}")
    for i, step in enumerate(steps):
        if not isinstance(step, ExecutorStep):
            raise ExperimentError(f"{where}: steps[{i}] is a {type(step).__name__}, "
                                  "not an ExecutorStep")
    return list(steps)


def _load_file(path: Path) -> ModuleType:
    name = f"{EXPERIMENT_MODULE_PREFIX}{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ExperimentError(f"cannot import experiment file {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    folder = str(path.parent)
    sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(module)
    finally:
        if folder in sys.path:
            sys.path.remove(folder)
    return module


def _known() -> str:
    found = find_experiments()
    if not found:
        return " (no experiments found under ./experiments)"
    cwd = Path.cwd()
    return "; experiments found: " + ", ".join(str(p.relative_to(cwd)) for p in found)
