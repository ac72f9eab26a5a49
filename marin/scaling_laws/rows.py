"""Tables of runs (a study's ``runs.csv``, any results table) as ``RunRow``s, by column.

    row = row_from_columns({"params": "4e4", "tokens": "1e6", "loss": "3.2"}, "t.csv", "row 1")
    text = rows_csv([row])

A study's fit step writes the file (``marin.scaling_laws.study.artifacts``); it and the
readers of results tables (``marin.scaling_laws.results``) read rows through
``row_from_columns``, so both apply one schema. A bad value raises ``ArtifactError`` naming
the file and row.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping, Sequence
from typing import Any

from marin.scaling_laws.codec import ArtifactError
from marin.scaling_laws.run_status import RunStatus
from marin.scaling_laws.values import RunRow

__all__ = ["row_from_columns", "rows_csv"]


_COLUMNS = ("run", "group", "label", "budget", "seed", "replicate_of", "hidden_dim",
            "num_layers", "params", "tokens", "flops", "loss", "train_loss", "first_eval_loss",
            "status", "reason", "parent_run", "branch_step")


def rows_csv(rows: Sequence[RunRow]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(_COLUMNS)
    for row in rows:
        writer.writerow(["" if getattr(row, c) is None else getattr(row, c) for c in _COLUMNS])
    return buffer.getvalue()


def row_from_columns(r: Mapping[str, Any], where: str, default_run: str) -> RunRow:
    """A ``RunRow`` from a table's columns (a ``runs.csv`` row, or any results table with
    ``params``, ``tokens``, ``loss`` and optional ``flops``, ``budget``, ``run``, ``label``,
    ``status``, ``reason``, ``replicate_of`` ...); ``flops`` defaults to ``6 * params *
    tokens``. A table of the previous format (no label or seed) reads as label ``default``,
    one without ``parent_run`` and ``branch_step`` as runs from scratch."""
    def number(key: str, kind: type = float) -> Any:
        value = r.get(key)
        if value is None or value == "":
            return None
        try:
            number = float(value)
            return int(number) if kind is int else number
        except (TypeError, ValueError):
            raise ArtifactError(f"{where}: {key}={value!r} is not a number") from None

    def text(key: str) -> str | None:
        value = r.get(key)
        return None if value is None or value == "" else str(value)

    def measured(key: str) -> float:
        value = number(key)
        return math.nan if value is None else value

    def status() -> RunStatus:
        value = text("status")
        if value is None:
            return RunStatus.OK
        try:
            return RunStatus(value)
        except ValueError:
            raise ArtifactError(f"{where}: status={value!r} is not a run status; known: "
                                f"{', '.join(s.value for s in RunStatus)}") from None

    params, tokens = measured("params"), measured("tokens")
    return RunRow(run=text("run") or default_run, group=text("group") or "",
                  label=text("label") or "default", budget=number("budget"),
                  seed=number("seed", int) or 0, replicate_of=text("replicate_of"),
                  hidden_dim=number("hidden_dim", int), num_layers=number("num_layers", int),
                  params=params, tokens=tokens,
                  flops=measured("flops") if "flops" in r else 6 * params * tokens,
                  loss=measured("loss"), train_loss=number("train_loss"),
                  first_eval_loss=number("first_eval_loss"), status=status(),
                  reason=text("reason"), parent_run=text("parent_run"),
                  branch_step=number("branch_step", int))
