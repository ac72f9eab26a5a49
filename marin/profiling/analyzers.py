"""Sections of a trace summary, one per ``marin.trace_analyzers`` plugin.

    class MemcpyAnalyzer:                       # a third party's analyzer
        def analyze(self, summary):
            copies = [k for k in summary.top_kernels(1000) if "memcpy" in k.name.lower()]
            return {"seconds": sum(k.seconds for k in copies)}

    # its pyproject.toml:
    # [project.entry-points."marin.trace_analyzers"]
    # memcpy = "my_package:MemcpyAnalyzer"

An analyzer is a class (instantiated with no arguments) or an object with
``analyze(summary) -> dict``; the dict (JSON-able) becomes the section named after the
entry point, and a ``"hints"`` list in it is shown with the built-in hints. The built-in
analyzers below are registered the same way, in marin's own pyproject.toml. An analyzer
that fails to import or raises is reported in ``summary.analyzer_errors`` and its section
holds ``{"error": ...}``; the others still run.
"""

from __future__ import annotations

import inspect
import math
from typing import Any

from marin import registry

# A summary is a ``marin.profiling.trace_summary.TraceSummary``; this module is below it.
TraceSummary = Any

BUILTIN = ("kernels", "categories", "steps", "hints")

registry.declare_group("marin.trace_analyzers",
                       expected="a class or object with an analyze(summary) method",
                       fits=registry.has_methods("analyze"))


def _finite(value: Any) -> Any:
    """JSON has no NaN: missing figures become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


class KernelsAnalyzer:
    """The top device ops (``summary.top`` of them) and the total op time."""

    def analyze(self, summary: TraceSummary) -> dict[str, Any]:
        return {"total_seconds": summary.kernel_seconds, "distinct": len(summary.data.kernels),
                "top": [k.to_json() for k in summary.top_kernels(summary.top)]}


class CategoriesAnalyzer:
    """Compute, communication, data loading, host work and idle, per device and averaged."""

    def analyze(self, summary: TraceSummary) -> dict[str, Any]:
        window = summary.data.window_ns
        return {"window_seconds": summary.window_seconds,
                "breakdown": {c: {"seconds": s.seconds, "fraction": s.fraction}
                              for c, s in summary.breakdown().items()},
                "overlapped_communication_seconds": summary.overlapped_communication_seconds,
                "per_device": {d: {c: ns / window if window else 0.0 for c, ns in s.items()}
                               for d, s in summary.data.shares.items()}}


class StepsAnalyzer:
    """Per-step wall times and their statistics."""

    def analyze(self, summary: TraceSummary) -> dict[str, Any]:
        return _finite(summary.steps().to_json())


class HintsAnalyzer:
    """The built-in hints."""

    def analyze(self, summary: TraceSummary) -> dict[str, Any]:
        return {"hints": [h.to_json() for h in summary.hints()]}


def run_analyzers(summary: TraceSummary) -> tuple[dict[str, Any], list[str]]:
    """Every installed analyzer's section, built-ins first; errors kept apart."""
    names = registry.names("trace_analyzers")
    ordered = [n for n in BUILTIN if n in names] + [n for n in names if n not in BUILTIN]
    sections: dict[str, Any] = {}
    errors: list[str] = []
    for name in ordered:
        try:
            plugin = registry.load("trace_analyzers", name)
        except registry.PluginError as e:
            errors.append(str(e))
            sections[name] = {"error": str(e)}
            continue
        try:
            analyzer = plugin() if inspect.isclass(plugin) else plugin
            section = analyzer.analyze(summary)
            sections[name] = _finite(dict(section or {}))
        except Exception as e:  # a third party's analyzer may fail in any way
            message = f"trace analyzer {name!r} failed: {type(e).__name__}: {e}"
            errors.append(message)
            sections[name] = {"error": message}
    return sections, errors
