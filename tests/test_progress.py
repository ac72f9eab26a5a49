"""The progress ETA: none before a tenth of the estimated work is done, then the FLOPs
still to run at the rate of the finished steps."""

from __future__ import annotations

from marin.execution.progress import FlopEta


def _eta(**flops: float) -> FlopEta:
    eta = FlopEta()
    eta.pending.update(flops)
    return eta


def test_no_eta_while_the_finished_steps_are_a_small_part_of_the_work():
    # a ladder: a long stable run and its short branches; a branch finishes first
    eta = _eta(stable=90.0, branch=5.0, other=5.0)
    for key in ("stable", "branch"):
        eta.started(key)
    eta.finished("branch", True)
    assert eta.eta_seconds() is None and "ETA" not in eta.describe()
    eta.started("other")
    eta.finished("other", True)  # a tenth of the work done: the rate is read
    seconds = eta.eta_seconds()
    assert seconds is not None and seconds > 0 and "ETA" in eta.describe()


def test_a_failed_step_counts_no_work_done():
    eta = _eta(a=50.0, b=50.0)
    eta.started("a")
    eta.finished("a", False)
    assert eta.eta_seconds() is None and eta.failed == 1 and eta.left == 1
