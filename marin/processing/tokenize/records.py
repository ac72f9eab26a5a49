"""The token cache's ledger as typed records, validated when read.

    record = LedgerRecord.decode(raw, where="local_store/tokenized/x/ledger.json")
    record.complete, record.tokenizer.name, record.shards("train")[0].tokens
    raw = record.encode()

A ledger that is not what this module writes (not UTF-8, not JSON, the wrong shapes, a
count that is not an integer, nesting too deep to parse, an integer out of range) is a
``CacheError`` in one line naming the file, never an ``AttributeError`` or a
``RecursionError`` further on.

Three formats read: 3 (written now), 2 (shards listed per split with their file and
range) and 1 (shards keyed ``shard-00003``, one per input file); caches of formats 1 and 2
read unchanged. Format 3 adds ``group_bytes``, the size small files are grouped to, which
format 2 fixed at a quarter of ``range_bytes``: code that reads only format 2 would resume
a format-3 build with other groups, so it refuses the file instead.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields, replace
from typing import Any

__all__ = ["FORMAT_VERSION", "CacheError", "LedgerRecord", "RunCounts", "ShardRecord",
           "SplitTotals", "TokenizerIdentity", "decode_shards", "parse_json", "shard_name"]

FORMAT_VERSION = 3
_MAX_COUNT = 2**63 - 1
_FIGURES = ("documents", "tokens", "bytes", "empty_documents", "replaced_bytes")


class CacheError(ValueError):
    """A token cache is missing, incomplete, damaged, or does not match what was asked."""


class _Invalid(ValueError):
    """A field of a ledger has the wrong shape (the message names it)."""


@dataclass(frozen=True)
class TokenizerIdentity:
    name: str
    vocab_size: int
    eos_id: int
    fingerprint: str

    @classmethod
    def from_data(cls, data: Any) -> TokenizerIdentity:
        data = _object(data, "tokenizer")
        return cls(name=_text(data.get("name", "?"), "tokenizer.name"),
                   vocab_size=_count(data.get("vocab_size", 0), "tokenizer.vocab_size"),
                   eos_id=_count(data.get("eos_id", 0), "tokenizer.eos_id"),
                   fingerprint=_text(data.get("fingerprint", ""), "tokenizer.fingerprint"))


@dataclass(frozen=True, order=True)
class ShardRecord:
    """One finished unit of work: the documents of input file ``file`` (and of the
    ``files - 1`` files after it), or of range ``range`` of that file."""

    file: int
    range: int
    files: int = 1
    input: str = ""
    documents: int = 0
    tokens: int = 0
    bytes: int = 0
    empty_documents: int = 0
    replaced_bytes: int = 0
    dtype: str = "<u2"

    @property
    def key(self) -> tuple[int, int]:
        return (self.file, self.range)

    def to_data(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_data(cls, data: Any, where: str, file: int | None = None) -> ShardRecord:
        data = _object(data, where)
        dtype = _text(data.get("dtype", "<u2"), f"{where}.dtype")
        if dtype not in ("<u2", "<u4"):
            raise _Invalid(f"{where}.dtype is {dtype!r}, not '<u2' or '<u4'")
        optional = ("empty_documents", "replaced_bytes")  # absent from the first caches
        figures = {k: _count(data.get(k, 0) if k in optional else _required(data, k, where),
                             f"{where}.{k}") for k in _FIGURES}
        if file is None:
            file = _count(_required(data, "file", where), f"{where}.file")
        return cls(file=file, range=_count(data.get("range", 0), f"{where}.range"),
                   files=_count(data.get("files", 1), f"{where}.files"),
                   input=_text(data.get("input", ""), f"{where}.input"), dtype=dtype,
                   **figures)


def shard_name(file: int, range_: int) -> str:
    """``shard-00003-00012``: range 12 of input file 3 (zero-padded so names sort)."""
    return f"shard-{file:05d}-{range_:05d}"


@dataclass(frozen=True)
class SplitTotals:
    documents: int = 0
    tokens: int = 0
    bytes: int = 0
    empty_documents: int = 0
    replaced_bytes: int = 0
    shards: int = 0

    @classmethod
    def of(cls, shards: list[ShardRecord]) -> SplitTotals:
        return cls(shards=len(shards), **{k: sum(getattr(s, k) for s in shards)
                                         for k in _FIGURES})


@dataclass(frozen=True)
class RunCounts:
    """What the last run of the step did: units tokenized, and units it found finished."""

    built: int = 0
    reused: int = 0
    seconds: float = 0.0


@dataclass(frozen=True)
class LedgerRecord:
    tokenizer: TokenizerIdentity
    range_bytes: int = 0
    """The size of the ranges large files are cut into (0: one shard per input file, as
    caches of format 1 have)."""
    group_bytes: int = 0
    """The size at which a group of small files closes (0: a quarter of ``range_bytes``, the
    rule of format 2)."""
    splits: dict[str, tuple[ShardRecord, ...]] = field(default_factory=dict)
    complete: bool = False
    finished_at: float = 0.0
    last_run: RunCounts = RunCounts()
    format: int = FORMAT_VERSION

    def shards(self, split: str) -> tuple[ShardRecord, ...]:
        """The split's shards in the order of the token stream."""
        return self.splits.get(split, ())

    def shard_name(self, shard: ShardRecord) -> str:
        """The name of ``shard``'s files in its split's folder."""
        if self.range_bytes == 0:  # format 1: one shard per input file
            return f"shard-{shard.file:05d}"
        return shard_name(shard.file, shard.range)

    @property
    def group_limit(self) -> int:
        """The bytes of small files grouped into one unit of work (``ranges.plan_split``)."""
        return self.group_bytes or max(1, self.range_bytes // 4)

    @property
    def totals(self) -> dict[str, SplitTotals]:
        return {split: SplitTotals.of(list(shards)) for split, shards in self.splits.items()}

    def with_shards(self, split: str, added: list[ShardRecord]) -> LedgerRecord:
        merged = {s.key: s for s in (*self.shards(split), *added)}
        splits = {**self.splits, split: tuple(sorted(merged.values()))}
        return replace(self, splits={k: splits[k] for k in sorted(splits)})

    def encode(self) -> bytes:
        data = {"format": self.format, "tokenizer": self.tokenizer.__dict__,
                "range_bytes": self.range_bytes, "group_bytes": self.group_bytes,
                "complete": self.complete,
                "finished_at": self.finished_at, "last_run": self.last_run.__dict__,
                "totals": {k: v.__dict__ for k, v in self.totals.items()},
                "splits": {k: [s.to_data() for s in v] for k, v in self.splits.items()}}
        return json.dumps(data, indent=1, sort_keys=True, allow_nan=False).encode()

    @classmethod
    def decode(cls, raw: bytes, where: str) -> LedgerRecord:
        """The ledger in ``raw`` (the file ``where``); ``CacheError`` when it is damaged."""
        data = parse_json(raw, where)
        try:
            data = _object(data, "the ledger")
            version = data.get("format")
            if version not in (1, 2, FORMAT_VERSION):
                raise _Invalid(f"format is {version!r}, not 1, 2 or {FORMAT_VERSION}")
            splits = _object(data.get("splits", {}), "splits")
            decoded = {_text(split, "a split name"): (_v1_shards if version == 1 else
                                                       decode_shards)(shards, split)
                       for split, shards in splits.items()}
            run = _object(data.get("last_run", {}), "last_run")
            return cls(tokenizer=TokenizerIdentity.from_data(data.get("tokenizer", {})),
                       range_bytes=_count(data.get("range_bytes", 0), "range_bytes"),
                       group_bytes=_count(data.get("group_bytes", 0), "group_bytes"),
                       splits=decoded, complete=_flag(data.get("complete", False), "complete"),
                       finished_at=_seconds(data.get("finished_at", 0.0), "finished_at"),
                       last_run=RunCounts(_count(run.get("built", 0), "last_run.built"),
                                          _count(run.get("reused", 0), "last_run.reused"),
                                          _seconds(run.get("seconds", 0.0), "last_run.seconds")),
                       format=FORMAT_VERSION)
        except _Invalid as e:
            raise _damaged(where, str(e)) from None


def decode_shards(data: Any, split: str) -> tuple[ShardRecord, ...]:
    """A list of shard records (format 2, and the ledger's journal batches)."""
    if not isinstance(data, list):
        raise _Invalid(f"splits.{split} is {_kind(data)}, not a list of shards")
    return tuple(sorted(ShardRecord.from_data(s, f"splits.{split}[{i}]")
                        for i, s in enumerate(data)))


def _v1_shards(data: Any, split: str) -> tuple[ShardRecord, ...]:
    """Format 1: ``{"shard-00003": {...}}``, one shard per input file."""
    data = _object(data, f"splits.{split}")
    out = []
    for name, shard in data.items():
        number = name.removeprefix("shard-") if isinstance(name, str) else ""
        if not number.isdigit():
            raise _Invalid(f"splits.{split} has a shard named {name!r}, not shard-NNNNN")
        out.append(ShardRecord.from_data(shard, f"splits.{split}.{name}", file=int(number)))
    return tuple(sorted(out))


def parse_json(raw: bytes, where: str) -> Any:
    """``raw`` parsed as strict JSON (no NaN or Infinity), or a one-line ``CacheError``."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _damaged(where, f"not UTF-8 text (byte {e.start})") from None
    try:
        return json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise _damaged(where, "nested too deeply to be a ledger") from None
    except json.JSONDecodeError as e:
        raise _damaged(where, f"not valid JSON ({e.msg} at byte {e.pos})") from None
    except ValueError as e:  # an integer of thousands of digits, NaN or Infinity
        reason = "a number with thousands of digits" if "digits" in str(e) else str(e)
        raise _damaged(where, f"not valid JSON ({reason})") from None


def _damaged(where: str, reason: str) -> CacheError:
    return CacheError(f"{where}: the cache's ledger is damaged: {reason}; delete the cache "
                      "folder to build it again")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _kind(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
            type(None): "null"}.get(type(value), "a number")


def _object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _Invalid(f"{what} is {_kind(value)}, not an object")
    return value


def _required(data: dict[str, Any], key: str, where: str) -> Any:
    if key not in data:
        raise _Invalid(f"{where} has no {key!r}")
    return data[key]


def _count(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX_COUNT:
        shown = "an integer out of range" if isinstance(value, int) and not isinstance(
            value, bool) else _kind(value)
        raise _Invalid(f"{what} is {shown}, not a count")
    return value


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise _Invalid(f"{what} is {_kind(value)}, not a string")
    return value


def _flag(value: Any, what: str) -> bool:
    if not isinstance(value, bool):
        raise _Invalid(f"{what} is {_kind(value)}, not true or false")
    return value


def _seconds(value: Any, what: str) -> float:
    # ``not abs(v) <= 1e15`` is true for NaN and the infinities too
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not abs(value) <= 1e15:
        raise _Invalid(f"{what} is not a finite number of seconds")
    return float(value)
