"""Input documents: expanding paths and globs, reading .txt, .jsonl and Parquet, and the
fingerprint that ties a tokenize step's identity to its data.

    files = expand_inputs(["gs://bucket/corpus/*.jsonl.gz", "data/extra.txt"])
    for text in read_documents(files[0], counter): ...
    fingerprint_inputs(["data/*.txt"])    # changes when any file's size, mtime or etag does
"""

from __future__ import annotations

import codecs
import hashlib
import io
import json
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from marin.storage.files import find, glob, open_url, url_to_fs

TEXT_SUFFIXES = (".txt", ".md")
JSONL_SUFFIXES = (".jsonl", ".jsonl.gz", ".jsonl.zst", ".jsonl.zstd", ".json.gz")
PARQUET_SUFFIXES = (".parquet",)
SUPPORTED = TEXT_SUFFIXES + JSONL_SUFFIXES + PARQUET_SUFFIXES


class InputError(ValueError):
    """An input path is missing, matches nothing, or has an unsupported format."""


def expand_inputs(paths: Sequence[str]) -> list[str]:
    """Every file named by ``paths`` (URLs or globs), sorted; an error names what is missing."""
    if isinstance(paths, str):
        paths = [paths]
    files: list[str] = []
    for pattern in paths:
        fs, path = url_to_fs(pattern)
        if any(ch in pattern for ch in "*?["):
            matches = glob(pattern)
            if not matches:
                raise InputError(f"input glob {pattern!r} matches no file")
        elif fs.isfile(path):
            matches = [pattern]
        elif fs.isdir(path):
            matches = [url for url in find(pattern) if url.endswith(SUPPORTED)]
            if not matches:
                raise InputError(f"input folder {pattern!r} holds no {', '.join(SUPPORTED)} file")
        else:
            raise InputError(f"input path {pattern!r} does not exist")
        for match in matches:
            if not match.endswith(SUPPORTED):
                raise InputError(f"input {match!r}: unsupported format; use one of "
                                 f"{', '.join(SUPPORTED)}")
            files.append(match)
    return sorted(dict.fromkeys(files))


def fingerprint_inputs(paths: Sequence[str]) -> str:
    """A hash of each input file's name and its store's version marker (size and mtime on
    disk, etag / crc32c / generation on object stores)."""
    digest = hashlib.sha256()
    for path in expand_inputs(paths):
        fs, local = url_to_fs(path)
        info = fs.info(local)
        marker = [info.get(k) for k in ("size", "mtime", "etag", "ETag", "crc32c",
                                        "generation", "md5Hash", "LastModified")]
        digest.update(json.dumps([path, marker], default=str).encode())
    return digest.hexdigest()[:16]


@dataclass
class DecodeCounter:
    """Counts bytes that were not valid UTF-8 and were replaced by U+FFFD."""

    replaced: int = 0


_COUNTERS = threading.local()


def _count_and_replace(error: UnicodeDecodeError) -> tuple[str, int]:
    counter = getattr(_COUNTERS, "current", None)
    if counter is not None:
        counter.replaced += error.end - error.start
    return "\ufffd", error.end


codecs.register_error("marin_count_replace", _count_and_replace)


def _decode(raw: bytes, counter: DecodeCounter) -> str:
    _COUNTERS.current = counter
    try:
        return raw.decode("utf-8", errors="marin_count_replace")
    finally:
        _COUNTERS.current = None


def read_documents(path: str, counter: DecodeCounter, text_field: str = "text",
                   batch_bytes: int = 1 << 20) -> Iterator[str]:
    """The documents of one file, streamed: a .txt file is one document; each JSON line
    or Parquet row's ``text_field`` is one document."""
    if path.endswith(PARQUET_SUFFIXES):
        yield from _parquet_documents(path, text_field)
        return
    with open_url(path, "rb", compression="infer") as f:
        if path.endswith(TEXT_SUFFIXES):
            yield _decode(f.read(), counter)
            return
        for number, line in enumerate(io.BufferedReader(f, batch_bytes), start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(_decode(line, counter))
            except json.JSONDecodeError as e:
                raise InputError(f"{path}, line {number}: not valid JSON ({e.msg})") from None
            text = record.get(text_field) if isinstance(record, dict) else None
            if not isinstance(text, str):
                raise InputError(f"{path}, line {number}: no string field {text_field!r}")
            yield text


def _parquet_documents(path: str, text_field: str) -> Iterator[str]:
    import pyarrow.parquet as pq

    with open_url(path) as f:
        parquet = pq.ParquetFile(f)
        if text_field not in parquet.schema_arrow.names:
            raise InputError(f"{path}: no column {text_field!r}; columns are "
                             f"{', '.join(parquet.schema_arrow.names)}")
        for batch in parquet.iter_batches(columns=[text_field], batch_size=1024):
            for text in batch.column(0).to_pylist():
                if text is not None:
                    yield text
