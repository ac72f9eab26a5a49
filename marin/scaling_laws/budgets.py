"""FLOP budgets: the default ladder and the bucket a run's FLOPs fall in.

    from marin.scaling_laws.budgets import DEFAULT_BUDGETS, flops_bucket
    DEFAULT_BUDGETS[3]          # 3e19
    flops_bucket(2.87e19)       # 3e19: runs are grouped into budgets by their bucket

This module imports nothing heavy, so a study can plan its budgets without the fits.
"""

from __future__ import annotations

import math

__all__ = ["DEFAULT_BUDGETS", "flops_bucket"]

#: the IsoFLOP ladder of the seed study, 1e18 to 1e21 in steps of about 3x; index 3 is 3e19
DEFAULT_BUDGETS: tuple[float, ...] = (1e18, 3e18, 1e19, 3e19, 1e20, 3e20, 1e21)


def flops_bucket(flops: float) -> float:
    """``flops`` rounded to one significant figure, as Marin groups runs into budgets (a
    run planned at 3e19 that spent 2.9e19 or 3.1e19 belongs to the 3e19 budget)."""
    if not flops > 0 or not math.isfinite(flops):
        raise ValueError(f"a run's FLOPs must be a positive number, got {flops!r}")
    exponent = math.floor(math.log10(flops))
    mantissa = round(flops / 10 ** exponent)
    return float(f"{mantissa}e{exponent}")
