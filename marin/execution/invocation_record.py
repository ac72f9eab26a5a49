"""The record of one executor invocation, ``<prefix>/.marin/invocations/<id>.json``: the one
type its writer (``marin.execution.invocations``), the dashboard and ``marin gc`` share.

    record = InvocationRecord.decode("20250101-120000-1a2b3c4d.json", raw)   # never raises
    record.experiment, record.steps[0].key, record.problems   # "exp.py", "train/tiny-...", ()
    raw = json.dumps(record.to_json()).encode()

Format 3 adds the experiment's ``script`` (its file's resolved path) and ``name`` (see
``ExperimentId``), which tell experiments apart for ``marin gc``; format 2 added each
step's ``nonblocking`` dependencies. Files of formats 1 and 2 (without them, and without
``format`` at all before it was written) read the same otherwise, with ``script`` and
``name`` None. Decoding checks
every field once: one of the wrong type is dropped and named in ``problems``; bytes that
are no record at all give a record whose ``error`` says why.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from marin.execution.outcome import StepOutcome
from marin.execution.record_fields import FieldReader, loads, shown
from marin.execution.states import StepState

__all__ = ["ExperimentId", "InvocationRecord", "InvocationStep"]


_DONE = (StepState.SUCCEEDED.value, StepState.REUSED.value)
_SUCCEEDED = (StepState.SUCCEEDED.value, StepState.SUCCEEDED.stored)  # format 1 stored "SUCCESS"


@dataclass(frozen=True)
class ExperimentId:
    """Which experiment an invocation ran, as its front end knows it."""

    label: str
    """The experiment as it was typed or started (``experiments/x.py``, a module's name),
    shown by the dashboard and matched by ``marin gc --keep``."""
    script: str | None = None
    """The resolved path of the experiment's file; None for ``Executor.run`` from code."""
    name: str | None = None
    """The experiment's name: the file's stem or the module's name, followed by each of
    the experiment's own options given a value other than its default (``isoflop
    --budget=3e+18``); for an invocation from code, the name it was given."""


@dataclass(frozen=True)
class InvocationStep:
    """One step of the plan: what the plan said, and how the step ended."""

    key: str
    name: str = ""
    output_path: str | None = None
    dependencies: tuple[str, ...] = ()
    nonblocking: tuple[str, ...] = ()
    """The keys among ``dependencies`` that the step did not wait for."""
    action: str | None = None
    reason: str | None = None
    description: str | None = None
    status_at_plan: str | None = None
    outcome: str | None = None
    seconds: float | None = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["dependencies"], data["nonblocking"] = list(self.dependencies), list(self.nonblocking)
        return data

    @classmethod
    def from_json(cls, entry: Any, what: str, problems: list[str]) -> InvocationStep | None:
        """The step in ``entry``, or None (with a problem) when it has no key."""
        if not isinstance(entry, dict) or not isinstance(entry.get("key"), str) \
                or not entry["key"]:
            problems.append(f"{what} is not a step with a 'key' ({shown(entry)}); ignored")
            return None
        check = FieldReader(f"{what} ({entry['key']})", entry)
        step = cls(key=entry["key"], name=check.text("name") or "",
                   output_path=check.text("output_path"),
                   dependencies=check.texts("dependencies"),
                   nonblocking=check.texts("nonblocking"), action=check.text("action"),
                   reason=check.text("reason"), description=check.text("description"),
                   status_at_plan=check.text("status_at_plan"), outcome=check.text("outcome"),
                   seconds=check.number("seconds"), error=check.text("error"))
        problems.extend(check.problems)
        return step


@dataclass(frozen=True)
class InvocationRecord:
    """One executor invocation."""

    FORMAT: ClassVar[int] = 3

    id: str
    format: int = FORMAT
    prefix: str | None = None
    experiment: str = "?"
    """The experiment as its front end names it (the script's path or the module)."""
    script: str | None = None
    """The resolved path of the experiment's file (``ExperimentId.script``); None in a
    record of format 1 or 2, or for an invocation started from code."""
    name: str | None = None
    """The experiment's name (``ExperimentId.name``); None in a record of format 1 or 2."""
    argv: tuple[str, ...] = ()
    cwd: str | None = None
    user: str | None = None
    host: str | None = None
    pid: int | None = None
    git_commit: str | None = None
    started: float | None = None
    ended: float | None = None
    """None while the invocation runs (or when its executor died before the end)."""
    counts: dict[str, int] = field(default_factory=dict)
    """Steps by outcome, once ended."""
    steps: tuple[InvocationStep, ...] = ()
    error: str | None = None
    """Why the stored bytes are no record at all (then every other field is a default)."""
    problems: tuple[str, ...] = ()
    """Fields that were ignored when decoding, each with why."""

    @property
    def duration(self) -> float | None:
        if self.started is None or self.ended is None or self.ended < self.started:
            return None
        return self.ended - self.started

    @property
    def complete(self) -> bool:
        """It ended with every step of its plan done: succeeded or reused in this
        invocation, or skipped because it had succeeded before. (A step skipped as not
        selected by ``run_only``, a failure, a cancel or a record cut short is not.)"""
        return self.ended is not None and self.error is None and bool(self.steps) and all(
            s.outcome in _DONE or (s.outcome == StepState.SKIPPED.value
                                   and s.status_at_plan in _SUCCEEDED)
            for s in self.steps)

    def finished(self, ends: Mapping[str, StepOutcome], ended: float) -> InvocationRecord:
        """The record at the end: each step's outcome (``ends`` by key; a step without one
        was skipped by the plan, or cancelled: its ``seconds`` stay None), the counts by
        outcome, the end time."""
        steps = []
        for step in self.steps:
            end = ends.get(step.key)
            if end is None:
                missing = StepState.SKIPPED if step.action == "skip" else StepState.CANCELLED
                steps.append(dataclasses.replace(step, outcome=missing.value, seconds=None,
                                                 error=None))
                continue
            steps.append(dataclasses.replace(step, outcome=end.state.value,
                                             seconds=round(end.seconds, 3), error=end.error))
        counts: dict[str, int] = {}
        for step in steps:
            counts[step.outcome] = counts.get(step.outcome, 0) + 1
        return dataclasses.replace(self, steps=tuple(steps), counts=counts, ended=ended)

    def to_json(self) -> dict[str, Any]:
        return {"format": self.FORMAT, "id": self.id, "prefix": self.prefix,
                "experiment": self.experiment, "script": self.script, "name": self.name,
                "argv": list(self.argv), "cwd": self.cwd,
                "user": self.user, "host": self.host, "pid": self.pid,
                "git_commit": self.git_commit, "started": self.started, "ended": self.ended,
                "steps": [s.to_json() for s in self.steps],
                "counts": dict(self.counts) if self.ended is not None else None}

    @classmethod
    def from_json(cls, data: Any, name: str) -> InvocationRecord:
        """The record in ``data`` (parsed JSON) stored as ``name``; never raises."""
        invocation_id = name.removesuffix(".json")
        if not isinstance(data, dict) or not isinstance(data.get("steps"), list):
            return cls(invocation_id,
                       error=f"invocation record {name} is unreadable (no 'steps' list)")
        what = f"invocation record {name}"
        check = FieldReader(what, data)
        fields = dict(format=check.integer("format") or 1, prefix=check.text("prefix"),
                      experiment=check.text("experiment") or "?",
                      script=check.text("script"), name=check.text("name"),
                      argv=check.texts("argv"),
                      cwd=check.text("cwd"), user=check.text("user"), host=check.text("host"),
                      pid=check.integer("pid"), git_commit=check.text("git_commit"),
                      started=check.time("started"), ended=check.time("ended"),
                      counts=check.counts("counts"))
        steps = [InvocationStep.from_json(entry, f"{what}, step {i}", check.problems)
                 for i, entry in enumerate(data["steps"])]
        return cls(id=invocation_id, steps=tuple(s for s in steps if s is not None),
                   problems=tuple(check.problems), **fields)

    @classmethod
    def decode(cls, name: str, raw: bytes | None) -> InvocationRecord:
        """The record stored as ``name`` (``<id>.json``) from its bytes; never raises."""
        invocation_id = name.removesuffix(".json")
        if raw is None:
            return cls(invocation_id, error=f"invocation record {name} vanished")
        try:
            data = loads(raw)
        except ValueError as e:
            return cls(invocation_id, error=f"invocation record {name} is unreadable ({e})")
        return cls.from_json(data, name)
