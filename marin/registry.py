"""Plugins found through entry points, one group per kind, loaded only when used.

    from marin import registry
    registry.names("hardware")                    # ["cpu", "gpu-a100", ...]: no import
    preset = registry.load("hardware", "gpu-h200")  # imports, checks, caches
    for report in registry.check_all(): ...       # load everything; broken ones reported

A third party adds a plugin with an entry point in its ``pyproject.toml``::

    [project.entry-points."marin.hardware"]
    gpu-l4 = "my_package.presets:L4"

A plugin that fails to import, or whose object does not fit its group's protocol, raises
``PluginLoadError`` naming its distribution and entry point, and never breaks the others.
"""

from __future__ import annotations

import importlib
import importlib.metadata as metadata
import inspect
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

GROUP_PREFIX = "marin."


@dataclass(frozen=True)
class GroupSpec:
    group: str
    expected: str
    check: Callable[[Any], bool]


def _has_methods(*names: str) -> Callable[[Any], bool]:
    def check(obj: Any) -> bool:
        return all(callable(getattr(obj, n, None)) for n in names)

    return check


def _is_storage(obj: Any) -> bool:
    from marin.storage.base import Storage

    return inspect.isclass(obj) and issubclass(obj, Storage) and isinstance(
        getattr(obj, "scheme", None), str)


def _is_preset(obj: Any) -> bool:
    from marin.hardware.preset import HardwarePreset

    return isinstance(obj, HardwarePreset)


GROUPS: dict[str, GroupSpec] = {
    spec.group.removeprefix(GROUP_PREFIX): spec
    for spec in (
        GroupSpec("marin.scaling_heuristics",
                  "a class with a candidates_for_budget(budget) method",
                  lambda o: inspect.isclass(o) and _has_methods("candidates_for_budget")(o)),
        GroupSpec("marin.hardware", "a marin.hardware.HardwarePreset instance", _is_preset),
        GroupSpec("marin.storage",
                  "a subclass of marin.storage.Storage with a `scheme` attribute", _is_storage),
        GroupSpec("marin.trace_analyzers", "a class or object with an analyze(summary) method",
                  _has_methods("analyze")),
        GroupSpec("marin.runners",
                  "a runner class with submit(job, resources), cancel_running(reason) and "
                  "shutdown() methods",
                  lambda o: inspect.isclass(o) and _has_methods("submit", "cancel_running",
                                                                "shutdown")(o)),
        GroupSpec("marin.resolvers", "a class or object with a resolve(url) method",
                  _has_methods("resolve")),
    )
}


class PluginError(LookupError):
    """Base class of the registry's errors."""


class PluginNotFoundError(PluginError):
    """No plugin of that name in the group; the message lists the available names."""


class PluginLoadError(PluginError):
    """A plugin failed to import or does not fit its group's protocol."""


class DuplicatePluginError(PluginError):
    """Two distributions register one name in one group."""


@dataclass(frozen=True)
class PluginSpec:
    """An entry point, before anything is imported."""

    group: str
    name: str
    value: str
    distribution: str
    version: str

    def describe(self) -> str:
        return (f"plugin {self.name!r} in group {self.group} (entry point {self.value!r} of "
                f"distribution {self.distribution} {self.version})")


@dataclass(frozen=True)
class PluginReport:
    spec: PluginSpec
    status: str  # "ok", "broken", "duplicate"
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        s = self.spec
        return {"group": s.group, "name": s.name, "distribution": s.distribution,
                "version": s.version, "entry_point": s.value, "status": self.status,
                "error": self.error}


_lock = threading.RLock()
_specs: dict[str, list[PluginSpec]] | None = None
_loaded: dict[tuple[str, str], Any] = {}


def _spec_of(kind: str) -> GroupSpec:
    try:
        return GROUPS[kind.removeprefix(GROUP_PREFIX)]
    except KeyError:
        raise PluginError(f"unknown plugin group {kind!r}; groups are: "
                          f"{', '.join(sorted(GROUPS))}") from None


def _all_specs() -> dict[str, list[PluginSpec]]:
    global _specs
    with _lock:
        if _specs is None:
            found: dict[str, list[PluginSpec]] = {s.group: [] for s in GROUPS.values()}
            seen: set[tuple[str, str, str]] = set()
            for dist in metadata.distributions():
                ours = [ep for ep in dist.entry_points if ep.group in found]
                if not ours:  # parse a distribution's metadata only when it has plugins
                    continue
                dist_name = dist.metadata["Name"] or "?"
                for ep in ours:
                    if (ep.group, ep.name, dist_name) not in seen:
                        seen.add((ep.group, ep.name, dist_name))
                        found[ep.group].append(PluginSpec(ep.group, ep.name, ep.value,
                                                          dist_name, dist.version))
            _specs = found
        return _specs


def refresh() -> None:
    """Forget what was discovered and loaded (after installing a plugin at run time)."""
    global _specs
    with _lock:
        _specs = None
        _loaded.clear()
    importlib.invalidate_caches()


def available(kind: str) -> list[PluginSpec]:
    """The entry points of a group, sorted by name; nothing is imported."""
    group = _spec_of(kind).group
    return sorted(_all_specs()[group], key=lambda s: (s.name, s.distribution))


def names(kind: str) -> list[str]:
    return sorted({s.name for s in available(kind)})


def load(kind: str, name: str) -> Any:
    """Import the plugin ``name`` of group ``kind``, check it, and cache it."""
    group_spec = _spec_of(kind)
    key = (group_spec.group, name)
    with _lock:
        if key in _loaded:
            return _loaded[key]
    candidates = [s for s in available(kind) if s.name == name]
    if not candidates:
        known = ", ".join(names(kind)) or "none installed"
        raise PluginNotFoundError(f"no {group_spec.group} plugin named {name!r}; available: "
                                  f"{known}")
    if len(candidates) > 1:
        raise DuplicatePluginError(_duplicate_message(candidates))
    obj = _import(candidates[0], group_spec)
    with _lock:
        _loaded[key] = obj
    return obj


def check_all() -> list[PluginReport]:
    """Load every plugin of every group; a report for each, broken ones included."""
    reports = []
    for kind in sorted(GROUPS):
        by_name: dict[str, list[PluginSpec]] = {}
        for spec in available(kind):
            by_name.setdefault(spec.name, []).append(spec)
        for specs in by_name.values():
            if len(specs) > 1:
                message = _duplicate_message(specs)
                reports.extend(PluginReport(s, "duplicate", message) for s in specs)
                continue
            try:
                load(kind, specs[0].name)
                reports.append(PluginReport(specs[0], "ok"))
            except PluginLoadError as e:
                reports.append(PluginReport(specs[0], "broken", str(e)))
    return reports


def _import(spec: PluginSpec, group_spec: GroupSpec) -> Any:
    try:
        obj = metadata.EntryPoint(spec.name, spec.value, spec.group).load()
    except Exception as e:  # a plugin's import may fail in any way; report, never crash
        raise PluginLoadError(f"{spec.describe()} failed to import: "
                              f"{type(e).__name__}: {e}") from e
    if not group_spec.check(obj):
        raise PluginLoadError(f"{spec.describe()} does not fit its group: expected "
                              f"{group_spec.expected}, got {type(obj).__name__} {obj!r:.80}")
    return obj


def _duplicate_message(specs: list[PluginSpec]) -> str:
    owners = " and ".join(f"{s.distribution} {s.version} ({s.value})" for s in specs)
    return (f"{specs[0].group} plugin name {specs[0].name!r} is registered by {owners}; "
            "uninstall one of them or rename its entry point")
