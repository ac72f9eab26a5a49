"""What the log service accepts: a batch's entries checked one by one before they are stored.

    rows, errors = rows_of(columns, Caps())          # rows to store, an EntryError per refusal
    check_extra('{"loss": 3.2}', Caps())              # None, or (field, one-line reason)

Every check runs before a batch joins a group commit, so nothing a client sends can fail
the commit that other clients' batches share: an entry the store could not hold (a
timestamp out of range, an over-long field, extra fields that are not a shallow JSON
object) is refused on its own, with its index, field and reason, and the rest of its batch
is stored.
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass

from marin.services.codec import MAX_TIMESTAMP
from marin.services.log_service.store import LEVELS
from marin.services.proto import services_pb2 as pb

__all__ = ["MAX_EXTRA_DEPTH", "Caps", "check_extra", "json_depth", "rows_of"]

MAX_EXTRA_DEPTH = 32


@dataclass(frozen=True)
class Caps:
    """Per-entry caps: ``max_msg_chars``, ``max_field_chars`` (run, source, level),
    ``max_extra_chars`` and ``max_extra_depth`` (nesting of the extra-fields object)."""

    max_msg_chars: int = 64 << 10
    max_field_chars: int = 256
    max_extra_chars: int = 64 << 10
    max_extra_depth: int = MAX_EXTRA_DEPTH


def rows_of(cols: pb.LogColumns, caps: Caps) -> tuple[list, list[pb.EntryError]]:
    """The store's rows for the valid entries of ``cols``, and an error per invalid one."""
    rows = _rows_fast(cols, caps)
    return (rows, []) if rows is not None else _rows_checked(cols, caps)


def _rows_fast(cols: pb.LogColumns, caps: Caps) -> list | None:
    """Whole-column checks, C loops only; None when any entry needs a closer look.
    Each column is read out of the message once (every read builds new objects)."""
    if not cols.timestamp:
        return []
    level = list(cols.level)
    if not set(level) <= LEVELS.keys() or any(cols.extra_json):
        return None
    ts, msg, run, source = (list(cols.timestamp), list(cols.msg), list(cols.run),
                            list(cols.source))
    if max(map(len, msg)) > caps.max_msg_chars or max(
            max(map(len, run)), max(map(len, source))) > caps.max_field_chars:
        return None
    # NaN and inf make the sum so
    if not (min(ts) > 0 and max(ts) < MAX_TIMESTAMP and math.isfinite(sum(ts))):
        return None
    has = list(cols.has_step)
    step = list(cols.step) if all(has) else [
        s if h else None for s, h in zip(cols.step, has, strict=True)]
    return list(zip(ts, map(LEVELS.__getitem__, level), run, step, source, msg,
                    itertools.repeat(None)))


def _rows_checked(cols: pb.LogColumns, caps: Caps) -> tuple[list, list[pb.EntryError]]:
    rows, errors = [], []
    max_msg, max_field = caps.max_msg_chars, caps.max_field_chars
    for i, (ts, level, msg, run, step, has, source, extra) in enumerate(zip(
            cols.timestamp, cols.level, cols.msg, cols.run, cols.step, cols.has_step,
            cols.source, cols.extra_json, strict=True)):
        problem = None
        levelno = LEVELS.get(level)
        if levelno is None:
            problem = ("level", f"unknown level {level[:40]!r}; use one of "
                       f"{', '.join(LEVELS)}")
        elif not (math.isfinite(ts) and 0 < ts < MAX_TIMESTAMP):
            problem = ("timestamp", f"timestamp {ts} is not an epoch time in seconds "
                       "between 1970 and 9999")
        elif len(msg) > max_msg:
            problem = ("msg", f"message of {len(msg)} characters exceeds the cap of "
                       f"{max_msg}")
        elif len(run) > max_field or len(source) > max_field:
            problem = ("run" if len(run) > max_field else "source",
                       f"longer than {max_field} characters")
        elif extra:
            problem = check_extra(extra, caps)
        if problem:
            errors.append(pb.EntryError(index=i, field=problem[0], message=problem[1]))
            continue
        rows.append((ts, levelno, run, step if has else None, source, msg, extra or None))
    return rows, errors


def check_extra(extra: str, caps: Caps) -> tuple[str, str] | None:
    """None for a JSON object within the caps, else ("extra", the reason)."""
    if len(extra) > caps.max_extra_chars:
        return ("extra", f"extra fields of {len(extra)} characters exceed the cap of "
                f"{caps.max_extra_chars}")
    try:
        value = json.loads(extra)
    except RecursionError:
        return ("extra", f"extra fields nest deeper than {caps.max_extra_depth} levels")
    except ValueError:
        return ("extra", "extra fields are not valid JSON")
    if not isinstance(value, dict):
        return ("extra", "extra fields must be a JSON object")
    if json_depth(value, caps.max_extra_depth) > caps.max_extra_depth:
        return ("extra", f"extra fields nest deeper than {caps.max_extra_depth} levels")
    return None


def json_depth(value: object, stop: int) -> int:
    """The nesting depth of a JSON-like value (1 for a flat object or list), counted level
    by level without recursion and given up past ``stop`` (a value that contains itself
    counts as deeper than any ``stop``)."""
    deepest, level = 0, [value] if isinstance(value, (dict, list)) else []
    while level and deepest <= stop:
        deepest += 1
        children = {id(c): c for v in level
                    for c in (v.values() if isinstance(v, dict) else v)
                    if isinstance(c, (dict, list))}  # by identity: shared parts once
        level = list(children.values())
    return deepest
