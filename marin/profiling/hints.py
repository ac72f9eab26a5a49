"""The built-in hints: each names its evidence and the threshold it passed.

    for hint in builtin_hints(summary):
        print(hint.message)   # "data loading is 23% of step time (> 10%): raise ..."

Thresholds are the ``*_THRESHOLD`` constants here (also importable from
``marin.profiling.trace_summary``). This module is below ``trace_summary``: it takes any
summary with the ``TraceSummary`` methods it calls.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

# Thresholds of the hints (fractions of the profiled step time unless said otherwise).
DATA_LOADING_THRESHOLD = 0.10
COMMUNICATION_THRESHOLD = 0.20
IDLE_THRESHOLD = 0.25
HOST_THRESHOLD = 0.25
STEP_SPREAD_THRESHOLD = 1.5  # p90 / median of the steady steps
FIRST_STEP_THRESHOLD = 3.0  # first step / median of the steady steps
DOMINANT_KERNEL_THRESHOLD = 0.5  # one op's share of device op time


@dataclass(frozen=True)
class Hint:
    """A suggestion with the figure that triggered it and its documented threshold."""

    id: str
    message: str
    value: float
    threshold: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def builtin_hints(summary: Any) -> list[Hint]:
    """The hints for ``summary`` (a ``TraceSummary``; this module is below it)."""
    hints: list[Hint] = []
    shares = summary.breakdown()
    where = "step time" if summary.data.steps else "profiled time"

    def share_hint(category: str, threshold: float, hint_id: str, advice: str,
                   label: str) -> None:
        value = shares[category].fraction
        if value > threshold:
            hints.append(Hint(hint_id, f"{label} is {value:.0%} of {where} "
                                 f"(> {threshold:.0%}): {advice}", value, threshold))

    share_hint("data_loading", DATA_LOADING_THRESHOLD, "data-loading",
               "raise loader prefetch (DataLoader(prefetch=...)) or read from a bucket in the "
               "compute region", "data loading")
    share_hint("communication", COMMUNICATION_THRESHOLD, "communication",
               "check the sharding and the preset's XLA flags (`marin hardware show`)",
               "communication")
    share_hint("idle", IDLE_THRESHOLD, "device-idle",
               "host-bound; look for Python work or synchronisation between steps",
               "device idle")
    share_hint("host", HOST_THRESHOLD, "host-work",
               "the device waits on host-side work (dispatch, Python, compilation); "
               "jit more of the step or move work off the step's path",
               "host-side work while the device waits")
    steps = summary.steps()
    if steps.count >= 3 and steps.steady_median > 0:
        spread = steps.steady_p90 / steps.steady_median
        if spread > STEP_SPREAD_THRESHOLD:
            hints.append(Hint("step-spread", f"step times vary: p90 is {spread:.1f}x the "
                                 f"median (> {STEP_SPREAD_THRESHOLD}x): look for "
                                 "recompilation, checkpoints or evaluation inside the "
                                 "profiled range", spread, STEP_SPREAD_THRESHOLD))
    if steps.count >= 2 and steps.steady_median > 0 and math.isfinite(steps.times[0]):
        ratio = steps.times[0] / steps.steady_median
        if ratio > FIRST_STEP_THRESHOLD:
            hints.append(Hint("first-step", f"the first profiled step takes {ratio:.1f}x "
                                 f"the steady median (> {FIRST_STEP_THRESHOLD}x): "
                                 "compilation inside the profile; start profile_steps after "
                                 "warm-up", ratio, FIRST_STEP_THRESHOLD))
    top = summary.top_kernels(1)
    total = summary.kernel_seconds
    if top and total > 0 and top[0].seconds / total > DOMINANT_KERNEL_THRESHOLD:
        value = top[0].seconds / total
        hints.append(Hint("dominant-kernel", f"{top[0].name} is {value:.0%} of device op "
                             f"time (> {DOMINANT_KERNEL_THRESHOLD:.0%}): it is the op to "
                             "optimise first", value, DOMINANT_KERNEL_THRESHOLD))
    return hints
