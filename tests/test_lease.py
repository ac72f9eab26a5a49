"""Leases: exclusive, renewed, taken over only when stale, lost leases noticed.

Staleness is judged by a fake clock that the tests advance; only the heartbeat's own cadence
(a tenth of the ttl) runs in real time, and tests wait for its renewals to appear on storage.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from marin.execution.lease import Lease, LeaseRecord
from marin.storage import get_storage


class FakeClock:
    """A wall clock that moves only when told to."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def _wait_for(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    """Wait for a background thread's effect (no assertion on how long it takes)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.01)


def _lease(tmp_path: Path, owner: str, clock: FakeClock, ttl: float = 30.0) -> Lease:
    path = str(tmp_path / ".executor_lease")
    return Lease(get_storage(path), path, owner, ttl, clock=clock)


def _record(tmp_path: Path) -> LeaseRecord:
    record = LeaseRecord.decode((tmp_path / ".executor_lease").read_bytes())
    assert record is not None
    return record


def test_a_live_lease_is_exclusive(tmp_path: Path, clock: FakeClock):
    a, b = _lease(tmp_path, "a", clock), _lease(tmp_path, "b", clock)
    assert a.try_acquire()
    assert not b.try_acquire()
    assert b.holder is not None and b.holder.owner == "a"
    a.release()
    assert not (tmp_path / ".executor_lease").exists()
    assert b.try_acquire()


def test_the_lease_is_stamped_with_its_clock(tmp_path: Path, clock: FakeClock):
    lease = _lease(tmp_path, "a", clock)
    assert lease.try_acquire()
    assert _record(tmp_path).renewed_at == clock.now
    clock.advance(12.5)
    assert lease.renew()
    assert _record(tmp_path).renewed_at == clock.now
    assert _record(tmp_path).describe(now=clock.now + 3) == f"a on {_record(tmp_path).host} " \
        f"(pid {_record(tmp_path).pid}), renewed 3s ago"


def test_a_stale_lease_is_taken_over_and_the_old_holder_notices(tmp_path: Path,
                                                                 clock: FakeClock):
    old = _lease(tmp_path, "old", clock, ttl=30)
    assert old.try_acquire()
    clock.advance(30)  # exactly ttl without a renewal: not yet stale
    assert not _lease(tmp_path, "early", clock).try_acquire()
    clock.advance(0.5)  # the holder stopped renewing (as a killed process would)
    new = _lease(tmp_path, "new", clock, ttl=30)
    assert new.try_acquire()
    assert new.took_over_from is not None and new.took_over_from.owner == "old"
    assert new.took_over_reason == "stale"
    assert old.renew() is False
    assert old.lost
    old.release()  # must not delete the new holder's lease
    assert _record(tmp_path).owner == "new"


def test_confirm_reads_a_fresh_lease_and_fails_once_it_was_taken_over(tmp_path: Path,
                                                                       clock: FakeClock):
    holder = _lease(tmp_path, "holder", clock, ttl=30)
    assert holder.try_acquire()
    before = (tmp_path / ".executor_lease").stat()
    assert holder.confirm()  # written just now: checked by a read, the file left as it was
    after = (tmp_path / ".executor_lease").stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert _record(tmp_path).renewals == 0
    clock.advance(31)  # the holder was paused past the ttl; someone else takes over
    assert _lease(tmp_path, "new", clock, ttl=30).try_acquire()
    assert holder.confirm() is False and holder.lost


def test_confirm_renews_a_lease_older_than_half_its_ttl(tmp_path: Path, clock: FakeClock):
    holder = _lease(tmp_path, "holder", clock, ttl=0.2)
    assert holder.try_acquire()
    written = time.monotonic()
    while time.monotonic() - written < 0.15:  # past half the ttl, by the holder's own clock
        time.sleep(0.01)
    clock.advance(0.15)
    assert holder.confirm()
    record = _record(tmp_path)
    assert record.renewals == 1 and record.renewed_at == clock.now


def test_a_renewal_restarts_the_ttl(tmp_path: Path, clock: FakeClock):
    holder = _lease(tmp_path, "holder", clock, ttl=30)
    assert holder.try_acquire()
    for _ in range(5):  # 5 x 20 s = 100 s, well past the ttl, renewed all along
        clock.advance(20)
        assert not _lease(tmp_path, "rival", clock).try_acquire()
        assert holder.renew()
    clock.advance(31)
    assert _lease(tmp_path, "rival", clock).try_acquire()
    assert not holder.renew() and holder.lost


