"""Ids that sort by the time they were made: invocations, attempts, gc leases and logs.

    time_ordered_id()   # '20261202-010203-123456-3f9a0c1e': local time to the microsecond,
                        # then 8 random hex digits

Attempts are told apart by such ids, and a resume adopts the newest of them
(``marin.execution.shared.adopted_attempt``), so two made within one second must still sort
in the order they were made: the microseconds do that. Ids made by older code
(``20261202-010203-3f9a0c1e``) sort among them by their second.
"""

from __future__ import annotations

import time
import uuid

__all__ = ["time_ordered_id"]


def time_ordered_id() -> str:
    """A fresh id: its creation time to the microsecond, then a random suffix."""
    now = time.time_ns() // 1000
    seconds, micros = divmod(now, 1_000_000)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(seconds))
    return f"{stamp}-{micros:06d}-{uuid.uuid4().hex[:8]}"
