"""Tokenizing below the file: ranges, their determinism, resuming them, and bad input."""

from __future__ import annotations

import json
import math
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from marin.processing.tokenize import TokenizeConfig, tokenize
from marin.processing.tokenize.encoders import load_encoder
from marin.processing.tokenize.inputs import InputError
from marin.processing.tokenize.ledger import read_ledger
from marin.processing.tokenize.loader import TokenCacheDataset
from marin.processing.tokenize.records import LedgerRecord, TokenizerIdentity
from marin.processing.tokenize.streams import read_line_range, stream_chunks
from tests.helpers.corpus import plays

RANGE = 16 << 10  # small ranges, so that small test files are cut into many


def paragraphs(count: int | None = None) -> list[str]:
    docs = [p for play in plays(4) for p in play.read_text().split("\n\n") if p.strip()]
    return docs[:count] if count else docs


def write_jsonl(path: Path, docs: list[str]) -> bytes:
    data = "".join(json.dumps({"text": d}) + "\n" for d in docs).encode()
    path.write_bytes(data)
    return data


def reference_stream(docs: list[str]) -> np.ndarray:
    """tiktoken's own ordinary encoding of each document, each followed by the end token."""
    encoding = load_encoder("gpt2").encoding
    out: list[int] = []
    for ids in encoding.encode_ordinary_batch([d for d in docs if d]):
        out += [*ids, encoding.eot_token]
    return np.asarray(out)


def cache_files(cache: Path) -> dict[str, bytes]:
    """Every file of the cache but the usage events, the ledger without its timings."""
    out = {}
    for path in sorted(cache.rglob("*")):
        rel = str(path.relative_to(cache))
        if path.is_file() and not rel.startswith(".usage"):
            out[rel] = path.read_bytes()
    ledger = json.loads(out.pop("ledger.json"))
    ledger.pop("finished_at")
    ledger.pop("last_run")
    out["ledger.json"] = json.dumps(ledger, sort_keys=True).encode()
    return out