def _renewals(tmp_path: Path) -> int:
    return _record(tmp_path).renewals


def test_heartbeat_keeps_a_lease_alive_past_its_ttl(tmp_path: Path, clock: FakeClock):
    # A short ttl only so that the heartbeat (every ttl/10 of real time) beats often.
    holder = _lease(tmp_path, "holder", clock, ttl=0.5)
    assert holder.try_acquire()
    holder.start_heartbeat()
    try:
        for _ in range(4):  # 4 x 0.4 s of fake time: past the ttl three times over
            clock.advance(0.4)
            _wait_for(lambda: _record(tmp_path).renewed_at == clock.now,
                      "a heartbeat renewal stamped with the advanced clock")
            assert not _lease(tmp_path, "rival", clock).try_acquire()
        assert holder.held
    finally:
        holder.release()
    assert not (tmp_path / ".executor_lease").exists()


def _renewal_threads(lease: Lease) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == f"lease:{lease.path}"]


def test_the_renewal_thread_starts_only_when_the_first_renewal_is_due(tmp_path: Path,
                                                                      clock: FakeClock):
    quick = _lease(tmp_path / "quick", "quick", clock, ttl=1.0)
    assert quick.try_acquire()
    quick.start_heartbeat()
    assert not _renewal_threads(quick)  # nothing started yet: the first renewal is 0.1 s away
    quick.release()  # a short step: done before its first renewal
    slow = _lease(tmp_path / "slow", "slow", clock, ttl=1.0)
    assert slow.try_acquire()
    slow.start_heartbeat()  # due after the quick lease's first renewal would have been
    try:
        _wait_for(lambda: _renewals(tmp_path / "slow") >= 1, "the slow lease's first renewal")
        assert len(_renewal_threads(slow)) == 1
        assert not _renewal_threads(quick)
    finally:
        slow.release()
    assert not _renewal_threads(slow)


def test_a_corrupt_lease_file_counts_as_stale(tmp_path: Path, clock: FakeClock):
    (tmp_path / ".executor_lease").write_text("{not json")
    lease = _lease(tmp_path, "me", clock)
    assert lease.try_acquire()
    assert lease.took_over_from is None


def test_a_renewal_in_the_future_counts_as_stale(tmp_path: Path, clock: FakeClock):
    near = LeaseRecord("skewed", "elsewhere", 42, clock.now + 59, 60)
    (tmp_path / ".executor_lease").write_bytes(near.encode())
    assert not _lease(tmp_path, "me", clock).try_acquire()  # within the ttl: live
    ahead = LeaseRecord("skewed", "elsewhere", 42, clock.now + 61, 60)
    (tmp_path / ".executor_lease").write_bytes(ahead.encode())
    lease = _lease(tmp_path, "me", clock)
    assert lease.try_acquire()
    assert lease.took_over_reason == "future"
    assert ahead.describe(now=clock.now).endswith("renewed 61s in the future")


def test_a_lease_that_can_never_expire_is_no_lease(tmp_path: Path, clock: FakeClock):
    (tmp_path / ".executor_lease").write_text(
        '{"owner": "x", "host": "h", "pid": 1, "renewed_at": 1e300, "ttl": Infinity, '
        '"renewals": 0}')
    assert LeaseRecord.decode((tmp_path / ".executor_lease").read_bytes()) is None
    assert _lease(tmp_path, "me", clock).try_acquire()


def test_a_lease_held_by_a_live_process_here_is_not_taken(tmp_path: Path,
                                                           clock: FakeClock):
    import os
    import socket
    import subprocess
    import sys

    from marin.execution.lease import boot_id

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        record = LeaseRecord("other", socket.gethostname(), child.pid, clock.now, 600, 0,
                             boot_id())
        (tmp_path / ".executor_lease").write_bytes(record.encode())
        assert not _lease(tmp_path, "me", clock).try_acquire()
    finally:
        child.kill()
        child.wait()
    assert boot_id() and record.holder_is_dead()  # gone (and reaped): taken at once
    lease = _lease(tmp_path, "me", clock)
    assert lease.try_acquire() and lease.took_over_reason == "dead"
    assert os.getpid() != child.pid
