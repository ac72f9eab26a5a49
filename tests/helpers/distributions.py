"""Installed distributions written by hand, to test plugin discovery without pip.

    make_distribution(site, "acme-good", {"marin.hardware": {"acme-x3": "acme_good:X3"}},
                      {"acme_good": "X3 = ..."})
    monkeypatch.syspath_prepend(str(site)); registry.refresh()
"""

from __future__ import annotations

import textwrap
from pathlib import Path


def make_distribution(site: Path, name: str, entry_points: dict[str, dict[str, str]],
                      modules: dict[str, str]) -> None:
    """Write an installed distribution: modules plus a dist-info with entry points."""
    info = site / f"{name.replace('-', '_')}-1.2.3.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.2.3\n")
    lines = []
    for group, items in entry_points.items():
        lines.append(f"[{group}]")
        lines.extend(f"{k} = {v}" for k, v in items.items())
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    for module, source in modules.items():
        (site / f"{module}.py").write_text(textwrap.dedent(source))
