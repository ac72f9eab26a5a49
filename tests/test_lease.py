"""Leases: exclusive, renewed, taken over only when stale, lost leases noticed."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from marin.execution.lease import Lease, LeaseRecord
from marin.storage import get_storage


def _lease(tmp_path: Path, owner: str, ttl: float = 30.0) -> Lease:
    path = str(tmp_path / ".executor_lease")
    return Lease(get_storage(path), path, owner, ttl)


def test_a_live_lease_is_exclusive(tmp_path: Path):
    a, b = _lease(tmp_path, "a"), _lease(tmp_path, "b")
    assert a.try_acquire()
    assert not b.try_acquire()
    assert b.holder is not None and b.holder.owner == "a"
    a.release()
    assert not (tmp_path / ".executor_lease").exists()
    assert b.try_acquire()


def test_a_stale_lease_is_taken_over_and_the_old_holder_notices(tmp_path: Path):
    old = _lease(tmp_path, "old", ttl=0.2)
    assert old.try_acquire()
    time.sleep(0.3)  # the holder stopped renewing (as a killed process would)
    new = _lease(tmp_path, "new", ttl=30)
    assert new.try_acquire()
    assert new.took_over_from is not None and new.took_over_from.owner == "old"
    assert old.renew() is False
    assert old.lost
    old.release()  # must not delete the new holder's lease
    record = LeaseRecord.decode((tmp_path / ".executor_lease").read_bytes())
    assert record is not None and record.owner == "new"


def test_heartbeat_keeps_a_lease_alive_past_its_ttl(tmp_path: Path):
    holder = _lease(tmp_path, "holder", ttl=1.0)
    assert holder.try_acquire()
    holder.start_heartbeat()
    try:
        deadline = time.monotonic() + 2.5
        while time.monotonic() < deadline:
            assert not _lease(tmp_path, "rival", ttl=30).try_acquire()
            time.sleep(0.2)
        assert holder.held
    finally:
        holder.release()


def _renewal_threads(lease: Lease) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == f"lease:{lease.path}"]


def test_the_renewal_thread_starts_only_when_the_first_renewal_is_due(tmp_path: Path):
    quick = _lease(tmp_path / "quick", "quick", ttl=1.0)
    assert quick.try_acquire()
    quick.start_heartbeat()
    assert not _renewal_threads(quick)  # nothing started yet: the first renewal is 0.1 s away
    quick.release()  # a short step: done before its first renewal
    slow = _lease(tmp_path / "slow", "slow", ttl=1.0)
    assert slow.try_acquire()
    slow.start_heartbeat()
    try:
        time.sleep(0.45)  # past the due time of the quick lease's first renewal, and more
        assert not _renewal_threads(quick)
        assert len(_renewal_threads(slow)) == 1
        record = LeaseRecord.decode((tmp_path / "slow" / ".executor_lease").read_bytes())
        assert record is not None and record.renewals >= 1
    finally:
        slow.release()
    assert not _renewal_threads(slow)


def test_a_corrupt_lease_file_counts_as_stale(tmp_path: Path):
    (tmp_path / ".executor_lease").write_text("{not json")
    lease = _lease(tmp_path, "me")
    assert lease.try_acquire()
    assert lease.took_over_from is None


def test_a_renewal_in_the_future_counts_as_stale(tmp_path: Path):
    ahead = LeaseRecord("skewed", "elsewhere", 42, time.time() + 3600, 60)
    (tmp_path / ".executor_lease").write_bytes(ahead.encode())
    lease = _lease(tmp_path, "me")
    assert lease.try_acquire()
    assert lease.took_over_reason == "future"
    assert "in the future" in ahead.describe()


def test_a_lease_that_can_never_expire_is_no_lease(tmp_path: Path):
    (tmp_path / ".executor_lease").write_text(
        '{"owner": "x", "host": "h", "pid": 1, "renewed_at": 1e300, "ttl": Infinity, '
        '"renewals": 0}')
    assert LeaseRecord.decode((tmp_path / ".executor_lease").read_bytes()) is None
    assert _lease(tmp_path, "me").try_acquire()


def test_a_lease_held_by_a_live_process_here_is_not_taken(tmp_path: Path):
    import os
    import socket
    import subprocess
    import sys

    from marin.execution.lease import boot_id

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        record = LeaseRecord("other", socket.gethostname(), child.pid, time.time(), 600, 0,
                             boot_id())
        (tmp_path / ".executor_lease").write_bytes(record.encode())
        assert not _lease(tmp_path, "me").try_acquire()
    finally:
        child.kill()
        child.wait()
    assert boot_id() and record.holder_is_dead()  # gone (and reaped): taken at once
    lease = _lease(tmp_path, "me")
    assert lease.try_acquire() and lease.took_over_reason == "dead"
    assert os.getpid() != child.pid
