"""Where a run's time goes: named phases, each with its CPU and wall seconds.

    with recording() as clock:            # this thread's phases from here on
        with phase("lease"):
            take_the_lease()
        with phase("run"):
            with phase("steps"):          # nested: "run" keeps only its own time
                train()
    laps = Laps()                         # consecutive phases, no blocks to nest
    take_the_lease(); laps.lap("lease")   # the time since the previous lap (or the start)
    commit(); laps.end("commit")
    times = clock.times()                 # a PhaseTimes
    times.phases["steps"].cpu, times.phases["run"].wall, times.total().cpu
    PhaseTimes.decode(times.encode()) == times

A phase's figures are exclusive: the time of the phases opened inside it goes to them, not
to it, so the phases of one clock add up to the time they cover. Each clock records the
phases that end in its thread while it is open; clocks nest (a training run's clock inside
its step's worker's: the worker's sees the run's phases too). Outside any clock ``phase``
records nothing, at the cost of one attribute lookup.

``cpu`` is the process's CPU time (``time.process_time``: every thread, XLA's compute and
orbax's background writes included), ``thread`` this thread's alone
(``time.thread_time``), ``wall`` the elapsed time (``time.perf_counter``). With one step
running at a time, ``cpu`` is what the phase cost the machine; with several, the others'
work falls into it too, and ``thread`` is the phase's own share.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

__all__ = ["PHASES", "Laps", "PhaseClock", "PhaseTime", "PhaseTimes", "PhaseTimesError",
           "phase", "recording"]

#: A run's phases file (``PhaseTimes``), beside its ``summary.json``.
PHASES = "phases.json"


class PhaseTimesError(ValueError):
    """A phases record cannot be read; the message says what is wrong."""


@dataclass(frozen=True)
class PhaseTime:
    """The seconds spent in one phase, over every time it was entered.

    Attributes:
        cpu: CPU seconds of the whole process (``time.process_time``).
        thread: CPU seconds of the thread that ran the phase (``time.thread_time``).
        wall: elapsed seconds (``time.perf_counter``).
        count: how many times the phase was entered.
    """

    cpu: float = 0.0
    thread: float = 0.0
    wall: float = 0.0
    count: int = 0

    def __add__(self, other: PhaseTime) -> PhaseTime:
        return PhaseTime(self.cpu + other.cpu, self.thread + other.thread,
                         self.wall + other.wall, self.count + other.count)


@dataclass(frozen=True)
class PhaseTimes:
    """A run's phases, in the order each was first entered.

    Attributes:
        phases: each phase's name and its exclusive ``PhaseTime``.
    """

    FORMAT = "marin.phase_times"
    VERSION = 1

    phases: dict[str, PhaseTime] = field(default_factory=dict)

    def total(self, leave_out: tuple[str, ...] = ()) -> PhaseTime:
        """The sum of every phase but those named in ``leave_out``."""
        out = PhaseTime()
        for name, figures in self.phases.items():
            if name not in leave_out:
                out = out + figures
        return out

    def encode(self) -> bytes:
        phases = {name: {"cpu": t.cpu, "thread": t.thread, "wall": t.wall, "count": t.count}
                  for name, t in self.phases.items()}
        return json.dumps({"format": self.FORMAT, "version": self.VERSION, "phases": phases},
                          indent=1).encode()

    @classmethod
    def decode(cls, data: bytes | str) -> PhaseTimes:
        try:
            record = json.loads(data)
        except ValueError as e:
            raise PhaseTimesError(f"a phases record is not JSON: {e}") from None
        if not isinstance(record, dict) or record.get("format") != cls.FORMAT:
            raise PhaseTimesError(f"not a phases record (format {cls.FORMAT!r} expected)")
        if record.get("version") != cls.VERSION:
            raise PhaseTimesError(f"a phases record of version {record.get('version')!r}; "
                                  f"this marin reads version {cls.VERSION}: upgrade marin")
        try:
            return cls({str(name): PhaseTime(float(t["cpu"]), float(t["thread"]),
                                             float(t["wall"]), int(t["count"]))
                        for name, t in record["phases"].items()})
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise PhaseTimesError(f"a phases record with a malformed phase: {e!r}") from None


class PhaseClock:
    """The phases recorded while it is open (``recording``); read with ``times``."""

    def __init__(self) -> None:
        self._phases: dict[str, PhaseTime] = {}

    def add(self, name: str, figures: PhaseTime) -> None:
        self._phases[name] = self._phases.get(name, PhaseTime()) + figures

    def times(self) -> PhaseTimes:
        return PhaseTimes(dict(self._phases))


class _Frame:
    __slots__ = ("inner", "name", "start")

    def __init__(self, name: str, start: tuple[float, float, float]):
        self.name, self.start = name, start
        self.inner = (0.0, 0.0, 0.0)  # the phases opened inside this one


class _Thread(threading.local):
    def __init__(self) -> None:
        self.clocks: list[PhaseClock] = []
        self.frames: list[_Frame] = []


_local = _Thread()


def _now() -> tuple[float, float, float]:
    return time.process_time(), time.thread_time(), time.perf_counter()


@contextmanager
def recording() -> Iterator[PhaseClock]:
    """A clock of the phases this thread ends until the block ends."""
    clock = PhaseClock()
    _local.clocks.append(clock)
    try:
        yield clock
    finally:
        _local.clocks.remove(clock)


@contextmanager
def phase(name: str) -> Iterator[None]:
    """Time the block as phase ``name`` in every clock open in this thread."""
    if not _local.clocks:
        yield
        return
    frame = _Frame(name, _now())
    _local.frames.append(frame)
    try:
        yield
    finally:
        _close(frame, name)


def _close(frame: _Frame, name: str) -> None:
    """Record ``frame``, the innermost open phase, as ``name`` in every open clock."""
    end = _now()
    _local.frames.pop()
    spent = tuple(e - s for e, s in zip(end, frame.start, strict=True))
    own = [s - i for s, i in zip(spent, frame.inner, strict=True)]
    if _local.frames:  # the enclosing phase leaves this one's time out of its own
        outer = _local.frames[-1]
        outer.inner = tuple(i + s for i, s in zip(outer.inner, spent, strict=True))
    figures = PhaseTime(*own, count=1)
    for clock in _local.clocks:
        clock.add(name, figures)


class Laps:
    """Consecutive phases of straight-line code: ``lap(name)`` ends the phase ``name``
    begun at the previous lap (or at the ``Laps``' creation) and begins the next; ``end``
    ends the last. Phases opened in between are nested in the current lap. Outside any
    clock it records nothing."""

    def __init__(self) -> None:
        self._frame: _Frame | None = None
        self._begin()

    def _begin(self) -> None:
        self._frame = _Frame("", _now()) if _local.clocks else None
        if self._frame is not None:
            _local.frames.append(self._frame)

    def lap(self, name: str) -> None:
        self.end(name)
        self._begin()

    def end(self, name: str) -> None:
        frame, self._frame = self._frame, None
        if frame is None or frame not in _local.frames:
            return
        while _local.frames[-1] is not frame:  # left open by a raise: dropped, not counted
            _local.frames.pop()
        _close(frame, name)
