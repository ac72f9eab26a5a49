"""The layering of marin's packages, checked statically over the source (``ast``).

- ``marin/execution`` (the executor core) imports no ML library (jax, haliax, optax,
  equinox, levanter, numpy, torch, transformers), and nothing from the packages that build on
  it: ``marin.services``, ``training``, ``models``, ``scaling_laws``, ``processing``,
  ``inference``, ``profiling``, ``dashboard``, ``hardware``.
- No library module imports the command line (the ``marin.cli`` package): every module of
  ``marin`` outside ``marin/cli`` is checked.
- No module of ``marin`` imports a plugin's package (``marin_ray``, ``marin_gcs``...): core
  reaches plugins only through entry points.
- ``marin.registry`` (the entry-point registry every layer uses) imports no module of marin.
- Only ``marin/storage`` imports fsspec: every other module reads and writes through
  ``marin.storage.files`` (``open_url``, ``atomic_write``, ``url_to_fs``...).
- ``marin.models`` <- ``marin.training`` <- ``marin.scaling_laws``: models import neither,
  and the trainer does not import the scaling laws.
- The executor's core (``marin/execution`` but ``frontend/``, ``gc/`` and the ``__init__``
  that re-exports ``executor_main``) imports neither sub-package: the front end parses and
  spells, the core takes a built graph and typed values; gc builds on the core's records.
- ``docs/design.md``'s chart (``package: may import a, b``) names every package of marin,
  and allows every import between them.
- No import cycles between packages, nor between the modules of one package.

Every import counts, also one inside a function: a lazy import is still a dependency.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.doc_examples import sample_output
from tests.helpers.imports import MARIN, _py, imports_of, module_name, violations

ML_LIBRARIES = {"jax", "jaxlib", "haliax", "optax", "equinox", "levanter", "numpy", "torch",
                "transformers", "flax"}
ABOVE_CORE = {f"marin.{p}" for p in ("services", "training", "models", "scaling_laws",
                                     "processing", "inference", "profiling", "dashboard",
                                     "hardware")}
COMMAND_LINE = {"marin.cli"}
IO_LIBRARIES = {"fsspec", "gcsfs", "s3fs"}


def plugin_packages() -> set[str]:
    """The import packages of the plugin distributions in this repository."""
    return {init.parent.name for init in (ROOT / "plugins").glob("**/*/__init__.py")
            if (init.parent.parent / "pyproject.toml").exists()}


def test_the_executor_core_imports_no_ml_library_and_nothing_built_on_it():
    assert violations(_py(MARIN / "execution"), ROOT, ML_LIBRARIES | ABOVE_CORE) == []


def test_no_library_module_imports_the_command_line():
    library = [f for f in _py(MARIN) if MARIN / "cli" not in f.parents]
    assert MARIN / "services" / "serve.py" in library and MARIN / "cli" / "gc.py" not in library
    assert violations(library, ROOT, COMMAND_LINE) == []


def test_core_reaches_plugins_only_through_entry_points():
    plugins = plugin_packages()
    assert {"marin_ray", "marin_gcs", "marin_s3"} <= plugins
    assert violations(_py(MARIN), ROOT, plugins) == []


def test_the_registry_imports_no_module_of_marin():
    registry = MARIN / "registry.py"
    assert imports_of(registry, ROOT)  # the check reads its imports at all
    assert violations([registry], ROOT, {"marin"}) == []


def test_only_the_storage_layer_imports_fsspec():
    outside = [f for f in _py(MARIN) if MARIN / "storage" not in f.parents]
    assert violations(outside, ROOT, IO_LIBRARIES) == []


LOWER_LAYERS = {"marin.models": {"marin.training", "marin.scaling_laws"},
                "marin.training": {"marin.scaling_laws"}}
EXECUTION = MARIN / "execution"
FRONT_END, GC = {"marin.execution.frontend"}, {"marin.execution.gc"}
CORE = [f for f in _py(EXECUTION) if f != EXECUTION / "__init__.py"
        and not {EXECUTION / "frontend", EXECUTION / "gc"} & set(f.parents)]


@pytest.mark.parametrize("package, above", sorted(LOWER_LAYERS.items()))
def test_lower_layers_import_nothing_above_them(package, above):
    folder = MARIN / package.split(".")[1]
    found = violations(_py(folder), ROOT, above)
    assert found == []


def test_the_executor_core_imports_neither_its_front_end_nor_gc():
    assert {EXECUTION / "executor.py", EXECUTION / "runners" / "base.py"} <= set(CORE)
    assert not {EXECUTION / "gc" / "scan.py", EXECUTION / "frontend" / "render.py"} & set(CORE)
    assert violations(CORE, ROOT, FRONT_END | GC) == []


def import_graph(files: list[Path], root: Path) -> dict[str, set[str]]:
    """Module -> the modules of ``files`` it imports (a name imported from a module counts
    as that module)."""
    modules = {module_name(f, root): f for f in files}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        for _, imported in imports_of(path, root):
            while imported and imported not in modules:
                imported = imported.rpartition(".")[0]
            if imported and imported != name:
                graph[name].add(imported)
    return graph


def package_of(module: str, files: dict[str, Path]) -> str:
    return module if files[module].name == "__init__.py" else module.rpartition(".")[0]


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def module_cycles(files: list[Path], root: Path) -> tuple[list[list[str]], list[list[str]]]:
    """Cycles between packages, and cycles between modules of one package (a package's
    ``__init__`` re-exports its modules and is left out of the second)."""
    by_name = {module_name(f, root): f for f in files}
    graph = import_graph(files, root)
    packages: dict[str, set[str]] = {}
    within: dict[str, set[str]] = {m: set() for m in graph}
    for module, imported in graph.items():
        mine = package_of(module, by_name)
        for other in imported:
            theirs = package_of(other, by_name)
            nested = theirs.startswith(f"{mine}.") or mine.startswith(f"{theirs}.")
            if mine != theirs and not nested:
                packages.setdefault(mine, set()).add(theirs)
                packages.setdefault(theirs, set())
            elif mine == theirs and "__init__.py" not in (by_name[module].name,
                                                           by_name[other].name):
                within[module].add(other)
    return cycles(packages), cycles(within)


# Cycles not broken yet; each is named, so that a new cycle, or a named one that grows,
# still fails (remove an entry when its cycle is broken).
KNOWN_CYCLES: set[tuple[str, ...]] = set()
KNOWN_PACKAGE_CYCLES: set[tuple[str, ...]] = set()


def test_no_import_cycles_between_packages():
    between, _ = module_cycles(_py(MARIN), ROOT)
    assert [c for c in between if tuple(c) not in KNOWN_PACKAGE_CYCLES] == []


def test_no_import_cycles_between_the_modules_of_a_package():
    _, within = module_cycles(_py(MARIN), ROOT)
    assert [c for c in within if tuple(c) not in KNOWN_CYCLES] == []


def test_the_cycle_check_finds_cycles_of_each_kind(tmp_path: Path):
    files = {"marin/a/__init__.py": "", "marin/a/x.py": "from marin.a import y\n",
             "marin/a/y.py": "def f():\n    from marin.a.x import g\n",
             "marin/b/__init__.py": "from marin.c.z import h\n",
             "marin/c/__init__.py": "", "marin/c/z.py": "import marin.b\n",
             "marin/c/ok.py": "from marin.a import x\n"}
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    between, within = module_cycles(sorted(tmp_path.rglob("*.py")), tmp_path)
    assert between == [["marin.b", "marin.c"]]
    assert within == [["marin.a.x", "marin.a.y"]]


@pytest.mark.parametrize("source, forbidden, expected", [
    ("import jax.numpy as jnp\n", ML_LIBRARIES, "imports jax.numpy"),
    ("def f():\n    from marin.services.kv_service.step_states import publishing\n", ABOVE_CORE,
     "imports marin.services.kv_service.step_states"),
    ("from marin import cli\n", COMMAND_LINE, "imports marin.cli"),
    ("from marin.cli.console import error\n", COMMAND_LINE, "imports marin.cli.console"),
    ("from ..services import kv_client\n", ABOVE_CORE, "imports marin.services"),
    ("import marin_ray\n", {"marin_ray"}, "imports marin_ray"),
    ("def f():\n    import fsspec.core\n", IO_LIBRARIES, "imports fsspec.core"),
    ("from fsspec.asyn import sync\n", IO_LIBRARIES, "imports fsspec.asyn"),
    ("from marin.execution.frontend.render import print_plan\n", FRONT_END,
     "imports marin.execution.frontend.render"),
    ("from marin.execution import gc\n", GC, "imports marin.execution.gc"),
])
def test_the_check_finds_each_kind_of_violation(tmp_path: Path, source, forbidden, expected):
    module = tmp_path / "marin" / "execution" / "bad.py"
    module.parent.mkdir(parents=True)
    module.write_text(source)
    found = violations([module], tmp_path, forbidden)
    assert len(found) >= 1 and expected in found[0] and found[0].startswith(
        "marin/execution/bad.py:"), found


def test_allowed_imports_are_not_flagged(tmp_path: Path):
    module = tmp_path / "marin" / "execution" / "ok.py"
    module.parent.mkdir(parents=True)
    module.write_text("import json\nfrom marin.storage import get_storage\n"
                      "from . import graph\nimport marin_rayish\n")
    assert violations([module], tmp_path, ML_LIBRARIES | ABOVE_CORE | {"marin_ray"}) == []


def test_importing_the_trainer_loads_no_service_client_library():
    """The trainer logs through ``logging``; gRPC and pydantic (the log service's client)
    load only when a log handler is made. Modules JAX itself loads are left out."""
    import subprocess
    import sys

    code = ("import sys, jax\nbefore = set(sys.modules)\nimport marin.training.trainer\n"
            "print(' '.join(sorted({m.split('.')[0] for m in set(sys.modules) - before})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT).stdout.split()
    assert "marin" in out  # the check sees what the import loaded
    assert {"grpc", "pydantic", "zstandard"} & set(out) == set(), out


DESIGN = ROOT / "docs" / "design.md"


def parse_chart(lines: list[str], where: str) -> dict[str, frozenset[str]]:
    """``package: may import a, b`` per line -> {package: what it may import}."""
    chart: dict[str, frozenset[str]] = {}
    for number, line in enumerate(lines, 1):
        name, colon, rest = line.partition(":")
        if not line.strip():
            continue
        if not colon or not name.strip() or name.strip() in chart:
            raise ValueError(f"{where}: chart line {number} {line!r}: expected one line "
                             f"'package: may import a, b' per package")
        chart[name.strip()] = frozenset(p.strip() for p in rest.split(",") if p.strip())
    unknown = sorted({p for named in chart.values() for p in named} - set(chart))
    if unknown:
        raise ValueError(f"{where}: the chart lets packages import {', '.join(unknown)}, "
                         f"which have no line of their own; add one")
    return chart


def marin_packages(marin: Path) -> set[str]:
    """The folders of ``marin/`` that are packages, and the modules beside them."""
    return {p.stem for p in marin.iterdir() if (p / "__init__.py").exists()
            or (p.suffix == ".py" and p.name != "__init__.py")}


def package_in_chart(module: str, chart: dict[str, frozenset[str]]) -> str | None:
    """The chart's package that holds ``module`` (its longest line that does, else the
    folder of ``marin/``); None for ``marin`` itself and for other distributions."""
    parts = module.split(".")
    if parts[0] != "marin" or len(parts) == 1:
        return None
    return next((".".join(parts[1:end]) for end in range(len(parts), 1, -1)
                 if ".".join(parts[1:end]) in chart), parts[1])


def chart_violations(files: list[Path], root: Path, chart: dict[str, frozenset[str]]
                     ) -> list[str]:
    """Packages of ``files`` the chart leaves out, and imports between packages it does not
    allow (a package's ``__init__`` may import its own sub-packages)."""
    found = [f"marin/{p}: a package of marin that the chart leaves out" for p in
             sorted(marin_packages(root / "marin") - set(chart))]
    stale = [p for p in chart if not (root / "marin" / p.replace(".", "/")).is_dir()
             and not (root / "marin" / f"{p}.py").exists()]
    found += [f"{p}: in the chart, but no package of marin" for p in stale]
    for f in files:
        mine, bad = package_in_chart(module_name(f, root), chart), {}
        for line, name in imports_of(f, root):
            theirs = package_in_chart(name, chart)
            reexport = f.name == "__init__.py" and f"{theirs}".startswith(f"{mine}.")
            if theirs and mine in chart and theirs not in chart[mine] | {mine} and not reexport:
                bad.setdefault((line, theirs), name)  # one per package an import names
        allowed = ", ".join(sorted(chart.get(mine, ()))) or "no package of marin"
        found += [f"{f.relative_to(root)}:{line} imports {name}: the chart lets {mine} import "
                  f"{allowed}" for (line, _), name in bad.items()]
    return found


def test_design_md_charts_every_package_and_every_import_between_them():
    chart = parse_chart(sample_output(DESIGN, "tests/test_layering.py"), "docs/design.md")
    assert {"execution", "execution.gc", "execution.frontend", "trackers"} <= set(chart)
    assert chart_violations(_py(MARIN), ROOT, chart) == []


CHART = ["registry:", "a: registry", "a.sub: a", "b: a.sub", ""]


@pytest.mark.parametrize("path, source, expected", [
    ("marin/a/x.py", "from marin.b import y\n",
     "marin/a/x.py:1 imports marin.b: the chart lets a import registry"),
    ("marin/a/x.py", "def f():\n    import marin.a.sub.z\n", "x.py:2 imports marin.a.sub.z"),
    ("marin/a/sub/z.py", "from marin import registry\n", "the chart lets a.sub import a"),
    ("marin/b/__init__.py", "from ..a import sub\n", "marin/b/__init__.py:1 imports marin.a: "),
    ("marin/c.py", "", "marin/c: a package of marin that the chart leaves out"),
])
def test_the_chart_check_finds_what_the_chart_forbids(tmp_path: Path, path, source, expected):
    files = {"marin/__init__.py": "", "marin/registry.py": "import json\n",
             "marin/a/__init__.py": "from marin.a.sub import z\n", "marin/a/sub/__init__.py": "",
             "marin/a/sub/z.py": "from marin.a import x\n", "marin/b/__init__.py": "",
             "marin/a/x.py": "from marin import registry\n",
             "marin/b/y.py": "from marin.a.sub import z\nimport marin\nimport marin_ray\n"}
    for name, text in {**files, path: source}.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    found = chart_violations(sorted(tmp_path.rglob("*.py")), tmp_path, parse_chart(CHART, "c"))
    assert len(found) == 1 and expected in found[0], found


def test_files_the_chart_allows_and_charts_that_do_not_parse(tmp_path: Path):
    (tmp_path / "marin" / "a").mkdir(parents=True)
    (tmp_path / "marin" / "a" / "__init__.py").write_text("from marin import registry\n")
    (tmp_path / "marin" / "registry.py").write_text("")
    chart = parse_chart(["registry:", "a: registry", "gone: a"], "chart")
    assert chart_violations(_py(tmp_path / "marin"), tmp_path, chart) == [
        "gone: in the chart, but no package of marin"]
    with pytest.raises(ValueError, match="chart line 2 'a registry': expected one line"):
        parse_chart(["registry:", "a registry"], "docs/design.md")
    with pytest.raises(ValueError, match="chart line 2 'a: x'"):
        parse_chart(["a: b", "a: x", "b:"], "docs/design.md")
    with pytest.raises(ValueError, match="import storage, which have no line of their own"):
        parse_chart(["a: storage"], "docs/design.md")
