"""Plugins found through entry points, one group per kind, loaded only when used.

    from marin import registry
    registry.names("hardware")                    # ["cpu", "gpu-a100", ...]: no import
    preset = registry.load("hardware", "gpu-h200")  # imports, checks, caches
    for report in registry.check_all(): ...       # load everything; broken ones reported

A third party adds a plugin with an entry point in its ``pyproject.toml``::

    [project.entry-points."marin.hardware"]
    gpu-l4 = "my_package.presets:L4"

Each group is declared by the package that uses its plugins, next to the protocol they
follow (``marin/storage/__init__.py`` declares ``marin.storage``)::

    registry.declare_group("marin.storage", expected="a subclass of marin.storage.Storage",
                           fits=lambda obj: isinstance(obj, type) and issubclass(obj, Storage))

A plugin that fails to import, or whose object does not fit its group's protocol, raises
``PluginLoadError`` naming its distribution and entry point, and never breaks the others.

Design note: this module imports no domain module, so storage, hardware and the rest can
import it at any time without cycles. It knows marin's own groups only by name, with the
module that declares each (``OWNERS``, strings); listing plugins imports nothing, and the
owner is imported when a plugin of its group is first loaded.
"""

from __future__ import annotations

import importlib
import importlib.metadata as metadata
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

GROUP_PREFIX = "marin."

#: marin's plugin groups and the module that declares each; imported lazily, on first load.
OWNERS: dict[str, str] = {
    "marin.hardware": "marin.hardware",
    "marin.resolvers": "marin.services.resolve",
    "marin.run_observers": "marin.execution.observers",
    "marin.runners": "marin.execution.runners.base",
    "marin.scaling_heuristics": "marin.scaling_laws.scaling_heuristics",
    "marin.storage": "marin.storage",
    "marin.trace_analyzers": "marin.profiling.analyzers",
    "marin.trackers": "marin.trackers",
}


@dataclass(frozen=True)
class GroupSpec:
    """A plugin group: its entry-point group name, and the protocol its plugins follow.

    ``expected`` describes a fitting object in words (it ends up in error messages);
    ``fits`` tells whether a loaded object is one."""

    group: str
    expected: str
    fits: Callable[[Any], bool]


_lock = threading.RLock()
_declared: dict[str, GroupSpec] = {}
_specs: dict[str, list[PluginSpec]] | None = None
_loaded: dict[tuple[str, str], Any] = {}


def has_methods(*names: str, classes_only: bool = False) -> Callable[[Any], bool]:
    """A ``fits`` test: the object (a class, if ``classes_only``) has these methods."""

    def fits(obj: Any) -> bool:
        if classes_only and not isinstance(obj, type):
            return False
        return all(callable(getattr(obj, n, None)) for n in names)

    return fits


def declare_group(group: str, expected: str, fits: Callable[[Any], bool]) -> GroupSpec:
    """Declare the entry-point group ``group`` (called by the package that owns it, at
    import). Declaring a group again replaces its protocol."""
    spec = GroupSpec(group, expected, fits)
    global _specs
    with _lock:
        new = group not in _declared and group not in OWNERS
        _declared[group] = spec
        if new:
            _specs = None  # discover the new group's entry points too
    return spec


def groups() -> list[str]:
    """Every known group: marin's own (declared or not yet) and any declared since."""
    with _lock:
        return sorted({*OWNERS, *_declared})


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


def _group_name(kind: str) -> str:
    """The full group name of ``kind`` ("hardware" or "marin.hardware")."""
    known = groups()
    for name in (kind, GROUP_PREFIX + kind):
        if name in known:
            return name
    raise PluginError(f"unknown plugin group {kind!r}; groups are: {', '.join(known)}")


def group_spec(kind: str) -> GroupSpec:
    """The group's declaration (its protocol), importing the module that owns it when
    needed."""
    group = _group_name(kind)
    spec = _declared.get(group)
    if spec is None and group in OWNERS:
        try:
            importlib.import_module(OWNERS[group])
        except Exception as e:  # the owner's own dependencies may be missing
            raise PluginError(f"plugin group {group} is unusable: its module {OWNERS[group]} "
                              f"failed to import: {type(e).__name__}: {e}") from e
        spec = _declared.get(group)
    if spec is None:
        raise PluginError(f"plugin group {group} was never declared: its owner should call "
                          f"marin.registry.declare_group({group!r}, ...) at import")
    return spec


def _all_specs() -> dict[str, list[PluginSpec]]:
    global _specs
    with _lock:
        if _specs is None:
            found: dict[str, list[PluginSpec]] = {g: [] for g in groups()}
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
    group = _group_name(kind)
    return sorted(_all_specs().get(group, []), key=lambda s: (s.name, s.distribution))


def names(kind: str) -> list[str]:
    return sorted({s.name for s in available(kind)})


def load(kind: str, name: str) -> Any:
    """Import the plugin ``name`` of group ``kind``, check it, and cache it."""
    group = _group_name(kind)
    key = (group, name)
    with _lock:
        if key in _loaded:
            return _loaded[key]
    candidates = [s for s in available(kind) if s.name == name]
    if not candidates:
        known = ", ".join(names(kind)) or "none installed"
        raise PluginNotFoundError(f"no {group} plugin named {name!r}; available: {known}")
    if len(candidates) > 1:
        raise DuplicatePluginError(_duplicate_message(candidates))
    obj = _import(candidates[0], group_spec(group))
    with _lock:
        _loaded[key] = obj
    return obj


def check_all() -> list[PluginReport]:
    """Load every plugin of every group; a report for each, broken ones included."""
    reports = []
    for kind in groups():
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
            except PluginError as e:  # a plugin's, or its group's owner's, failure
                reports.append(PluginReport(specs[0], "broken", str(e)))
    return reports


def _import(spec: PluginSpec, group: GroupSpec) -> Any:
    try:
        obj = metadata.EntryPoint(spec.name, spec.value, spec.group).load()
    except (Exception, SystemExit) as e:  # a plugin's import may fail in any way; report
        raise PluginLoadError(f"{spec.describe()} failed to import: {type(e).__name__}: {e}; "
                              f"fix or upgrade {spec.distribution}, or uninstall it") from e
    try:
        fits = bool(group.fits(obj))
    except Exception:  # an object that breaks the check does not fit it
        fits = False
    if not fits:
        raise PluginLoadError(f"{spec.describe()} does not fit its group: expected "
                              f"{group.expected}, got {type(obj).__name__} {obj!r:.80}; "
                              f"point the entry point at such an object, or uninstall "
                              f"{spec.distribution}")
    return obj


def _duplicate_message(specs: list[PluginSpec]) -> str:
    owners = " and ".join(f"{s.distribution} {s.version} ({s.value})" for s in specs)
    return (f"{specs[0].group} plugin name {specs[0].name!r} is registered by {owners}; "
            "uninstall one of them or rename its entry point")
