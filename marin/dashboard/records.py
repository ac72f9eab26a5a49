"""Typed views of the records the dashboard reads, decoded from any bytes without raising.

    inv = decode_invocation("20250101-120000-1a2b3c4d.json", raw)   # an InvocationRecord
    inv.started, inv.steps[0].key, inv.problems   # 1735732800.0, "train/tiny-1a2b3c4d", ()
    fields = status_fields("/p/train/tiny-1a2b3c4d", raw)   # {"state": ViewState.SUCCEEDED, ...}
    ViewState.of(StepState.FAILED), ViewState.STOPPED.value  # ViewState.FAILED, "STOPPED"
    view = info_view(info)                                  # InfoView: created, user, ...

Design note: records are written by executors of other versions, by hand, or damaged on
disk, so every field is checked once, where its type is defined, and pages and templates
only see typed values. A field of the wrong type is dropped and named in ``problems`` (the
page shows the rest and one line about what was ignored); a record that is not one at all
gets ``error``. Invocation records are ``marin.execution.invocation_record``'s type, which
the executor writes and ``marin gc`` reads too; status files are read by the executor's own
decoder (``StatusRecord.decode``), and a step's state on the pages is a ``ViewState``: the
executor's stored states (``StepState``, spelled as ``.executor_status`` spells them) and
the three only the dashboard knows (STOPPED, PENDING, CORRUPT).
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field
from typing import Any

from marin.execution import StepState
from marin.execution.invocation_record import InvocationRecord, InvocationStep
from marin.execution.record_fields import FieldReader, finite_number, loads, valid_time
from marin.execution.status import CorruptRecordError, StatusRecord, status_path

__all__ = ["InfoView", "InvocationRecord", "InvocationStep", "StepView", "ViewState",
           "decode_invocation", "finite_number", "info_view", "loads", "status_fields",
           "valid_time"]

#: The invocation stored as ``name`` (``<id>.json``) from its bytes; never raises.
decode_invocation = InvocationRecord.decode


class ViewState(enum.StrEnum):
    """A step's state as the pages show it, in the order they list states. The states a
    status file records are the executor's (``StepState``), each spelled as the file
    spells it (``StepState.stored``: ``SUCCESS``, ``FAILED``...); the dashboard adds three."""

    FAILED = StepState.FAILED.stored
    STOPPED = "STOPPED"
    """RUNNING with a stale or missing lease: its executor died."""
    CORRUPT = "CORRUPT"
    """An unreadable status file (explained in ``StepView.error``)."""
    RUNNING = StepState.RUNNING.stored
    CANCELLED = StepState.CANCELLED.stored
    PENDING = "PENDING"
    """No status file yet."""
    SUCCEEDED = StepState.SUCCEEDED.stored

    @classmethod
    def of(cls, state: StepState) -> ViewState:
        """The view of a state a status file records (ValueError for one never stored)."""
        return cls(state.stored)

    @property
    def is_problem(self) -> bool:
        """The step needs a look: it failed, its executor died, or its status is unreadable."""
        return self in (ViewState.FAILED, ViewState.STOPPED, ViewState.CORRUPT)


@dataclass(frozen=True)
class InfoView:
    """What pages show of a ``.executor_info`` (the record itself is shown as JSON)."""

    created: float | None = None
    description: str | None = None
    dependencies: tuple[str, ...] = ()
    nonblocking: tuple[str, ...] = ()
    fn: str | None = None
    user: str | None = None
    git_commit: str | None = None
    problems: tuple[str, ...] = ()


@dataclass
class StepView:
    """One step as the pages show it, read from its status, lease and info records."""

    key: str
    output_path: str
    state: ViewState = ViewState.PENDING
    error: str | None = None
    started: float | None = None
    updated: float | None = None
    host: str = ""
    run_id: str = ""
    owner: str | None = None
    dependencies: list[str] = field(default_factory=list)
    nonblocking: list[str] = field(default_factory=list)
    """The keys among ``dependencies`` the step did not wait for (from the plan)."""
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
        if self.state is ViewState.RUNNING:
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


def status_fields(output_path: str, raw: bytes | None) -> dict[str, Any]:
    """The fields of a ``StepView`` from a status file's bytes (None: no file yet), decoded
    by the executor's ``StatusRecord.decode``; never raises."""
    if raw is None:
        return {"state": ViewState.PENDING}
    try:
        record = StatusRecord.decode(raw)
    except CorruptRecordError as e:
        return {"state": ViewState.CORRUPT,
                "error": f"{status_path(output_path)} is unreadable ({e})"}
    error = record.error if record.status in _WITH_ERROR else None
    return {"state": ViewState.of(record.status), "error": None if error is None else str(error),
            "updated": valid_time(record.time) or None, "host": record.host,
            "run_id": record.run_id}


_WITH_ERROR = frozenset({StepState.FAILED, StepState.CANCELLED})


def info_view(info: dict[str, Any] | None, what: str = ".executor_info") -> InfoView | None:
    """The shown fields of a decoded ``.executor_info`` (None when there is none)."""
    if info is None:
        return None
    check = FieldReader(what, info)
    return InfoView(created=check.time("created"), description=check.text("description"),
                    dependencies=check.texts("dependencies"),
                    nonblocking=check.texts("nonblocking_dependencies"), fn=check.text("fn"),
                    user=check.text("user"), git_commit=check.text("git_commit"),
                    problems=tuple(check.problems))
