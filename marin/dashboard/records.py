"""Typed views of the records the dashboard reads, decoded from any bytes without raising.

    inv = decode_invocation("20250101-120000-1a2b3c4d.json", raw)
    inv.started, inv.steps[0].key, inv.problems   # 1735732800.0, "train/tiny-1a2b3c4d", ()
    fields = status_fields("/p/train/tiny-1a2b3c4d", raw)   # StepView's fields, or CORRUPT
    view = info_view(info)                                  # InfoView: created, user, ...

Design note: records are written by executors of other versions, by hand, or damaged on
disk, so every field is checked here, once, and pages and templates only see typed values.
A field of the wrong type is dropped and named in ``problems`` (the page shows the rest and
one line about what was ignored); a record that is not one at all gets ``error``.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from typing import Any

from marin.execution.states import STORED_STATUSES
from marin.execution.status import status_path

__all__ = ["InfoView", "Invocation", "PlannedStep", "StepView", "decode_invocation",
           "finite_number", "info_view", "loads", "status_fields", "valid_time"]

#: Epoch seconds a page can show: from 1970 to the end of year 9999.
_LAST_TIME = 253_402_300_799.0
_SHOWN = 60  # characters of a bad value quoted in a problem


def loads(raw: bytes | str) -> Any:
    """``json.loads``, with nesting too deep for the parser reported as a ValueError."""
    try:
        return json.loads(raw)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def finite_number(value: Any) -> float | None:
    """``value`` as a float when it is a finite JSON number (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:  # an int too large for a float
        return None
    return number if math.isfinite(number) else None


def valid_time(value: Any) -> float | None:
    """``value`` when it is epoch seconds a calendar can show, else None."""
    number = finite_number(value)
    return number if number is not None and 0 <= number <= _LAST_TIME else None


@dataclass(frozen=True)
class PlannedStep:
    """One step of an invocation record: what the plan said and how the step ended."""

    key: str
    name: str = ""
    dependencies: tuple[str, ...] = ()
    action: str | None = None
    reason: str | None = None
    description: str | None = None
    outcome: str | None = None
    seconds: float | None = None
    error: str | None = None


@dataclass(frozen=True)
class Invocation:
    """One executor invocation (``<prefix>/.marin/invocations/<id>.json``)."""

    id: str
    experiment: str = "?"
    argv: tuple[str, ...] = ()
    user: str | None = None
    host: str | None = None
    pid: int | None = None
    git_commit: str | None = None
    started: float | None = None
    ended: float | None = None
    counts: dict[str, int] = field(default_factory=dict)
    steps: tuple[PlannedStep, ...] = ()
    error: str | None = None
    """Why the record cannot be read at all (then every other field is a default)."""
    problems: tuple[str, ...] = ()
    """Fields that were ignored, each with why."""

    @property
    def duration(self) -> float | None:
        if self.started is None or self.ended is None or self.ended < self.started:
            return None
        return self.ended - self.started


@dataclass(frozen=True)
class InfoView:
    """What pages show of a ``.executor_info`` (the record itself is shown as JSON)."""

    created: float | None = None
    description: str | None = None
    dependencies: tuple[str, ...] = ()
    fn: str | None = None
    user: str | None = None
    git_commit: str | None = None
    problems: tuple[str, ...] = ()


@dataclass
class StepView:
    """One step as the pages show it, read from its status, lease and info records (the
    executor's own states are ``marin.execution.states.StepState``).

    ``state`` is one of SUCCESS, FAILED, RUNNING, STOPPED (RUNNING with a stale or missing
    lease: its executor died), CANCELLED, PENDING (no status yet) and CORRUPT (an unreadable
    status file, explained in ``error``).
    """

    key: str
    output_path: str
    state: str = "PENDING"
    error: str | None = None
    started: float | None = None
    updated: float | None = None
    host: str = ""
    run_id: str = ""
    owner: str | None = None
    dependencies: list[str] = field(default_factory=list)
    reason: str | None = None
    action: str | None = None
    description: str | None = None
    info_error: str | None = None
    recorded_seconds: float | None = None

    @property
    def name(self) -> str:
        return self.key[:-9]

    @property
    def family(self) -> str:
        return self.name.rpartition("/")[0] or "(top level)"

    def duration(self, now: float | None = None) -> float | None:
        if self.recorded_seconds is not None:
            return self.recorded_seconds
        if self.started is None:
            return None
        if self.state in ("RUNNING",):
            return max(0.0, (now or time.time()) - self.started)
        if self.updated is not None and self.updated >= self.started:
            return self.updated - self.started
        return None

    def to_json(self) -> dict[str, Any]:
        duration = self.duration()
        return {"key": self.key, "state": self.state, "error": self.error,
                "started": self.started, "updated": self.updated,
                "duration": None if duration is None else round(duration, 1),
                "host": self.host, "owner": self.owner}


class _Checker:
    """Reads typed fields out of a JSON object, noting each one it has to ignore."""

    def __init__(self, what: str, data: dict[str, Any]):
        self.what = what
        self.data = data
        self.problems: list[str] = []

    def _bad(self, name: str, expected: str) -> None:
        shown = repr(self.data[name])
        shown = shown if len(shown) <= _SHOWN else shown[:_SHOWN] + "…"
        self.problems.append(f"{self.what}: '{name}' is not {expected} ({shown}); ignored")

    def text(self, name: str) -> str | None:
        value = self.data.get(name)
        if value is None or isinstance(value, str):
            return value
        self._bad(name, "text")
        return None

    def time(self, name: str) -> float | None:
        value = self.data.get(name)
        if value is None:
            return None
        number = valid_time(value)
        if number is None:
            self._bad(name, "a time in epoch seconds")
        return number

    def number(self, name: str) -> float | None:
        value = self.data.get(name)
        number = finite_number(value)
        if value is not None and number is None:
            self._bad(name, "a finite number")
        return number

    def integer(self, name: str) -> int | None:
        value = self.data.get(name)
        if value is None or (isinstance(value, int) and not isinstance(value, bool)):
            return value
        self._bad(name, "an integer")
        return None

    def texts(self, name: str) -> tuple[str, ...]:
        value = self.data.get(name)
        if value is None:
            return ()
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return tuple(value)
        self._bad(name, "a list of text")
        return ()

    def counts(self, name: str) -> dict[str, int]:
        value = self.data.get(name)
        if value is None:
            return {}
        if isinstance(value, dict) and all(isinstance(n, int) and not isinstance(n, bool)
                                           for n in value.values()):
            return dict(value)
        self._bad(name, "counts by outcome")
        return {}


def decode_invocation(name: str, raw: bytes | None) -> Invocation:
    """The invocation record stored as ``name`` (``<id>.json``); never raises."""
    invocation_id = name.removesuffix(".json")
    if raw is None:
        return Invocation(invocation_id, error=f"invocation record {name} vanished")
    try:
        data = loads(raw)
        if not isinstance(data, dict) or not isinstance(data.get("steps"), list):
            raise ValueError("no 'steps' list")
    except ValueError as e:
        return Invocation(invocation_id, error=f"invocation record {name} is unreadable ({e})")
    check = _Checker(f"invocation record {name}", data)
    fields = dict(experiment=check.text("experiment") or "?", argv=check.texts("argv"),
                  user=check.text("user"), host=check.text("host"), pid=check.integer("pid"),
                  git_commit=check.text("git_commit"), started=check.time("started"),
                  ended=check.time("ended"), counts=check.counts("counts"))
    steps = []
    for i, entry in enumerate(data["steps"]):
        step = _planned_step(entry, f"invocation record {name}, step {i}", check.problems)
        if step is not None:
            steps.append(step)
    return Invocation(id=invocation_id, steps=tuple(steps), problems=tuple(check.problems),
                      **fields)


def _planned_step(entry: Any, what: str, problems: list[str]) -> PlannedStep | None:
    if not isinstance(entry, dict) or not isinstance(entry.get("key"), str) \
            or not entry["key"]:
        shown = repr(entry)
        problems.append(f"{what} is not a step with a 'key' "
                        f"({shown if len(shown) <= _SHOWN else shown[:_SHOWN] + '…'}); "
                        "ignored")
        return None
    check = _Checker(f"{what} ({entry['key']})", entry)
    step = PlannedStep(
        key=entry["key"], name=check.text("name") or "",
        dependencies=check.texts("dependencies"), action=check.text("action"),
        reason=check.text("reason"), description=check.text("description"),
        outcome=check.text("outcome"), seconds=check.number("seconds"),
        error=check.text("error"))
    problems.extend(check.problems)
    return step


def status_fields(output_path: str, raw: bytes | None) -> dict[str, Any]:
    """The fields of a ``StepView`` from a status file's bytes: ``StatusRecord``'s format,
    read without building the record (this runs for every step on every poll)."""
    if raw is None:
        return {"state": "PENDING"}
    try:
        data = loads(raw)
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        state = data.get("status")
        if not isinstance(state, str) or state not in STORED_STATUSES:
            raise ValueError(f"unknown status {state!r}")
    except ValueError as e:
        return {"state": "CORRUPT",
                "error": f"{status_path(output_path)} is unreadable (not a valid status "
                         f"record: {e})"}
    error = data.get("error") if state in ("FAILED", "CANCELLED") else None
    return {"state": state, "error": None if error is None else str(error),
            "updated": valid_time(data.get("time")) or None,
            "host": _plain(data.get("host")), "run_id": _plain(data.get("run_id"))}


def _plain(value: Any) -> str:
    return value if isinstance(value, str) else "" if value is None else str(value)[:_SHOWN]


def info_view(info: dict[str, Any] | None, what: str = ".executor_info") -> InfoView | None:
    """The shown fields of a decoded ``.executor_info`` (None when there is none)."""
    if info is None:
        return None
    check = _Checker(what, info)
    return InfoView(created=check.time("created"), description=check.text("description"),
                    dependencies=check.texts("dependencies"), fn=check.text("fn"),
                    user=check.text("user"), git_commit=check.text("git_commit"),
                    problems=tuple(check.problems))
