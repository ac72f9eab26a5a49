"""Reading finished runs for the fits: tables (CSV, JSON lines or Parquet) and run folders.

    records = read_results("gs://bucket/sweep/results.parquet")   # RunRows
    rows = read_result_rows("local_store/isoflop-tiny/fit-1a2b3c4d/runs.csv")   # RunRows
    rows = read_runs(["runs.csv", "marin-runs/*", "wandb-exports/"], metric="loss")

``read_runs`` takes any mix of tables, run folders and folders of runs, and globs of them
(``marin.scaling_laws.run_readers`` reads the folders: marin's, Marin's
``tracker_metrics.jsonl``, Levanter's JSON logger, W&B exports). A table's metric is its
``loss`` column, or the column ``metric`` names.

Required columns: ``params``, ``tokens``, ``loss``, and ``flops`` (or it is taken as
``6 * params * tokens``); an optional ``budget`` column groups runs by IsoFLOP tier. A
study's ``runs.csv`` reads as it is: its ``run``, ``label``, ``status``, ``reason`` and
``replicate_of`` columns, when present, name the runs, split them by label, and carry the
reasons failed runs are excluded (the fitting pipeline's cleaning rules apply to every table).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from typing import Any

from marin.scaling_laws.codec import ArtifactError
from marin.scaling_laws.rows import row_from_columns
from marin.scaling_laws.values import RunRow
from marin.storage.files import glob, open_url, url_to_fs

__all__ = ["REQUIRED", "ResultsError", "read_result_rows", "read_results", "read_runs"]

REQUIRED = ("params", "tokens", "loss")


class ResultsError(ValueError):
    """The results table cannot be read; the message names the file and the problem."""


def read_runs(paths: str | Sequence[str], metric: str = "loss", label: str | None = None
              ) -> list[RunRow]:
    """``RunRow``s from tables, run folders and folders of runs (globs too), in order;
    ``label`` (when given) labels them all."""
    from marin.scaling_laws.run_readers import RunFolderError, read_run_folders

    rows = []
    for path in [paths] if isinstance(paths, str) else paths:
        for found in _expand(path):
            try:
                if _is_folder(found):
                    rows += read_run_folders(found, metric, label)
                else:
                    rows += read_result_rows(found, metric, label)
            except RunFolderError as e:
                raise ResultsError(str(e)) from None
    return rows


def _expand(path: str) -> list[str]:
    if not any(c in path for c in "*?["):
        return [path]
    found = glob(path)
    if not found:
        raise ResultsError(f"{path} matches nothing; check the pattern (quote it so that the "
                           "shell leaves it to marin)")
    return found


def _is_folder(url: str) -> bool:
    fs, path = url_to_fs(url)
    return fs.isdir(path)


def read_results(path: str) -> list[RunRow]:
    """The table's runs (``read_result_rows`` on its ``loss`` column)."""
    return read_result_rows(path)


def read_result_rows(path: str, metric: str = "loss", label: str | None = None
                     ) -> list[RunRow]:
    """The table as ``RunRow``s, in order: ``loss`` is
    the column ``metric`` names (``loss`` itself by default)."""
    try:
        with open_url(path) as f:
            raw = f.read()
    except FileNotFoundError:
        raise ResultsError(f"results file {path} does not exist") from None
    except IsADirectoryError:
        raise ResultsError(f"results file {path} is a folder; give the CSV, JSON lines or "
                           "Parquet file inside it") from None
    except OSError as e:
        raise ResultsError(f"cannot read results file {path}: {e}") from None
    rows = _rows(path, raw)
    if not rows:
        raise ResultsError(f"results file {path} has no rows")
    if metric != "loss":
        if metric not in rows[0]:
            raise ResultsError(f"results file {path} has no column {metric!r} for the metric; "
                               f"it has {', '.join(rows[0])}: pass one with --metric")
        rows = [{**row, "loss": row[metric]} for row in rows]
    if label is not None:
        rows = [{**row, "label": label} for row in rows]
    missing = [c for c in REQUIRED if c not in rows[0]]
    if missing:
        raise ResultsError(f"results file {path} lacks column(s) {', '.join(missing)}; "
                           f"it has {', '.join(rows[0])}")
    return [_row(path, i, row) for i, row in enumerate(rows)]


def _rows(path: str, raw: bytes) -> list[dict[str, Any]]:
    name = path.lower()
    if name.endswith(".parquet"):
        import pyarrow.parquet as pq

        return pq.read_table(io.BytesIO(raw)).to_pylist()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ResultsError(f"results file {path} is not UTF-8 text ({e.reason})") from None
    if name.endswith((".jsonl", ".json")):
        return [_json_row(path, number, line)
                for number, line in enumerate(text.splitlines(), 1) if line.strip()]
    if name.endswith(".csv"):
        return list(csv.DictReader(io.StringIO(text)))
    raise ResultsError(f"results file {path}: use .csv, .jsonl or .parquet")


def _json_row(path: str, number: int, line: str) -> dict[str, Any]:
    try:
        row = json.loads(line)
    except ValueError as e:
        raise ResultsError(f"results file {path}, line {number}: not valid JSON ({e}); "
                           "each line must be one JSON object") from None
    if not isinstance(row, dict):
        raise ResultsError(f"results file {path}, line {number}: a JSON object is expected, "
                           f"got {type(row).__name__}")
    return row


def _row(path: str, index: int, row: dict[str, Any]) -> RunRow:
    try:
        return row_from_columns(row, f"results file {path}, row {index + 1}", f"row {index + 1}")
    except ArtifactError as e:
        raise ResultsError(str(e)) from None