@pytest.fixture(scope="module")
def shapes(tmp_path_factory) -> tuple[Path, list[str]]:
    """One corpus of every shape: a large JSONL file (cut into ranges), a Parquet file of
    several row groups, a large .jsonl.zst (decoded as a stream), small text files (grouped)
    and a small .jsonl.gz; and its documents in the cache's order."""
    import gzip

    import pyarrow as pa
    import pyarrow.parquet as pq
    import zstandard

    root = tmp_path_factory.mktemp("shapes")
    docs = paragraphs(1600)
    parts = [docs[:500], docs[500:900], docs[900:1300], docs[1300:1500], docs[1500:]]
    write_jsonl(root / "a-big.jsonl", parts[0])
    pq.write_table(pa.table({"text": parts[1], "id": list(range(len(parts[1])))}),
                   root / "b.parquet", row_group_size=60)
    lines = "".join(json.dumps({"text": d}) + "\n" for d in parts[2]).encode()
    (root / "c.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(lines))
    for i, doc in enumerate(parts[3]):
        (root / f"d-{i:03d}.txt").write_text(doc)
    small = "".join(json.dumps({"text": d}) + "\n" for d in parts[4]).encode()
    (root / "e.jsonl.gz").write_bytes(gzip.compress(small))
    assert (root / "a-big.jsonl").stat().st_size > 4 * RANGE
    assert (root / "c.jsonl.zst").stat().st_size > RANGE
    return root, docs


def test_a_split_corpus_gives_the_same_cache_for_1_2_and_8_workers(shapes, tmp_path: Path):
    root, docs = shapes
    caches = {}
    for workers in (1, 2, 8):
        cache = tmp_path / f"cache-{workers}"
        record = tokenize(TokenizeConfig(train_paths=(str(root),), cache_path=str(cache),
                                         num_processes=workers, range_bytes=RANGE))
        caches[workers] = cache_files(cache)
        assert record.last_run.built == len(record.shards("train"))
    assert caches[1] == caches[2] == caches[8]
    shards = read_ledger(str(tmp_path / "cache-1")).shards("train")
    assert len({s.file for s in shards}) < len(shards) < len(docs) // 4  # cut, and grouped
    dataset = TokenCacheDataset(str(tmp_path / "cache-2"), seq_len=64, record_read=False)
    expected = reference_stream(docs)
    assert dataset.total_tokens == len(expected)
    assert np.array_equal(dataset.tokens(0, dataset.total_tokens), expected)


def test_line_ranges_hold_each_line_once_in_the_range_where_it_starts(tmp_path: Path):
    rng = random.Random(0)
    lines = [b"x" * rng.choice([0, 1, 5, 40, 99, 100, 101, 350]) for _ in range(300)]
    data = b"\n".join(lines)  # no newline at the end
    path = tmp_path / "lines.jsonl"
    path.write_bytes(data)
    starts, position = [], 0
    for line in lines:
        starts.append(position)
        position += len(line) + 1
    for size in (1, 7, 100, 256, len(data), len(data) + 5):
        got = []
        for k in range(math.ceil(len(data) / size)):
            base, chunk = read_line_range(str(path), k * size, min((k + 1) * size, len(data)))
            expected = [i for i, s in enumerate(starts) if k * size <= s < (k + 1) * size]
            found = chunk.split(b"\n")[:-1] if chunk.endswith(b"\n") else chunk.split(b"\n")
            assert (found if chunk else []) == [lines[i] for i in expected], (size, k)
            if expected:
                assert base == starts[expected[0]]
            got += expected
        assert got == list(range(len(lines)))


def test_a_compressed_copy_is_cut_into_the_ranges_of_the_plain_file(tmp_path: Path):
    import zstandard

    data = write_jsonl(tmp_path / "plain.jsonl", paragraphs(400))
    frames = b"".join(zstandard.ZstdCompressor().compress(data[i:i + 5000])
                      for i in range(0, len(data), 5000))  # frames cut mid-line
    (tmp_path / "copy.jsonl.zst").write_bytes(frames)
    chunks = list(stream_chunks(str(tmp_path / "copy.jsonl.zst"), RANGE))
    assert len(chunks) == math.ceil(len(data) / RANGE)
    for chunk in chunks:
        base, plain = read_line_range(str(tmp_path / "plain.jsonl"), chunk.range * RANGE,
                                      min((chunk.range + 1) * RANGE, len(data)))
        assert (base, plain) == (chunk.start, chunk.data)
        assert chunk.first_line == data[:base].count(b"\n") + 1


RESUME_SCRIPT = """
import sys
import marin.processing.tokenize.ledger as ledger
from marin.processing.tokenize import TokenizeConfig, tokenize
if __name__ == "__main__":
    ledger.FLUSH_SECONDS = 0.0  # every finished range recorded at once: a kill finds some
    tokenize(TokenizeConfig(train_paths=(sys.argv[1],), cache_path=sys.argv[2],
                            num_processes=1, batch_size=4, range_bytes=int(sys.argv[3])))
"""


def test_a_killed_tokenize_resumes_redoing_only_its_unfinished_ranges(tmp_path: Path):
    """kill -9 in the middle of a file; the rerun tokenizes only the ranges the ledger does
    not list, and the cache equals an uninterrupted run's."""
    big = tmp_path / "big.jsonl"
    size = len(write_jsonl(big, paragraphs() * 3))
    ranges = math.ceil(size / RANGE)
    cache = tmp_path / "cache"
    proc = subprocess.Popen([sys.executable, "-c", RESUME_SCRIPT, str(big), str(cache),
                             str(RANGE)])
    deadline = time.monotonic() + 120
    finished: set = set()
    while time.monotonic() < deadline and len(finished) < 3 and proc.poll() is None:
        record = _ledger_or_none(cache)
        finished = set() if record is None else {s.key for s in record.shards("train")}
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = read_ledger(str(cache))
    assert before is not None and not before.complete, "the job finished before the kill"
    done = {s.key: os.stat(cache / "train" / f"{before.shard_name(s)}.tokens").st_mtime_ns
            for s in before.shards("train")}
    assert 3 <= len(done) < ranges
    resumed = tokenize(TokenizeConfig(train_paths=(str(big),), cache_path=str(cache),
                                      num_processes=2, range_bytes=RANGE))
    assert (resumed.last_run.built, resumed.last_run.reused) == (ranges - len(done), len(done))
    for shard in resumed.shards("train"):
        if shard.key in done:  # not written again
            path = cache / "train" / f"{resumed.shard_name(shard)}.tokens"
            assert os.stat(path).st_mtime_ns == done[shard.key]
    clean = tmp_path / "clean"
    tokenize(TokenizeConfig(train_paths=(str(big),), cache_path=str(clean), num_processes=1,
                            range_bytes=RANGE))
    assert cache_files(cache) == cache_files(clean)



def test_a_cache_begun_before_group_bytes_resumes_with_the_groups_it_began_with(
        tmp_path: Path):
    """Caches of format 2, before the ledger recorded ``group_bytes``, grouped small files
    to a quarter of ``range_bytes``. Resuming one keeps that rule: a finished group (file,
    range) names the same files in the rerun, none is skipped or tokenized twice. New
    ledgers are format 3, which code that knows only format 2 refuses."""
    corpus = tmp_path / "texts"
    corpus.mkdir()
    docs = paragraphs(300)
    for i, doc in enumerate(docs):
        (corpus / f"p-{i:03d}.txt").write_text(doc)
    config = dict(train_paths=(str(corpus),), num_processes=2, range_bytes=RANGE)
    new = tokenize(TokenizeConfig(cache_path=str(tmp_path / "new"), **config))
    assert new.group_bytes == RANGE
    assert json.loads((tmp_path / "new" / "ledger.json").read_bytes())["format"] == 3

    old = tmp_path / "old"  # an empty ledger as the code before the field wrote it
    old.mkdir()
    identity = TokenizerIdentity.from_data(load_encoder("gpt2").identity())
    raw = json.loads(LedgerRecord(identity, RANGE).encode())
    del raw["group_bytes"]
    raw["format"] = 2
    (old / "ledger.json").write_text(json.dumps(raw))
    quarter = tokenize(TokenizeConfig(cache_path=str(old), **config))
    assert quarter.group_limit == RANGE // 4
    assert len(quarter.shards("train")) > len(new.shards("train"))  # smaller groups
    kept = quarter.shards("train")[: len(quarter.shards("train")) // 2]
    raw["splits"] = {"train": [s.to_data() for s in kept]}
    (old / "ledger.json").write_text(json.dumps(raw))
    for shard in quarter.shards("train")[len(kept):]:
        for suffix in (".tokens", ".offsets"):
            (old / "train" / f"{quarter.shard_name(shard)}{suffix}").unlink()
    resumed = tokenize(TokenizeConfig(cache_path=str(old), **config))
    assert (resumed.last_run.reused, resumed.last_run.built) == (
        len(kept), len(quarter.shards("train")) - len(kept))
    assert resumed.shards("train") == quarter.shards("train")
    dataset = TokenCacheDataset(str(old), seq_len=64, record_read=False)
    assert np.array_equal(dataset.tokens(0, dataset.total_tokens), reference_stream(docs))

def _ledger_or_none(cache: Path):
    try:
        return read_ledger(str(cache))
    except (OSError, ValueError):  # a journal batch listed, then folded in as we read
        return None


def _bad_inputs(root: Path) -> dict[str, tuple[str, str]]:
    """name -> (input path, the message expected), for each kind of bad input; the bad
    spot is in the middle of a large file, in a range other than the first."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    import zstandard

    docs = paragraphs(400)
    lines = [json.dumps({"text": d}) for d in docs]
    bad_at = 300
    cases = {}
    for name, bad_line, message in (
            ("not-json", '{"text": "unterminated', "not valid JSON (Unterminated string"),
            ("no-field", '{"body": "x"}', "no string field 'text' (its fields are 'body')")):
        body = [*lines[:bad_at], bad_line, *lines[bad_at:]]
        path = root / f"{name}.jsonl"
        path.write_text("\n".join(body) + "\n")
        offset = sum(len(line.encode()) + 1 for line in body[:bad_at])
        cases[name] = (str(path), f"{path}, line {bad_at + 1} (byte {offset}): {message}")
    data = ("\n".join(lines) + "\n").encode()
    whole = zstandard.ZstdCompressor().compress(data)
    cut = len(whole) * 2 // 3
    (root / "cut.jsonl.zst").write_bytes(whole[:cut])
    cases["truncated-zstd"] = (str(root / "cut.jsonl.zst"),
                               f"{root / 'cut.jsonl.zst'}: truncated: the file ends inside the "
                               "frame starting at byte 0")
    pq.write_table(pa.table({"body": docs}), root / "nocol.parquet", row_group_size=50)
    cases["parquet-column"] = (str(root / "nocol.parquet"),
                               f"{root / 'nocol.parquet'}: no column 'text' (its columns are "
                               "body); set text_field")
    return cases


@pytest.mark.parametrize("case", ["not-json", "no-field", "truncated-zstd", "parquet-column"])
def test_bad_input_is_one_line_naming_file_and_position_and_nothing_half_done_counts(
        case: str, tmp_path: Path):
    path, message = _bad_inputs(tmp_path)[case]
    cache = tmp_path / "cache"
    with pytest.raises(InputError) as info:
        tokenize(TokenizeConfig(train_paths=(path,), cache_path=str(cache), num_processes=2,
                                range_bytes=RANGE))
    text = str(info.value)
    assert "\n" not in text and text.startswith(message), text
    record = read_ledger(str(cache))
    assert record is None or not record.complete
    listed = set() if record is None else {record.shard_name(s) for s in record.shards("train")}
    on_disk = {p.name.split(".")[0] for p in (cache / "train").glob("*")} if (
        cache / "train").exists() else set()
    assert on_disk == listed  # what finished is recorded, and nothing else is there
    assert not [p for p in cache.rglob("*") if ".tmp-" in p.name]


def test_away_from_a_terminal_progress_is_a_line_per_interval_and_one_summary(
        tmp_path: Path, caplog):
    big = tmp_path / "big.jsonl"
    write_jsonl(big, paragraphs(600))
    config = dict(train_paths=(str(big),), num_processes=2, range_bytes=RANGE)
    with caplog.at_level("INFO", logger="marin.tokenize"):
        record = tokenize(TokenizeConfig(cache_path=str(tmp_path / "quiet"),
                                         progress_seconds=3600, **config))
    lines = [r.getMessage() for r in caplog.records if r.name == "marin.tokenize"]
    units = len(record.shards("train"))
    assert units > 5 and len(lines) == 1, lines
    assert lines[0].startswith(f"tokenized {tmp_path / 'quiet'}: train "
                               f"{record.totals['train'].documents:,} documents")
    assert f"{units} units built, 0 reused" in lines[0]
    caplog.clear()
    with caplog.at_level("INFO", logger="marin.tokenize"):
        tokenize(TokenizeConfig(cache_path=str(tmp_path / "every"), progress_seconds=0,
                                **config))
    lines = [r.getMessage() for r in caplog.records if r.name == "marin.tokenize"]
    ticks = [line for line in lines if line.startswith("tokenizing: ")]
    assert len(ticks) >= units and len(lines) == len(ticks) + 1
    assert ticks[-1].startswith(f"tokenizing: 100% of {big.stat().st_size / 1e6:,.1f} MB, "
                                f"{units}/{units} units")


BAR_SCRIPT = """
import sys
from marin.processing.tokenize import TokenizeConfig, tokenize
tokenize(TokenizeConfig(train_paths=(sys.argv[1],), cache_path=sys.argv[2], num_processes=2,
                        range_bytes=int(sys.argv[3]), batch_size=2))
"""


def test_on_a_terminal_progress_is_a_bar(tmp_path: Path):
    import pty

    big = tmp_path / "big.jsonl"
    write_jsonl(big, paragraphs(600))
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-c", BAR_SCRIPT, str(big), str(tmp_path / "c"),
                             str(RANGE)], stderr=follower, stdout=subprocess.DEVNULL,
                            env={**os.environ, "COLUMNS": "160", "TERM": "xterm"})
    os.close(follower)
    shown = b""
    while True:
        try:
            block = os.read(leader, 65536)
        except OSError:  # the other end closed
            break
        if not block:
            break
        shown += block
    assert proc.wait(timeout=120) == 0
    os.close(leader)
    text = shown.decode(errors="replace")
    assert "tokenize" in text and " docs" in text and "tok/s" in text, text[-2000:]
    assert "\x1b[" in text  # drawn with terminal controls, then cleared
