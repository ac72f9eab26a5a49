"""Phases of a run (``marin.execution.phases``): exclusive figures, nested clocks, laps, and
the typed record. The clock source is replaced by a scripted one (``_now``), so every
figure is known exactly; the real clocks are read by the training tests' phases."""

from __future__ import annotations

import json
import threading

import pytest

from marin.execution import phases
from marin.execution.phases import (
    Laps,
    PhaseTime,
    PhaseTimes,
    PhaseTimesError,
    phase,
    recording,
)


@pytest.fixture
def clock(monkeypatch) -> list[float]:
    """A scripted clock: process CPU ``t``, thread CPU ``t / 2``, wall ``2 t``."""
    now = [0.0]
    monkeypatch.setattr(phases, "_now", lambda: (now[0], now[0] / 2, now[0] * 2))
    return now


def test_a_phase_keeps_only_its_own_time_and_the_clocks_nest(clock):
    with recording() as outer:
        with phase("lease"):
            clock[0] += 1
        with phase("run"):
            clock[0] += 2
            with recording() as inner, phase("steps"):
                clock[0] += 4
            clock[0] += 8
        with phase("run"):
            clock[0] += 16
    times = outer.times()
    assert list(times.phases) == ["lease", "steps", "run"]  # in the order they ended
    assert times.phases["lease"] == PhaseTime(1, 0.5, 2, 1)
    assert times.phases["steps"] == PhaseTime(4, 2, 8, 1)
    assert times.phases["run"] == PhaseTime(26, 13, 52, 2)  # 2 + 8 + 16, without steps
    assert times.total() == PhaseTime(31, 15.5, 62, 4)  # every second, counted once
    assert times.total(leave_out=("steps", "lease")) == PhaseTime(26, 13, 52, 2)
    assert inner.times().phases == {"steps": PhaseTime(4, 2, 8, 1)}


def test_laps_divide_straight_line_code_and_nest_phases(clock):
    with recording() as outer:
        laps = Laps()
        clock[0] += 1
        laps.lap("lease")
        clock[0] += 2
        with phase("steps"):
            clock[0] += 4
        laps.lap("run")
        clock[0] += 8
        laps.end("commit")
        laps.end("again")  # ended once: nothing more
    assert {n: t.cpu for n, t in outer.times().phases.items()} == \
        {"lease": 1, "steps": 4, "run": 2, "commit": 8}


def test_laps_left_open_by_a_raise_do_not_leak_into_later_phases(clock):
    with recording() as outer:
        laps = Laps()
        with pytest.raises(RuntimeError), phase("outer"):
            inner = Laps()  # never ended: the raise leaves it
            raise RuntimeError("stop")
        laps.end("first")
        with phase("later"):
            clock[0] += 1
    assert inner is not None
    assert outer.times().phases["later"].cpu == 1


def test_outside_a_clock_nothing_is_recorded_and_threads_keep_their_own(clock):
    with phase("nowhere"):
        clock[0] += 1
    Laps().end("nowhere")
    seen: list[PhaseTimes] = []

    def other() -> None:
        with recording() as mine, phase("other"):
            pass
        seen.append(mine.times())

    with recording() as here, phase("here"):
        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
    assert list(here.times().phases) == ["here"]
    assert list(seen[0].phases) == ["other"]


def test_the_record_round_trips_and_bad_records_are_refused_in_one_line():
    times = PhaseTimes({"lease": PhaseTime(0.25, 0.125, 0.5, 1),
                        "steps": PhaseTime(3.0, 2.5, 4.0, 117)})
    data = times.encode()
    assert PhaseTimes.decode(data) == times
    assert json.loads(data)["format"] == PhaseTimes.FORMAT
    record = json.loads(data)
    for bad, words in ((b"{", "not JSON"), (b"[]", "not a phases record"),
                       (json.dumps({**record, "version": 99}), "upgrade marin"),
                       (json.dumps({**record, "phases": {"x": {"cpu": 1}}}), "malformed")):
        with pytest.raises(PhaseTimesError, match=words) as error:
            PhaseTimes.decode(bad)
        assert "\n" not in str(error.value)
