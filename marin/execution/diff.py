"""Field-level differences between two canonical configs, for "why would this step run".

    diff_versions({"lr": 0.1, "model": {"layers": 2}}, {"lr": 0.2, "model": {"layers": 2}})
    # [FieldChange(path="lr", old=0.1, new=0.2)]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

_MISSING = "<absent>"


@dataclass(frozen=True)
class FieldChange:
    path: str
    old: Any
    new: Any

    def __str__(self) -> str:
        return f"{self.path}: {_short(self.old)} -> {_short(self.new)}"

    def to_json(self) -> dict[str, Any]:
        return {"field": self.path, "old": self.old, "new": self.new}


def diff_versions(old: Any, new: Any, path: str = "") -> list[FieldChange]:
    if isinstance(old, dict) and isinstance(new, dict) and not _is_leaf(old) and not _is_leaf(new):
        changes: list[FieldChange] = []
        for key in sorted(set(old) | set(new)):
            sub = f"{path}.{key}" if path else str(key)
            changes.extend(diff_versions(old.get(key, _MISSING), new.get(key, _MISSING), sub))
        return changes
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        changes = []
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            changes.extend(diff_versions(a, b, f"{path}[{i}]"))
        return changes
    return [] if old == new else [FieldChange(path or "<config>", old, new)]


def _is_leaf(value: dict) -> bool:
    # Tagged canonical values ({"$output_of": ...}, {"$float": "nan"}) compare as a whole.
    return any(isinstance(k, str) and k.startswith("$") for k in value)


def _short(value: Any, limit: int = 60) -> str:
    if isinstance(value, dict) and "$output_of" in value:
        text = value["$output_of"] + (f"/{value['sub']}" if value.get("sub") else "")
    else:
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
