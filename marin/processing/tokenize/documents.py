"""The documents of a unit of work, streamed, with errors that name the file and the
position in it.

    counter = DecodeCounter()
    for text in unit_documents(unit, "text", counter): ...
    for text in read_documents("data/a.jsonl.gz", counter): ...   # a whole file

A ``.txt`` / ``.md`` file is one document; each JSON line's ``text_field`` is one, and
each Parquet row's ``text_field`` column (a null is an empty document). Bytes that are not
UTF-8 become U+FFFD and are counted in ``counter``.
"""

from __future__ import annotations

import codecs
import json
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from marin.processing.tokenize.inputs import PARQUET_SUFFIXES, TEXT_SUFFIXES, InputError
from marin.processing.tokenize.ranges import Unit
from marin.processing.tokenize.streams import decoded, line_number, open_input, read_line_range

__all__ = ["DecodeCounter", "jsonl_documents", "read_documents", "unit_documents"]


@dataclass
class DecodeCounter:
    """Counts bytes that were not valid UTF-8 and were replaced by U+FFFD (and the lone
    surrogates of JSON escapes, one each)."""

    replaced: int = 0


_COUNTERS = threading.local()


def _count_and_replace(error: UnicodeDecodeError) -> tuple[str, int]:
    counter = getattr(_COUNTERS, "current", None)
    if counter is not None:
        counter.replaced += error.end - error.start
    return "\ufffd", error.end


codecs.register_error("marin_count_replace", _count_and_replace)


def _decode(raw: bytes, counter: DecodeCounter) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        pass
    _COUNTERS.current = counter
    try:
        return raw.decode("utf-8", errors="marin_count_replace")
    finally:
        _COUNTERS.current = None


def unit_documents(unit: Unit, text_field: str, counter: DecodeCounter,
                   data: bytes | None = None) -> Iterator[str]:
    """The documents of ``unit``; a ``chunk`` unit's bytes come in ``data``."""
    if unit.kind == "files":
        for path in unit.paths:
            yield from read_documents(path, counter, text_field)
    elif unit.kind == "lines":
        base, raw = read_line_range(unit.paths[0], unit.start, unit.stop)
        yield from jsonl_documents(raw, unit.paths[0], text_field, counter, base)
    elif unit.kind == "row_group":
        yield from parquet_documents(unit.paths[0], text_field, unit.start)
    elif unit.kind == "chunk":
        if data is None:
            raise ValueError(f"the chunk unit {unit} comes with its data")
        yield from jsonl_documents(data, unit.paths[0], text_field, counter, unit.start,
                                   unit.first_line)
    else:
        raise ValueError(f"unknown unit kind {unit.kind!r}")


def read_documents(path: str, counter: DecodeCounter, text_field: str = "text"
                   ) -> Iterator[str]:
    """The documents of the whole file ``path``."""
    if path.endswith(PARQUET_SUFFIXES):
        yield from parquet_documents(path, text_field)
    elif path.endswith(TEXT_SUFFIXES):
        yield _decode(decoded(path), counter)
    else:
        yield from jsonl_documents(decoded(path), path, text_field, counter, 0, 1)


def jsonl_documents(data: bytes, path: str, text_field: str, counter: DecodeCounter,
                    base: int, first_line: int | None = None) -> Iterator[str]:
    """The documents of JSON lines ``data``, which start at byte ``base`` of ``path``
    (line ``first_line``, when known: errors give the line number)."""
    lines = data.split(b"\n")
    if lines and not lines[-1]:
        lines.pop()
    for i, line in enumerate(lines):
        if not line or line.isspace():
            continue
        try:
            record, slow = orjson.loads(line), False
        except orjson.JSONDecodeError:  # the standard library's reading, and its message
            record, slow = None, True
        if record is None:
            record, slow = _parse_slowly(line, counter, path, lines, i, base, first_line), True
        text = record.get(text_field) if isinstance(record, dict) else None
        if slow and isinstance(text, str):
            text = _without_lone_surrogates(text, counter)
        if not isinstance(text, str):
            where = _position(path, lines, i, base, first_line)
            has = (f"its fields are {', '.join(map(repr, record))[:200]}"
                   if isinstance(record, dict) else f"it is a JSON {type(record).__name__}")
            raise InputError(f"{path}, {where}: no string field {text_field!r} ({has}); set "
                             "text_field to the field that holds the text")
        yield text


def _parse_slowly(line: bytes, counter: DecodeCounter, path: str, lines: list[bytes],
                  index: int, base: int, first_line: int | None) -> Any:
    """A line orjson refused, or whose value is null: what the standard library reads
    (bytes that are not UTF-8 replaced and counted, NaN, lone surrogates), or an error
    naming the line."""
    try:
        return json.loads(_decode(line, counter))
    except json.JSONDecodeError as e:
        where = _position(path, lines, index, base, first_line)
        raise InputError(f"{path}, {where}: not valid JSON ({e.msg} at column "
                         f"{e.colno}); fix or remove that line") from None
    except RecursionError:
        where = _position(path, lines, index, base, first_line)
        raise InputError(f"{path}, {where}: JSON nested too deep to read; fix or remove "
                         "that line") from None


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _without_lone_surrogates(text: str, counter: DecodeCounter) -> str:
    """``text`` with each lone surrogate (a JSON escape such as ``\\ud800``, which no
    UTF-8 text holds and no encoder takes) replaced by U+FFFD and counted."""
    replaced, count = _LONE_SURROGATE.subn("\ufffd", text)
    counter.replaced += count
    return replaced


def _position(path: str, lines: list[bytes], index: int, base: int,
              first_line: int | None) -> str:
    offset = base + sum(len(line) + 1 for line in lines[:index])
    if first_line is None:  # a range of a plain file: count the lines before it
        first_line = line_number(path, base)
    return (f"byte {offset}" if first_line is None
            else f"line {first_line + index} (byte {offset})")


def parquet_documents(path: str, text_field: str, row_group: int | None = None
                      ) -> Iterator[str]:
    """The ``text_field`` column of ``path`` (of one row group, when given)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    with open_input(path) as f:
        try:
            parquet = pq.ParquetFile(f)
        except (pa.ArrowInvalid, OSError) as e:
            raise InputError(f"{path}: not a readable Parquet file ({e})") from None
        schema = parquet.schema_arrow
        if text_field not in schema.names:
            raise InputError(f"{path}: no column {text_field!r} (its columns are "
                             f"{', '.join(schema.names)}); set text_field to the column that "
                             "holds the text")
        kind = schema.field(text_field).type
        if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)
                or getattr(pa.types, "is_string_view", lambda _: False)(kind)):
            raise InputError(f"{path}: column {text_field!r} holds {kind}, not text; set "
                             "text_field to the column that holds the text")
        groups = range(parquet.num_row_groups) if row_group is None else [row_group]
        for group in groups:
            column = parquet.read_row_group(group, columns=[text_field]).column(0)
            for text in column.to_pylist():
                yield "" if text is None else text
