"""How pages write times, durations and numbers (template globals).

    fmt_time(1735732800.0)     # "2025-01-01 12:00:00" (local time); "-" for no valid time
    fmt_seconds(3725)          # "1h 02m"
    fmt_num(124_000_000)       # "124M"

Each accepts any value a record may hold and returns text: a value of the wrong type, out of
range or not finite is written plainly, never raised on.
"""

from __future__ import annotations

import time
from typing import Any

from marin.dashboard.records import finite_number, valid_time

__all__ = ["fmt_num", "fmt_seconds", "fmt_time"]


def fmt_time(epoch: Any) -> str:
    when = valid_time(epoch)
    if not when:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(when))


def fmt_seconds(value: Any) -> str:
    seconds = finite_number(value)
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m {secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m"


def fmt_num(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)[:60]
    if finite_number(value) is None:
        return ">1e308" if isinstance(value, int) else str(value)  # an int beyond floats
    magnitude = abs(value)
    for size, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if magnitude >= size:
            return f"{value / size:.3g}{suffix}"
    if isinstance(value, int):
        return str(value)
    return f"{value:.4g}"
