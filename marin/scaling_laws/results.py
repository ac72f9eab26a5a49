"""Reading a table of finished runs for the fits: CSV, JSON lines or Parquet.

    records = read_results("gs://bucket/sweep/results.parquet")   # RunRecords
    rows = read_result_rows("local_store/isoflop-tiny/fit-1a2b3c4d/runs.csv")   # RunRows

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
from typing import Any

from marin.storage.files import open_url

REQUIRED = ("params", "tokens", "loss")


class ResultsError(ValueError):
    """The results table cannot be read; the message names the file and the problem."""


def read_results(path: str) -> list[Any]:
    return [row.record() for row in read_result_rows(path)]


def read_result_rows(path: str) -> list[Any]:
    """The table as ``marin.scaling_laws.study.artifacts.RunRow``s, in order."""
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


def _row(path: str, index: int, row: dict[str, Any]) -> Any:
    from marin.scaling_laws.study.artifacts import ArtifactError, row_from_columns

    try:
        return row_from_columns(row, f"results file {path}, row {index + 1}", f"row {index + 1}")
    except ArtifactError as e:
        raise ResultsError(str(e)) from None
