"""Finding and loading experiment files.

    module = load_experiment("experiments/isoflop_3e19.py")   # or "experiments.isoflop_3e19"
    steps = steps_of(module)

An experiment is a Python file or module with a module-level ``steps`` list, or a function
``steps()`` that returns one. A step built with a name or sub-path that cannot be a path
under the prefix (``ExecutorStep("..", ...)``, ``this_output_path("../x")``) is reported as
one line naming the file and line that built it.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import traceback
from pathlib import Path
from types import ModuleType, TracebackType

from marin.execution.step import ExecutorStep, StepDefinitionError

#: Experiment files are loaded as modules named with this prefix and the file's stem.
EXPERIMENT_MODULE_PREFIX = "marin_experiment_"


class ExperimentError(ValueError):
    """The experiment cannot be found or does not define steps."""


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
