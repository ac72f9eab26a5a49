"""The built-in hints: each names its evidence and the threshold it passed.

    for hint in builtin_hints(summary):
        print(hint.message)   # "data loading is 23% of step time (> 10%): raise ..."

Thresholds are the ``*_THRESHOLD`` constants of ``marin.profiling.trace_summary``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from marin.profiling.trace_summary import Hint, TraceSummary


def builtin_hints(summary: TraceSummary) -> list[Hint]:
    from marin.profiling import trace_summary as ts

    hints: list[ts.Hint] = []
    shares = summary.breakdown()
    where = "step time" if summary.data.steps else "profiled time"

    def share_hint(category: str, threshold: float, hint_id: str, advice: str,
                   label: str) -> None:
        value = shares[category].fraction
        if value > threshold:
            hints.append(ts.Hint(hint_id, f"{label} is {value:.0%} of {where} "
                                 f"(> {threshold:.0%}): {advice}", value, threshold))

    share_hint("data_loading", ts.DATA_LOADING_THRESHOLD, "data-loading",
               "raise loader prefetch (DataLoader(prefetch=...)) or read from a bucket in the "
               "compute region", "data loading")
    share_hint("communication", ts.COMMUNICATION_THRESHOLD, "communication",
               "check the sharding and the preset's XLA flags (`marin hardware show`)",
               "communication")
    share_hint("idle", ts.IDLE_THRESHOLD, "device-idle",
               "host-bound; look for Python work or synchronisation between steps",
               "device idle")
    share_hint("host", ts.HOST_THRESHOLD, "host-work",
               "the device waits on host-side work (dispatch, Python, compilation); "
               "jit more of the step or move work off the step's path",
               "host-side work while the device waits")
    steps = summary.steps()
    if steps.count >= 3 and steps.steady_median > 0:
        spread = steps.steady_p90 / steps.steady_median
        if spread > ts.STEP_SPREAD_THRESHOLD:
            hints.append(ts.Hint("step-spread", f"step times vary: p90 is {spread:.1f}x the "
                                 f"median (> {ts.STEP_SPREAD_THRESHOLD}x): look for "
                                 "recompilation, checkpoints or evaluation inside the "
                                 "profiled range", spread, ts.STEP_SPREAD_THRESHOLD))
    if steps.count >= 2 and steps.steady_median > 0 and math.isfinite(steps.times[0]):
        ratio = steps.times[0] / steps.steady_median
        if ratio > ts.FIRST_STEP_THRESHOLD:
            hints.append(ts.Hint("first-step", f"the first profiled step takes {ratio:.1f}x "
                                 f"the steady median (> {ts.FIRST_STEP_THRESHOLD}x): "
                                 "compilation inside the profile; start profile_steps after "
                                 "warm-up", ratio, ts.FIRST_STEP_THRESHOLD))
    top = summary.top_kernels(1)
    total = summary.kernel_seconds
    if top and total > 0 and top[0].seconds / total > ts.DOMINANT_KERNEL_THRESHOLD:
        value = top[0].seconds / total
        hints.append(ts.Hint("dominant-kernel", f"{top[0].name} is {value:.0%} of device op "
                             f"time (> {ts.DOMINANT_KERNEL_THRESHOLD:.0%}): it is the op to "
                             "optimise first", value, ts.DOMINANT_KERNEL_THRESHOLD))
    return hints
