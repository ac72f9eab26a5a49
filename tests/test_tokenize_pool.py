"""The tokenize workers: idle workers encode batches of the units still being read, and
inputs on local disk are opened directly."""

from __future__ import annotations

import collections
import itertools
import json
import os
import threading
from pathlib import Path

import pytest

from marin.processing.tokenize import TokenizeConfig, tokenize
from marin.processing.tokenize.encoders import load_encoder
from marin.processing.tokenize.inputs import InputError
from marin.processing.tokenize.ledger import read_ledger
from marin.processing.tokenize.ranges import Unit
from marin.processing.tokenize.shard import Batch, ShardSettings, tokenize_unit
from marin.processing.tokenize.streams import open_input
from marin.storage.files import open_url
from tests.helpers.corpus import plays


def write_corpus(path: Path, copies: int = 1) -> list[str]:
    docs = [p for play in plays(4) for p in play.read_text().split("\n\n") if p.strip()]
    docs = docs * copies
    path.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs))
    return docs


def whole_file(path: Path) -> Unit:
    return Unit("train", 0, 0, "lines", (str(path),), 0, path.stat().st_size)


class TakesEvery:
    """Helpers whose thread takes every batch offered (``offer`` returns once it has)."""

    def __init__(self):
        self.taken: collections.deque[Batch] = collections.deque()
        self._ready = threading.Semaphore(0)
        self._took = threading.Semaphore(0)
        self.encoded = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        encoder = load_encoder("gpt2")
        while True:
            self._ready.acquire()
            batch = self.taken.popleft()
            if batch is None:
                return
            self._took.release()
            batch.run(encoder.encode_documents)
            self.encoded += 1

    def offer(self, texts: list[str]) -> Batch:
        batch = Batch(texts)
        self.taken.append(batch)
        self._ready.release()
        self._took.acquire()
        return batch

    def reclaim(self, batch: Batch) -> bool:
        return False  # taken as soon as offered

    def close(self) -> None:
        self.taken.append(None)
        self._ready.release()
        self._thread.join()


class BeginsNone:
    """Helpers that accept every batch and never begin one: the owner takes them back."""

    def __init__(self):
        self.offered = self.reclaimed = 0

    def offer(self, texts: list[str]) -> Batch:
        self.offered += 1
        return Batch(texts)

    def reclaim(self, batch: Batch) -> bool:
        self.reclaimed += 1
        return True


def shard_bytes(cache: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((cache / "train").iterdir())}


def test_a_shard_is_the_same_whoever_encodes_its_batches(tmp_path: Path):
    path = tmp_path / "corpus.jsonl"
    write_corpus(path)
    unit = whole_file(path)
    alone = tokenize_unit(unit, ShardSettings(str(tmp_path / "alone"), "gpt2", batch_size=8))
    helper = TakesEvery()
    try:
        helped = tokenize_unit(unit, ShardSettings(str(tmp_path / "helped"), "gpt2",
                                                   batch_size=8), helpers=helper)
    finally:
        helper.close()
    batches = -(-alone.documents // 8)
    assert helper.encoded >= batches > 10  # every batch went to the other thread
    idle = BeginsNone()
    reclaimed = tokenize_unit(unit, ShardSettings(str(tmp_path / "reclaimed"), "gpt2",
                                                  batch_size=8), helpers=idle)
    assert idle.offered == idle.reclaimed >= batches
    assert alone == helped == reclaimed
    assert shard_bytes(tmp_path / "alone") == shard_bytes(tmp_path / "helped") == shard_bytes(
        tmp_path / "reclaimed")


def test_the_last_range_is_encoded_by_every_worker(tmp_path: Path, monkeypatch):
    """One range, two workers: the second has no range to take and encodes batches of the
    first's (each thread that encodes builds its own copy of the encoding)."""
    path = tmp_path / "corpus.jsonl"
    write_corpus(path, copies=2)
    encoder = load_encoder("gpt2")
    built_by: list[str] = []
    build = encoder.build

    def recording_build():
        built_by.append(threading.current_thread().name)
        return build()

    monkeypatch.setattr(encoder, "build", recording_build)
    config = dict(train_paths=(str(path),), range_bytes=path.stat().st_size + 1, batch_size=4)
    one = tokenize(TokenizeConfig(cache_path=str(tmp_path / "one"), num_processes=1, **config))
    assert len(one.shards("train")) == 1
    built_by.clear()
    two = tokenize(TokenizeConfig(cache_path=str(tmp_path / "two"), num_processes=2, **config))
    assert sorted(built_by) == ["marin-tokenize-0", "marin-tokenize-1"]
    assert one.shards("train") == two.shards("train")
    assert shard_bytes(tmp_path / "one") == shard_bytes(tmp_path / "two")


def test_a_bad_line_after_batches_handed_to_helpers_is_one_line_and_nothing_counts(
        tmp_path: Path):
    path = tmp_path / "corpus.jsonl"
    docs = write_corpus(path, copies=2)
    with path.open("a") as f:
        f.write('{"text": "unterminated\n')
    cache = tmp_path / "cache"
    with pytest.raises(InputError) as info:
        tokenize(TokenizeConfig(train_paths=(str(path),), cache_path=str(cache),
                                num_processes=2, range_bytes=path.stat().st_size + 1,
                                batch_size=4))
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{path}, line {len(docs) + 1} (byte ")
    record = read_ledger(str(cache))
    assert record is None or not record.shards("train")
    assert not (cache / "train").exists() or not list((cache / "train").iterdir())


def test_local_inputs_open_as_the_storage_layer_opens_them(tmp_path: Path, monkeypatch):
    data = os.urandom(5000)
    (tmp_path / "real.jsonl").write_bytes(data)
    (tmp_path / "link.jsonl").symlink_to(tmp_path / "real.jsonl")
    monkeypatch.chdir(tmp_path)
    for url in (str(tmp_path / "real.jsonl"), "real.jsonl", f"file://{tmp_path}/real.jsonl",
                str(tmp_path / "link.jsonl")):
        with open_input(url) as mine, open_url(url, "rb") as theirs:
            assert mine.read() == theirs.read() == data, url
    for missing in (str(tmp_path / "gone.jsonl"), "gone.jsonl"):
        with pytest.raises(FileNotFoundError):
            open_input(missing)


def test_a_batch_encodes_as_its_documents_one_by_one_even_when_one_holds_the_end_token():
    """The documents of a batch are encoded as one text joined by the end token; one that
    holds the end token's text (or another special token's) stays ordinary text."""
    encoder = load_encoder("gpt2")
    encoding = encoder.encoding
    plain = [p for p in plays(1)[0].read_text().split("\n\n") if p.strip()][:40]
    tricky = ["a <|endoftext|> b", "x<|endofprompt|>y", "  trailing  ", "\n\n", "<|endoftext",
              "|>", "é ü 漢字 🎭", "<|endoftext|>"]
    for texts in (plain, tricky, plain[:3] + tricky, [], ["one"]):
        expected: list[int] = []
        lengths = []
        for ids in encoding.encode_ordinary_batch(texts):
            expected += [*ids, encoding.eot_token]
            lengths.append(len(ids) + 1)
        tokens, ends = encoder.encode_documents(texts)
        assert tokens.tolist() == expected
        assert ends.tolist() == list(itertools.accumulate(lengths))
