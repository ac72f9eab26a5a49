"""Training curves from ``metrics.jsonl``, read within a byte budget and cut to a number of
points per curve.

    curves = read_curves("/p/train/tiny-1a2b3c4d/metrics.jsonl")
    curves.series["loss"]     # ([steps], [values]), at most MAX_POINTS of them
    curves.series["task_acc"] # lm_eval/averages/acc: a run's downstream tasks, if any
    curves.note               # None, or how much of a large file was read and shown

A file larger than ``BUDGET`` is read as evenly spaced windows plus its last ``BUDGET / 2``
bytes (``bounded.read_spread``): the curves span the whole run, and its latest points are
exact. A curve of more than ``MAX_POINTS`` points keeps every k-th one and the last.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from marin.dashboard.bounded import Part, read_spread
from marin.dashboard.records import finite_number
from marin.training import metric_names as names

__all__ = ["BUDGET", "MAX_POINTS", "METRICS", "Curves", "read_curves"]

METRICS = (("loss", "training loss"), ("eval_loss", "eval loss"),
           ("eval_bpb", "eval bits per byte"), ("learning_rate", "learning rate"),
           ("tokens_per_s", "tokens / s"), ("mfu", "MFU"),
           ("task_acc", "task accuracy (mean over tasks)"),
           ("task_bpb", "task bits per byte (mean over tasks)"))
BUDGET = 8 << 20
MAX_POINTS = 2000
_NAMES = tuple(name for name, _ in METRICS)
#: each curve's metric in the file (older files' names are read through ``canonical``)
_SOURCES = {"loss": names.TRAIN_LOSS, "eval_loss": names.EVAL_LOSS, "eval_bpb": names.EVAL_BPB,
            "learning_rate": names.LEARNING_RATE, "tokens_per_s": names.TOKENS_PER_SECOND,
            "mfu": names.MFU,
            "task_acc": names.task_name(names.TASK_AVERAGES, "acc"),
            "task_bpb": names.task_name(names.TASK_AVERAGES, "bpb")}


@dataclass
class Curves:
    """What a page shows of one run's metrics."""

    series: dict[str, tuple[list[float], list[float]]] = field(default_factory=dict)
    records: int = 0
    bad_lines: int = 0
    missing: bool = True
    last: dict[str, float] = field(default_factory=dict)
    """The step and metrics of the last record with a loss."""
    note: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"series": {k: [list(x), list(y)] for k, (x, y) in self.series.items()},
                "records": self.records, "bad_lines": self.bad_lines,
                "missing": self.missing, "last": self.last, "note": self.note}


def read_curves(url: str | None, budget: int = BUDGET, max_points: int = MAX_POINTS
                ) -> Curves:
    """The curves of the ``metrics.jsonl`` at ``url`` (``missing`` when there is none, or
    ``url`` is None)."""
    parts = None if url is None else read_spread(url, budget)
    if parts is None:
        return Curves(series={name: ([], []) for name in _NAMES})
    points: dict[str, tuple[list[float], list[float]]] = {n: ([], []) for n in _NAMES}
    curves = Curves(missing=False)
    for part in parts:
        for line in _complete_lines(part):
            record = _record(line)
            if record is None:
                curves.bad_lines += 1
                continue
            curves.records += 1
            step = record["step"]
            for name in _NAMES:
                if name in record:
                    points[name][0].append(step)
                    points[name][1].append(record[name])
            if "loss" in record:
                curves.last = record
    thinned = False
    for name, (xs, ys) in points.items():
        curves.series[name], cut = _thin(xs, ys, max_points)
        thinned = thinned or cut
    size = parts[0].size
    if len(parts) > 1:
        curves.note = (f"metrics.jsonl is {size / 1e6:.0f} MB: read {budget / 1e6:.0f} MB of "
                       "it (its end whole, and windows spread over the rest)")
    if thinned:
        curves.note = ((curves.note + "; ") if curves.note else "") + \
            f"curves thinned to at most {max_points} points"
    return curves


def _complete_lines(part: Part) -> list[bytes]:
    """The lines of ``part`` that are whole: a window's first and last pieces are cut."""
    lines = part.data.split(b"\n")
    if part.offset > 0:
        lines = lines[1:]
    if part.offset + len(part.data) < part.size:
        lines = lines[:-1]
    return [line for line in lines if line.strip()]


def _record(line: bytes) -> dict[str, float] | None:
    """A metrics record's step and finite metrics, or None for a line that is not one."""
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    step = finite_number(data.get("step"))
    if step is None:
        return None
    record = {"step": int(step) if step.is_integer() else step}
    data = names.canonical(data)
    for name in _NAMES:
        value = finite_number(data.get(_SOURCES[name]))
        if value is not None:
            record[name] = value
    return record


def _thin(xs: list[float], ys: list[float], limit: int
          ) -> tuple[tuple[list[float], list[float]], bool]:
    if len(xs) <= limit:
        return (xs, ys), False
    stride = -(-len(xs) // (limit - 1))
    keep = [*range(0, len(xs) - 1, stride), len(xs) - 1]
    return ([xs[i] for i in keep], [ys[i] for i in keep]), True
