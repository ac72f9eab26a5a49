"""The options the service commands share: which cluster, and times.

    cluster_args(parser)               # --cluster, --clusters
    cluster(args)                      # --cluster, else $MARIN_CLUSTER, else marin
    parse_time("2h")                   # an epoch time two hours ago
"""

from __future__ import annotations

import argparse
import math
import os
import re
import time
from datetime import datetime

from marin.cli.console import UsageError

__all__ = ["CLUSTER_ENV", "cluster", "cluster_args", "parse_time"]

CLUSTER_ENV = "MARIN_CLUSTER"


def cluster_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cluster", default=None,
                   help="cluster name (default: $MARIN_CLUSTER, else marin)")
    p.add_argument("--clusters", metavar="ROOT", default=None,
                   help="where cluster registries live, a folder or fsspec URL "
                   "(default: $MARIN_CLUSTERS, else ~/.marin/clusters)")


def cluster(args: argparse.Namespace) -> str:
    return args.cluster or os.environ.get(CLUSTER_ENV) or "marin"


def parse_time(text: str | None, now: float | None = None) -> float | None:
    if not text:
        return None
    now = time.time() if now is None else now
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([smhd])", text.strip())
    if m:
        return now - float(m.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        if not math.isfinite(seconds):
            raise UsageError(f"--since/--until {text!r}: use a finite number of epoch seconds")
        return seconds
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise UsageError(f"--since/--until {text!r}: use epoch seconds, an ISO time "
                         "(2025-01-31T12:00) or an age such as 10m, 2h, 1d") from None
