"""The layering of marin's packages, checked statically over the source (``ast``).

- ``marin/execution`` (the executor core) imports no ML library (jax, haliax, optax,
  equinox, levanter, numpy, torch, transformers), and nothing from the packages that build on
  it: ``marin.services``, ``training``, ``models``, ``scaling_laws``, ``processing``,
  ``inference``, ``profiling``, ``dashboard``, ``hardware``.
- No library module imports the command line (``marin.cli``, ``marin.commands``).
- No module of ``marin`` imports a plugin's package (``marin_ray``, ``marin_gcs``...): core
  reaches plugins only through entry points.
- ``marin.registry`` (the entry-point registry every layer uses) imports no module of marin.
- Only ``marin/storage`` imports fsspec: every other module reads and writes through
  ``marin.storage.files`` (``open_url``, ``atomic_write``, ``url_to_fs``...).

Every import counts, also one inside a function: a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import ROOT

MARIN = ROOT / "marin"

ML_LIBRARIES = {"jax", "jaxlib", "haliax", "optax", "equinox", "levanter", "numpy", "torch",
                "transformers", "flax"}
ABOVE_CORE = {f"marin.{p}" for p in ("services", "training", "models", "scaling_laws",
                                     "processing", "inference", "profiling", "dashboard",
                                     "hardware")}
COMMAND_LINE = {"marin.cli", "marin.commands"}
IO_LIBRARIES = {"fsspec", "gcsfs", "s3fs"}


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, root: Path) -> list[tuple[int, str]]:
    """Every module ``path`` imports (absolute names; relative imports resolved)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module_name(path, root)
    if path.name != "__init__.py":
        package = package.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                head = ".".join([*base, node.module] if node.module else base)
            else:
                head = node.module or ""
            found.append((node.lineno, head))
            # ``from marin import cli`` imports the module marin.cli
            found += [(node.lineno, f"{head}.{alias.name}") for alias in node.names]
    return found


def _within(name: str, packages: set[str]) -> bool:
    return any(name == p or name.startswith(f"{p}.") for p in packages)


def violations(files: list[Path], root: Path, forbidden: set[str]) -> list[str]:
    return [f"{f.relative_to(root)}:{line} imports {name}"
            for f in files for line, name in imports_of(f, root)
            if _within(name, forbidden)]


def plugin_packages() -> set[str]:
    """The import packages of the plugin distributions in this repository."""
    return {init.parent.name for init in (ROOT / "plugins").glob("**/*/__init__.py")
            if (init.parent.parent / "pyproject.toml").exists()}


def _py(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.py"))


def test_the_executor_core_imports_no_ml_library_and_nothing_built_on_it():
    assert violations(_py(MARIN / "execution"), ROOT, ML_LIBRARIES | ABOVE_CORE) == []


def test_no_library_module_imports_the_command_line():
    library = [f for f in _py(MARIN) if f not in (MARIN / "cli.py", MARIN / "commands.py")]
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


@pytest.mark.parametrize("source, forbidden, expected", [
    ("import jax.numpy as jnp\n", ML_LIBRARIES, "imports jax.numpy"),
    ("def f():\n    from marin.services.step_states import publishing\n", ABOVE_CORE,
     "imports marin.services.step_states"),
    ("from marin import cli\n", COMMAND_LINE, "imports marin.cli"),
    ("from ..services import kv_client\n", ABOVE_CORE, "imports marin.services"),
    ("import marin_ray\n", {"marin_ray"}, "imports marin_ray"),
    ("def f():\n    import fsspec.core\n", IO_LIBRARIES, "imports fsspec.core"),
    ("from fsspec.asyn import sync\n", IO_LIBRARIES, "imports fsspec.asyn"),
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
