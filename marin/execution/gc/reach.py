"""What ``marin gc`` takes for a step output, for a prefix of its own and for a pinned key:
each rule one small function, for the scan (``marin.execution.gc.scan``) and for models of
gc to mirror.

    is_output("exp/a-3f9c01ab", named, info_of(blob))  # an executor's record names it
    nested_prefixes(["t/.marin/pins/x", "a-1/f"])      # {"t"}: left alone, all it holds
    step_key("./exp//a-3f9c01ab")                      # "exp/a-3f9c01ab"
    prefix_of("file:///abs/P")                         # "/abs/P"

A folder that merely holds executor-named files (``.executor_info``, ``.executor_status``,
``.attempts``...) is no output: a step's snapshot of its input, copied into its own output,
is part of that output and kept with it. Outputs nested in a kept output are kept too
(``Scan.kept_keys``). The attempt a resume adopts, which gc keeps, is the worker's own rule
(``marin.execution.shared.adopted_attempt``).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from marin.execution.status import CorruptRecordError, decode_info
from marin.storage import Blob
from marin.storage.files import normalize_url

__all__ = ["info_of", "inside", "is_output", "nested_prefixes", "prefix_of", "resumes",
           "step_key"]


def prefix_of(text: str) -> str:
    """The prefix ``text`` names, spelled the one way gc, du and pins compare paths: the
    executor's ``file:///abs/P`` is ``/abs/P`` (``normalize_url``), no trailing slash."""
    return normalize_url(text)


def step_key(text: str) -> str | None:
    """``text`` as the key of a step output under its prefix, spelled as the executor writes
    it (parts joined by one slash): ``./exp/a-1`` and ``exp//a-1/`` are ``exp/a-1``. None
    when no output can be meant: nothing left, or a ``..`` part."""
    parts = [p for p in text.split("/") if p not in ("", ".")]
    return "/".join(parts) if parts and ".." not in parts else None


def info_of(blob: Blob | None) -> dict[str, Any] | None:
    """The info record in ``blob`` (None: absent or unreadable)."""
    try:
        return decode_info(blob.data) if blob is not None else None
    except CorruptRecordError:
        return None


def is_output(key: str, named: Collection[str], info: dict[str, Any] | None) -> bool:
    """Whether the folder ``key`` (its path under the prefix), which holds executor-named
    entries, is a step output, by the executor's own records: an invocation record names it
    (``named``: the executor records every step of its plan before it runs one), or its own
    ``.executor_info`` (``info``, ``info_of``) names it; the executor writes one into each
    output it makes, under the step's lease, before anything else. A folder that merely
    holds executor-named files (a step's snapshot of its input, copied into its own
    output; a copy elsewhere) holds a record naming another key: it is part of the output
    around it, or of none. A folder with an unreadable record is not known to be an
    output, so it is never deleted as one."""
    return key in named or (info is not None and info.get("key") == key)


def resumes(info: dict[str, Any] | None) -> bool:
    """Whether a rerun of the step whose info record is ``info`` adopts an earlier attempt
    (the record's ``resumes``): then gc keeps the attempt it would adopt. A record without
    it (written before it was recorded) or none: True, so nothing is lost."""
    return info is None or info.get("resumes") is not False


def nested_prefixes(paths: list[str]) -> set[str]:
    """The folders among ``paths`` (files, relative to a prefix) that are prefixes of their
    own: each folder, other than the prefix and its ``.marin``, holding a ``.marin/`` entry
    (another executor's invocation records, pins or leases). Only the outermost: gc at the
    outer prefix leaves each of them, and all it holds, alone."""
    found: set[str] = set()
    for path in paths:
        parts = path.split("/")
        if parts[0] != ".marin" and ".marin" in parts[1:-1]:
            found.add("/".join(parts[:parts.index(".marin", 1)]))
    return {f for f in found if not inside(f, found)}


def inside(path: str, folders: set[str] | dict[str, object]) -> bool:
    """Whether ``path`` lies strictly inside one of ``folders`` (paths under one prefix)."""
    parts = path.split("/")
    return any("/".join(parts[:i]) in folders for i in range(1, len(parts)))
