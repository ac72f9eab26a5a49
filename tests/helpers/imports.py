"""The imports of marin's modules, read statically (``ast``): what the layering tests check.

    imports_of(MARIN / "cli" / "gc.py", ROOT)          # [(line, "marin.execution.gc"), ...]
    violations(files, ROOT, {"marin.cli"})           # "path:line imports marin.cli", ...
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import ROOT

MARIN = ROOT / "marin"


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


def _py(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.py"))
