"""Log entries: the ``LogEntry`` schema and turning buffered entries into wire columns.

    rows = validate([{"level": "INFO", "msg": "hi", "step": 3}])   # raises on a bad entry
    cols, invalid = to_columns([(entries, time.time())], run="r1", source="")

``validate`` checks entry by entry with pydantic and raises ``InvalidLogEntryError`` (the
durable ``push_batch`` path). ``to_columns`` is what the client's background thread runs
over buffered ``write_batch`` calls: whole-column checks in C-level loops (``map``, ``set``,
``max``) for the common shape (plain dicts with the standard keys and types), and the same
pydantic model, entry by entry, only for a call that holds anything else (extra fields,
level aliases such as "warn" or 30, ``LogEntry`` objects, or a bad entry). Both paths
accept and refuse the same entries.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

from marin.services import codec
from marin.services.checks import MAX_EXTRA_DEPTH, json_depth

_LEVEL_ALIASES = {"WARN": "WARNING", "FATAL": "CRITICAL"}
_LEVELS = frozenset(("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"))
_KEYS = frozenset(("level", "msg", "timestamp", "run", "step", "source"))
MAX_MSG_CHARS = 64 << 10
MAX_FIELD_CHARS = 256
_STEP_MIN, _STEP_MAX = -(2**63), 2**63 - 1  # the wire's int64


class LogEntry(BaseModel):
    """One log entry. Extra fields (``loss=3.2``) are kept as a JSON object."""

    model_config = ConfigDict(extra="allow", frozen=True)

    level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = "INFO"
    msg: str = Field(max_length=MAX_MSG_CHARS)
    timestamp: float = Field(default_factory=time.time, gt=0, lt=codec.MAX_TIMESTAMP,
                             allow_inf_nan=False)
    run: str | None = Field(default=None, max_length=MAX_FIELD_CHARS)
    step: int | None = Field(default=None, ge=_STEP_MIN, le=_STEP_MAX)
    source: str | None = Field(default=None, max_length=MAX_FIELD_CHARS)

    @field_validator("level", mode="before")
    @classmethod
    def _level(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            value = logging.getLevelName(value)
        if isinstance(value, str):
            value = value.upper()
            return _LEVEL_ALIASES.get(value, value)
        return value

    def wire(self, run: str = "", source: str = "") -> codec.WireRow:
        """The entry as the wire carries it; ValueError for extra fields that cannot be
        sent (nested deeper than the service accepts, or containing themselves)."""
        extra = self.model_extra
        return (self.timestamp, self.level, self.msg, self.run or run, self.step,
                self.source or source, _extra_json(extra) if extra else "")


def _extra_json(extra: dict[str, Any]) -> str:
    if json_depth(extra, MAX_EXTRA_DEPTH) > MAX_EXTRA_DEPTH:
        raise ValueError(f"extra fields nest deeper than {MAX_EXTRA_DEPTH} levels (or contain "
                         "themselves); flatten them")
    return json.dumps(extra, default=str, separators=(",", ":"))


_ENTRIES = TypeAdapter(list[LogEntry])


class InvalidLogEntryError(ValueError):
    """An entry failed validation; nothing of its call was buffered."""


def _describe(e: ValidationError, index: int | None = None) -> str:
    first = e.errors()[0]
    loc = first["loc"] if index is None else (index, *first["loc"])
    where = f"entry {loc[0]}" + (f", field {'.'.join(map(str, loc[1:]))!r}"
                                 if len(loc) > 1 else "")
    return f"{where}: {first['msg']} (got {first.get('input')!r:.60})"


def validate(entries: Iterable[Mapping[str, Any] | LogEntry], run: str = "", source: str = ""
             ) -> list[codec.WireRow]:
    """Wire rows of ``entries``; ``InvalidLogEntryError`` names the first bad entry."""
    items = entries if isinstance(entries, list) else list(entries)
    try:
        models = _ENTRIES.validate_python(items)
    except ValidationError as e:
        raise InvalidLogEntryError(f"{_describe(e)}; {e.error_count()} error(s) in the call, "
                                   "nothing was written") from None
    rows = []
    for i, m in enumerate(models):
        try:
            rows.append(m.wire(run, source))
        except ValueError as e:  # extra fields json cannot encode
            raise InvalidLogEntryError(f"entry {i}: {e}; nothing was written") from None
    return rows


def check_shape(entries: Iterable[Mapping[str, Any] | LogEntry]) -> list:
    """A private list of ``entries``, refusing what is not a list of entries at all (the
    cheap, structural check ``write_batch`` makes on the caller's thread)."""
    if isinstance(entries, (str, bytes, Mapping)):
        raise InvalidLogEntryError(f"write_batch takes a list of entries, got one "
                                   f"{type(entries).__name__}; wrap it in a list")
    try:
        items = list(entries)
    except TypeError:
        raise InvalidLogEntryError(f"write_batch takes a list of entries (dicts), got "
                                   f"{type(entries).__name__}") from None
    if not set(map(type, items)) <= {dict}:
        for i, e in enumerate(items):
            if not isinstance(e, (Mapping, LogEntry)):
                raise InvalidLogEntryError(f"entry {i}: expected a dict or LogEntry, got "
                                           f"{type(e).__name__} ({e!r:.60}); nothing was "
                                           "written")
    return items


class Columns(NamedTuple):
    """Validated entries, one list per attribute, all of one length."""

    timestamp: list[float]
    level: list[str]
    msg: list[str]
    run: list[str]
    step: list[int | None]
    source: list[str]
    extra: list[str]


def to_columns(chunks: Sequence[tuple[list, float]], run: str = "", source: str = ""
               ) -> tuple[Columns, list[str]]:
    """Validated columns of buffered ``(entries, time of the call)`` chunks, and a one-line
    description of each entry that failed validation (those are left out)."""
    cols = Columns([], [], [], [], [], [], [])
    invalid: list[str] = []
    for entries, now in chunks:
        part = _fast(entries, now, run, source)
        if part is None:
            part = _slow(entries, now, run, source, invalid)
        for whole, piece in zip(cols, part, strict=True):
            whole.extend(piece)
    return cols, invalid


def _types(column: list) -> set:
    return set(map(type, column))


def _fast(entries: list, now: float, run: str, source: str) -> Columns | None:
    """Columns of a call of plain, valid dicts with standard keys; None for anything else."""
    get, n = dict.get, len(entries)
    if not n:
        return Columns([], [], [], [], [], [], [])
    if not set(map(type, entries)) <= {dict} or not _KEYS.issuperset(
            itertools.chain.from_iterable(entries)):
        return None
    level = list(map(get, entries, itertools.repeat("level"), itertools.repeat("INFO")))
    msg = list(map(get, entries, itertools.repeat("msg")))
    ts = list(map(get, entries, itertools.repeat("timestamp"), itertools.repeat(now)))
    runs = list(map(get, entries, itertools.repeat("run")))
    step = list(map(get, entries, itertools.repeat("step")))
    sources = list(map(get, entries, itertools.repeat("source")))
    step_kinds = _types(step)
    if not (set(level) <= _LEVELS and _types(msg) == {str} and _types(ts) <= {float, int}
            and step_kinds <= {int, type(None)} and _types(runs) <= {str, type(None)}
            and _types(sources) <= {str, type(None)}):
        return None
    try:  # sum() is NaN or inf when any timestamp is
        if max(map(len, msg)) > MAX_MSG_CHARS or min(ts) <= 0 or not math.isfinite(sum(ts)) \
                or max(ts) >= codec.MAX_TIMESTAMP:
            return None
    except OverflowError:
        return None
    if int in step_kinds:  # an int64 on the wire
        steps = step if step_kinds == {int} else [s for s in step if s is not None]
        if min(steps) < _STEP_MIN or max(steps) > _STEP_MAX:
            return None
    runs = [r or run for r in runs]
    sources = [s or source for s in sources]
    if max(map(len, runs)) > MAX_FIELD_CHARS or max(map(len, sources)) > MAX_FIELD_CHARS:
        return None
    return Columns(ts, level, msg, runs, step, sources, [""] * n)


def _slow(entries: list, now: float, run: str, source: str, invalid: list[str]) -> Columns:
    rows = []
    for i, e in enumerate(entries):
        try:
            if not isinstance(e, LogEntry):
                e = LogEntry.model_validate(e if "timestamp" in e else {**e, "timestamp": now})
            rows.append(e.wire(run, source))
        except ValidationError as err:
            invalid.append(_describe(err, i))
        except (TypeError, ValueError) as err:  # e.g. extra fields json cannot encode
            invalid.append(f"entry {i}: {err}")
    if not rows:
        return Columns([], [], [], [], [], [], [])
    return Columns(*map(list, zip(*rows, strict=True)))
