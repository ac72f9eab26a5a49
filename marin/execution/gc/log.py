"""The log of what ``marin gc`` deleted: ``<prefix>/.marin/gc/<time>-<id>.jsonl``, one line
per thing deleted (what, why, bytes), written before the deletes begin.

    path = write_log(prefix, storage, [GcLogEntry.of(c, deleted_at=time.time()) ...])
    entries = GcLogEntry.decode_lines(storage.read(path).data)   # never raises
    entries[0].path, entries[0].reason, entries[0].bytes

gc never deletes these logs (it never deletes under ``.marin``). Format 1 is the first;
a line of a newer format, or one that is no entry, decodes to an entry whose ``error``
says why.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, ClassVar

from marin.execution.ids import time_ordered_id
from marin.execution.record_fields import FieldReader, loads
from marin.storage import Storage

__all__ = ["GC_LOG_DIR", "GcLogEntry", "gc_log_folder", "write_log"]

GC_LOG_DIR = ".marin/gc"


def gc_log_folder(prefix: str) -> str:
    return f"{prefix.rstrip('/')}/{GC_LOG_DIR}"


@dataclass(frozen=True)
class GcLogEntry:
    """One thing a gc deleted."""

    FORMAT: ClassVar[int] = 1

    path: str
    """The folder deleted (a step output, an attempt, a checkpoint folder)."""
    kind: str = "?"
    """``output``, ``attempt``, ``orbax-tmp`` or ``unpublished`` (``gc.Candidate.kind``)."""
    step: str = "?"
    """The key of the step output it was or was part of."""
    reason: str = ""
    """Why nothing needed it, as gc printed it."""
    bytes: int = 0
    files: int = 0
    modified: float | None = None
    """The newest modification time among its files."""
    deleted_at: float | None = None
    error: str | None = None
    """Why the stored line is no entry (then every other field is a default)."""

    @classmethod
    def of(cls, candidate: Any, deleted_at: float) -> GcLogEntry:
        """The entry for a ``gc.Candidate``."""
        return cls(candidate.path, candidate.kind, candidate.output, candidate.reason,
                   candidate.bytes, len(candidate.files), candidate.newest, deleted_at)

    def to_json(self) -> dict[str, Any]:
        return {"format": self.FORMAT, "path": self.path, "kind": self.kind,
                "step": self.step, "reason": self.reason, "bytes": self.bytes,
                "files": self.files, "modified": self.modified,
                "deleted_at": self.deleted_at}

    @classmethod
    def decode(cls, line: bytes | str) -> GcLogEntry:
        """The entry on one line of a log; never raises."""
        try:
            data = loads(line)
        except ValueError as e:
            return cls("?", error=f"not JSON ({e})")
        if not isinstance(data, dict) or not isinstance(data.get("path"), str):
            return cls("?", error="no 'path'")
        check = FieldReader("gc log entry", data)
        version = check.integer("format") or 1
        if version > cls.FORMAT:
            return cls(data["path"], error=f"format {version} is newer than this code's "
                                           f"{cls.FORMAT}")
        return cls(data["path"], check.text("kind") or "?", check.text("step") or "?",
                   check.text("reason") or "", check.integer("bytes") or 0,
                   check.integer("files") or 0, check.time("modified"),
                   check.time("deleted_at"))

    @classmethod
    def decode_lines(cls, raw: bytes) -> list[GcLogEntry]:
        return [cls.decode(line) for line in raw.splitlines() if line.strip()]


def write_log(prefix: str, storage: Storage, entries: list[GcLogEntry]) -> str | None:
    """Write ``entries`` as a new log under ``prefix``; its path (None for no entries)."""
    if not entries:
        return None
    name = f"{time_ordered_id()}.jsonl"
    path = f"{gc_log_folder(prefix)}/{name}"
    storage.write(path, "".join(json.dumps(e.to_json()) + "\n" for e in entries).encode())
    return path
