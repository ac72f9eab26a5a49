"""The layers of ``marin.scaling_laws`` and marin's value types, checked over the source.

- The fitted values (``values``, ``loss_to_loss_values``, the study's ``laws``) import no
  numerical library at module level (their numeric methods import it when called).
- No module outside ``scaling_laws/study`` imports the study (the readers of run data, the
  fits and the values sit below it).
- No two dataclasses of ``marin`` share their fields (a twin of a value type), and the fits
  return the value types themselves.

The imports are read as ``tests/test_layering.py`` reads them (every import counts).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT
from tests.helpers.imports import MARIN, _py, _within, imports_of, module_name, violations

SCALING_LAWS = MARIN / "scaling_laws"
STUDY = "marin.scaling_laws.study"
VALUE_MODULES = [SCALING_LAWS / "values.py", SCALING_LAWS / "loss_to_loss_values.py",
                 SCALING_LAWS / "study" / "laws.py"]
NUMERICAL = {"numpy", "scipy", "matplotlib", "plotly", "pyarrow", "threadpoolctl"}


def module_level_imports(path: Path, root: Path) -> list[tuple[int, str]]:
    """The imports ``path`` makes when it is imported: those outside functions and outside
    ``if TYPE_CHECKING:`` blocks."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    lazy: set[int] = set()
    for node in ast.walk(tree):
        checking = isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) or checking:
            lazy |= {id(n) for n in ast.walk(node) if n is not node or not checking}
    eager = {n.lineno for n in ast.walk(tree)
             if isinstance(n, (ast.Import, ast.ImportFrom)) and id(n) not in lazy}
    return [(line, name) for line, name in imports_of(path, root) if line in eager]


def test_the_fitted_values_import_no_numerical_library_when_imported():
    found = [f"{f.relative_to(ROOT)}:{line} imports {name}" for f in VALUE_MODULES
             for line, name in module_level_imports(f, ROOT) if _within(name, NUMERICAL)]
    assert found == []
    code = ("import sys\nimport marin.scaling_laws.values, marin.scaling_laws.rows, "
            "marin.scaling_laws.codec, marin.scaling_laws.loss_to_loss_values\n"
            "print(' '.join(sorted(m.split('.')[0] for m in sys.modules)))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True, cwd=ROOT).stdout.split()
    assert "marin" in loaded and NUMERICAL & set(loaded) == set()


def test_nothing_outside_the_study_imports_it():
    outside = [f for f in _py(SCALING_LAWS) if SCALING_LAWS / "study" not in f.parents]
    assert SCALING_LAWS / "run_readers.py" in outside and SCALING_LAWS / "results.py" in outside
    assert violations(outside, ROOT, {STUDY}) == []


def dataclass_fields(files: list[Path], root: Path) -> dict[tuple[str, ...], list[str]]:
    """The field names of every dataclass of ``files`` (three or more fields), each with
    the classes that declare exactly those fields."""
    found: dict[tuple[str, ...], list[str]] = {}
    for path in files:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef) or not any(
                    "dataclass" in ast.unparse(d) for d in node.decorator_list):
                continue
            names = tuple(s.target.id for s in node.body if isinstance(s, ast.AnnAssign)
                          and isinstance(s.target, ast.Name)
                          and "ClassVar" not in ast.unparse(s.annotation))
            if len(names) >= 3:
                found.setdefault(names, []).append(
                    f"{module_name(path, root)}.{node.name}")
    return found


def test_no_two_dataclasses_share_their_fields():
    twins = {k: v for k, v in dataclass_fields(_py(MARIN), ROOT).items() if len(v) > 1}
    assert twins == {}


VALUE_TYPES = {"RunRow", "BudgetOptimum", "PowerLaw", "Approach3"}
LOSS_TO_LOSS = {"LossToLoss", "LossToLossPrediction"}
OLDER_NAMES = {"RunRecord", "BudgetFit", "ScalingFit", "ParametricFit"}
FITS = {"isoflop_analysis.py": {"fit_budget": "BudgetOptimum", "fit_power_law": "PowerLaw"},
        "parametric.py": {"fit_parametric_loss": "Approach3"},
        "loss_to_loss.py": {"fit_loss_to_loss": "LossToLoss", "fit_test_to_test": "LossToLoss",
                            "fit_train_to_train": "LossToLoss"}}


def test_each_value_type_is_defined_once_and_the_fits_return_it():
    classes = {f"{module_name(f, ROOT)}.{n.name}" for f in _py(MARIN)
               for n in ast.walk(ast.parse(f.read_text(encoding="utf-8")))
               if isinstance(n, ast.ClassDef)
               and n.name in VALUE_TYPES | OLDER_NAMES | LOSS_TO_LOSS}
    assert classes == {f"marin.scaling_laws.values.{n}" for n in VALUE_TYPES} | {
        f"marin.scaling_laws.loss_to_loss_values.{n}" for n in LOSS_TO_LOSS}
    for name, returns in FITS.items():
        tree = ast.parse((SCALING_LAWS / name).read_text(encoding="utf-8"))
        found = {n.name: ast.unparse(n.returns) for n in tree.body
                 if isinstance(n, ast.FunctionDef) and n.name in returns}
        assert found == returns, name
    from marin.scaling_laws import isoflop_analysis, parametric, values

    assert (isoflop_analysis.RunRecord, isoflop_analysis.BudgetFit, isoflop_analysis.ScalingFit,
            parametric.ParametricFit) == (values.RunRow, values.BudgetOptimum, values.PowerLaw,
                                          values.Approach3)


def test_the_scaling_law_checks_find_what_they_forbid(tmp_path: Path):
    files = {"marin/v.py": "from __future__ import annotations\nimport math\n"
                           "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                           "    import numpy\nimport scipy.optimize\n"
                           "def f():\n    import numpy as np\n",
             "marin/a.py": "from dataclasses import dataclass\n@dataclass(frozen=True)\n"
                           "class Fit:\n    a: float\n    b: float\n    c: float\n",
             "marin/b.py": "import dataclasses\n@dataclasses.dataclass\nclass Law:\n"
                           "    a: float\n    b: float\n    c: float = 0.0\n"
                           "class Plain:\n    a: float\n    b: float\n    c: float\n"}
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    eager = module_level_imports(tmp_path / "marin" / "v.py", tmp_path)
    assert [name for _, name in eager if not name.startswith("__future__")] == [
        "math", "typing", "typing.TYPE_CHECKING", "scipy.optimize"]
    twins = dataclass_fields(sorted(tmp_path.rglob("*.py")), tmp_path)
    assert twins == {("a", "b", "c"): ["marin.a.Fit", "marin.b.Law"]}
