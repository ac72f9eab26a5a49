"""The storage page: the bytes each experiment, step and version holds, and what
``marin gc`` would delete and why. Read only: the page deletes nothing, it names the
command that does.

    context = storage_page(reader, exp=None)   # or an invocation id: its steps alone
    context["usage"].by_experiment         # {"isoflop-tiny": 12_345_678, ...}
    context["unreachable"][0].reason       # why gc would delete it
"""

from __future__ import annotations

from typing import Any

from marin.dashboard.reader import PrefixReader
from marin.execution.gc.usage import prefix_usage

__all__ = ["storage_page"]

ROW_LIMIT = 500


def storage_page(reader: PrefixReader, exp: str | None) -> dict[str, Any]:
    """The page's context; ``exp``: an invocation id, whose steps alone are shown."""
    usage = prefix_usage(reader.prefix)
    rows = usage.rows
    if exp and exp != "all":
        planned = {step.key for step in reader.invocation(exp).steps}
        rows = [r for r in rows if r.key in planned]
    keys = {r.key for r in rows}
    unreachable = [c for c in usage.unreachable if c.output in keys]
    return {"title": "Storage", "exp": exp, "usage": usage, "rows": rows[:ROW_LIMIT],
            "hidden": max(0, len(rows) - ROW_LIMIT), "unreachable": unreachable[:ROW_LIMIT],
            "unreachable_hidden": max(0, len(unreachable) - ROW_LIMIT),
            "frees": sum(c.bytes for c in unreachable)}
