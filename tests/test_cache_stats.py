"""The cache's ledger as a validated record: damaged ledgers, old caches, batched writes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from marin.processing.tokenize import TokenizeConfig, tokenize
from marin.processing.tokenize.cache import CacheError
from marin.processing.tokenize.cache_stats import read_cache_stats
from marin.processing.tokenize.encoders import load_encoder
from marin.processing.tokenize.ledger import JOURNAL, LEDGER, Ledger, read_ledger
from marin.processing.tokenize.loader import TokenCacheDataset
from marin.processing.tokenize.records import ShardRecord
from tests.conftest import ROOT

TEXTS = ["To be, or not to be, that is the question.", "Now is the winter of our discontent",
         "Friends, Romans, countrymen, lend me your ears"]

#: Ledgers as a damaged disk, a bad copy or a hand edit leave them.
DAMAGED = {
    "an array": b"[1, 2, 3]",
    "a string": b'"ledger"',
    "missing tokens": json.dumps({"format": 2, "tokenizer": {"name": "gpt2"}, "splits": {
        "train": [{"file": 0, "range": 0, "documents": 1, "bytes": 3}]}}).encode(),
    "string tokens": json.dumps({"format": 1, "tokenizer": {"name": "gpt2"}, "splits": {
        "train": {"shard-00000": {"documents": 1, "bytes": 3, "tokens": "many"}}}}).encode(),
    "binary bytes": bytes(range(256)) * 4,
    "deep nesting": b"[" * 100_000 + b"]" * 100_000,
    "a huge int": b'{"format": 1, "splits": {"train": {"shard-00000": {"documents": 1, '
                  b'"bytes": 1, "tokens": ' + b"9" * 5000 + b"}}}}",
    "an int out of range": json.dumps({"format": 1, "splits": {"train": {"shard-00000": {
        "documents": 1, "bytes": 1, "tokens": 10**40}}}}).encode(),
    "NaN tokens": b'{"format": 1, "splits": {"train": {"shard-00000": {"documents": 1, '
                  b'"bytes": 1, "tokens": NaN}}}}',
}


@pytest.fixture(scope="module")
def good_cache(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("good")
    (root / "plays.txt").write_text("\n".join(TEXTS))
    tokenize(TokenizeConfig(train_paths=(str(root / "plays.txt"),),
                            cache_path=str(root / "prefix" / "good")))
    return root / "prefix" / "good"


@pytest.mark.parametrize("name", sorted(DAMAGED))
def test_a_damaged_ledger_is_one_line_naming_it(name: str, tmp_path: Path):
    (tmp_path / LEDGER).write_bytes(DAMAGED[name])
    with pytest.raises(CacheError) as info:
        read_cache_stats(str(tmp_path))
    message = str(info.value)
    assert "\n" not in message and len(message) < 300
    assert message.startswith(f"{tmp_path / LEDGER}: the cache's ledger is damaged")
    with pytest.raises(CacheError):
        TokenCacheDataset(str(tmp_path), seq_len=4)


def _cache_stats(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "marin.cli", "cache", "stats", *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_marin_cache_stats_reports_the_good_caches_and_a_line_per_damaged_one(
        good_cache: Path, tmp_path: Path):
    import shutil

    prefix = tmp_path / "prefix"
    shutil.copytree(good_cache, prefix / "good")
    for i, name in enumerate(sorted(DAMAGED)):
        (prefix / f"bad-{i}").mkdir()
        (prefix / f"bad-{i}" / LEDGER).write_bytes(DAMAGED[name])
    human = _cache_stats(str(prefix))
    assert human.returncode == 2, human.stderr
    assert str(prefix / "good") in human.stdout and "Traceback" not in human.stderr
    errors = [line for line in human.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == len(DAMAGED) == len(human.stderr.splitlines())
    assert all(f"bad-{i}/{LEDGER}: the cache's ledger is damaged" in errors[i]
               for i in range(len(DAMAGED)))
    machine = _cache_stats(str(prefix), "--json")
    assert machine.returncode == 2
    rows = json.loads(machine.stdout, parse_constant=lambda c: pytest.fail(f"bare {c}"))
    by_path = {row["path"]: row for row in rows}
    assert by_path[str(prefix / "good")]["total_elements"] == 1
    assert all("damaged" in by_path[str(prefix / f"bad-{i}")]["error"]
               for i in range(len(DAMAGED)))


def test_a_cache_of_the_first_format_still_reads(tmp_path: Path):
    """The layout caches were written in before ranges: ``shard-NNNNN`` per input file, keyed
    by name in the ledger."""
    encoder = load_encoder("gpt2")
    (tmp_path / "train").mkdir()
    shards, stream = {}, []
    for i, text in enumerate(TEXTS):
        ids = [*encoder.encoding.encode_ordinary(text), encoder.eos_id]
        np.asarray(ids, dtype="<u2").tofile(tmp_path / "train" / f"shard-{i:05d}.tokens")
        np.asarray([len(ids)], dtype="<i8").tofile(tmp_path / "train" / f"shard-{i:05d}.offsets")
        shards[f"shard-{i:05d}"] = {"input": f"{i}.txt", "documents": 1, "tokens": len(ids),
                                    "bytes": len(text), "empty_documents": 0,
                                    "replaced_bytes": 0, "dtype": "<u2"}
        stream += ids
    (tmp_path / LEDGER).write_text(json.dumps({
        "format": 1, "tokenizer": encoder.identity(), "splits": {"train": shards},
        "complete": True, "totals": {}, "build_seconds": 0.1, "finished_at": 1.0}, indent=1))
    dataset = TokenCacheDataset(str(tmp_path), seq_len=4, expected_tokenizer="gpt2")
    assert dataset.tokens(0, dataset.total_tokens).tolist() == stream
    stats = read_cache_stats(str(tmp_path))
    assert (stats.total_elements, stats.total_tokens, stats.shards) == (3, len(stream), 3)
    record = tokenize(TokenizeConfig(train_paths=(str(tmp_path / "none.txt"),),
                                     cache_path=str(tmp_path)))  # complete: a hit
    assert record.complete and len(record.shards("train")) == 3


def test_finished_shards_are_written_in_batches_not_by_rewriting_the_ledger(tmp_path: Path):
    cache = str(tmp_path)
    identity = load_encoder("gpt2").identity()
    ledger = Ledger.open(cache, identity, range_bytes=1024, flush_seconds=3600,
                         flush_records=40)
    shard = ShardRecord(file=0, range=0, input="a.jsonl", documents=1, tokens=5, bytes=9)
    for k in range(100):
        ledger.record_shard("train", ShardRecord(**{**shard.to_data(), "range": k}))
    header = (tmp_path / LEDGER).stat()
    batches = sorted((tmp_path / JOURNAL).iterdir())
    assert len(batches) == 2  # 2 x 40 written, 20 waiting
    assert sum(len(json.loads(b.read_text())["splits"]["train"]) for b in batches) == 80
    assert [s.range for s in read_ledger(cache).shards("train")] == list(range(80))
    ledger.flush()
    assert (tmp_path / LEDGER).stat().st_mtime_ns == header.st_mtime_ns  # never rewritten
    assert len(read_ledger(cache).shards("train")) == 100
    ledger.finish(ledger.record.last_run)
    assert not (tmp_path / JOURNAL).exists()
    again = read_ledger(cache)
    assert again.complete and [s.range for s in again.shards("train")] == list(range(100))
