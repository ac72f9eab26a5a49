"""Tokenization into the token cache, against tiktoken and an independent BPE."""

from __future__ import annotations

import glob
import gzip
import json
import os
import pickle
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from marin.execution import Executor
from marin.processing.tokenize import TokenizeConfig, tokenize, tokenize_step
from marin.processing.tokenize.cache import CacheError
from marin.processing.tokenize.cache_stats import read_cache_stats
from marin.processing.tokenize.encoders import gpt2_files, load_encoder
from marin.processing.tokenize.inputs import InputError
from marin.processing.tokenize.loader import DataLoader, TokenCacheDataset
from tests.conftest import ROOT
from tests.helpers.corpus import plays


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("corpus")
    for play in plays(6):
        shutil.copy(play, folder / f"{play.stem}.txt")
    return folder


def _tiktoken_count(texts: list[str]) -> int:
    encoding = load_encoder("gpt2").encoding
    return sum(len(ids) for ids in encoding.encode_ordinary_batch(texts))


def test_gpt2_token_counts_equal_tiktokens(corpus: Path, tmp_path: Path):
    cache = str(tmp_path / "cache")
    ledger = tokenize(TokenizeConfig(train_paths=(str(corpus / "*.txt"),), cache_path=cache,
                                     num_processes=2))
    texts = [p.read_text() for p in sorted(corpus.glob("*.txt"))]
    totals = ledger.totals["train"]
    assert totals.documents == len(texts)
    assert totals.tokens == _tiktoken_count(texts) + len(texts)  # + one end token each
    stats = read_cache_stats(cache)
    assert (stats.total_elements, stats.total_tokens) == (len(texts), totals.tokens)
    assert stats.bytes == sum(len(t.encode()) for t in texts)
    assert 0.2 < stats.tokens_per_byte < 0.5


def test_gpt2_agrees_with_an_independent_bpe_implementation(corpus: Path):
    """Hugging Face's tokenizers, built from the same GPT-2 files, encodes identically."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    vocab_bpe, encoder_json = gpt2_files()
    merges = [tuple(line.split()) for line in vocab_bpe.read_text().splitlines()[1:] if line]
    vocab = json.loads(encoder_json.read_text())
    hf = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = decoders.ByteLevel()
    ours = load_encoder("gpt2")
    text = (corpus / sorted(os.listdir(corpus))[0]).read_text()[:20000]
    assert ours.encode_batch([text])[0] == hf.encode(text).ids


def test_a_second_run_is_a_cache_hit_and_stats_show_both(corpus: Path, tmp_path: Path):
    cache = str(tmp_path / "tokenized" / "plays")
    config = TokenizeConfig(train_paths=(str(corpus / "*.txt"),), cache_path=cache,
                            num_processes=1)
    tokenize(config)
    first = os.path.getmtime(Path(cache) / "train" / "shard-00000-00000.tokens")
    tokenize(config)
    assert os.path.getmtime(Path(cache) / "train" / "shard-00000-00000.tokens") == first
    TokenCacheDataset(cache, seq_len=128)  # a training step reads it
    stats = read_cache_stats(cache)
    assert (stats.builds, stats.hits, stats.reads) == (1, 2, 1)
    assert stats.hit_rate == pytest.approx(2 / 3)
    out = subprocess.run([sys.executable, "-m", "marin.cli", "cache", "stats",
                          str(tmp_path), "--json"], capture_output=True, text=True, cwd=ROOT,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    [row] = json.loads(out.stdout)
    assert row["path"] == cache and row["builds"] == 1 and row["hits"] == 2
    human = subprocess.run([sys.executable, "-m", "marin.cli", "cache", "stats",
                            str(tmp_path)], capture_output=True, text=True, cwd=ROOT,
                           timeout=120)
    assert "67%" in human.stdout and "gpt2" in human.stdout


def test_compressed_jsonl_and_parquet_give_the_same_tokens_as_text(corpus: Path,
                                                                   tmp_path: Path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    import zstandard

    texts = [p.read_text() for p in sorted(corpus.glob("*.txt"))][:3]
    lines = "".join(json.dumps({"text": t}) + "\n" for t in texts).encode()
    (tmp_path / "a.jsonl.gz").write_bytes(gzip.compress(lines))
    (tmp_path / "b.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(lines))
    pq.write_table(pa.table({"text": texts}), tmp_path / "c.parquet")
    expected = _tiktoken_count(texts) + len(texts)
    for name in ("a.jsonl.gz", "b.jsonl.zst", "c.parquet"):
        ledger = tokenize(TokenizeConfig(train_paths=(str(tmp_path / name),),
                                         cache_path=str(tmp_path / f"cache-{name}")))
        assert ledger.totals["train"].tokens == expected, name


def test_undecodable_bytes_are_replaced_counted_and_reported(tmp_path: Path, caplog):
    (tmp_path / "bad.txt").write_bytes(b"good text \xff\xfe then more \xc3 end")
    with caplog.at_level("WARNING", logger="marin.tokenize"):
        ledger = tokenize(TokenizeConfig(train_paths=(str(tmp_path / "bad.txt"),),
                                         cache_path=str(tmp_path / "cache")))
    assert ledger.totals["train"].replaced_bytes == 3
    assert "3 undecodable byte(s) replaced" in caplog.text
    text = (tmp_path / "bad.txt").read_bytes().decode("utf-8", errors="replace")
    assert ledger.totals["train"].tokens == _tiktoken_count([text]) + 1
    assert read_cache_stats(str(tmp_path / "cache")).replaced_bytes == 3


def test_json_lines_read_as_the_standard_library_reads_them(tmp_path: Path):
    """Lines a strict parser refuses (bytes that are not UTF-8, NaN, an escaped lone
    surrogate) or reads its own way (an integer past 64 bits) give the documents
    ``json.loads`` gives, each invalid byte and lone surrogate replaced by U+FFFD and
    counted."""
    lines = [b'{"text": "plain words"}', b'{"text": "caf\xc3\xa9 \xff end"}',
             b'{"text": "not a number", "score": NaN}',
             b'{"text": "big", "id": 123456789012345678901234567890}',
             b'{"text": "half \\ud800 a pair"}', b'{"id": 1, "text": "last"}']
    (tmp_path / "odd.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    ledger = tokenize(TokenizeConfig(train_paths=(str(tmp_path / "odd.jsonl"),),
                                     cache_path=str(tmp_path / "cache"), num_processes=1))
    texts = [json.loads(line.decode("utf-8", errors="replace"))["text"] for line in lines]
    texts[4] = texts[4].replace("\ud800", "\ufffd")  # no encoder takes a lone surrogate
    encoding = load_encoder("gpt2").encoding
    expected = []
    for text in texts:
        expected += [*encoding.encode_ordinary(text), encoding.eot_token]
    dataset = TokenCacheDataset(str(tmp_path / "cache"), seq_len=4, record_read=False)
    assert ledger.totals["train"].replaced_bytes == 2  # the byte 0xff, the surrogate
    assert ledger.totals["train"].documents == len(lines)
    assert dataset.tokens(0, dataset.total_tokens).tolist() == expected


def test_json_nested_too_deep_is_one_line_naming_the_line(tmp_path: Path):
    deep = b'{"text": "x", "n": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    (tmp_path / "deep.jsonl").write_bytes(b'{"text": "fine"}\n' + deep + b"\n")
    with pytest.raises(InputError) as info:
        tokenize(TokenizeConfig(train_paths=(str(tmp_path / "deep.jsonl"),),
                                cache_path=str(tmp_path / "cache"), num_processes=1))
    assert str(info.value) == (f"{tmp_path / 'deep.jsonl'}, line 2 (byte 17): JSON nested "
                               "too deep to read; fix or remove that line")


def test_empty_files_are_skipped_and_counted(tmp_path: Path):
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "full.txt").write_text("To be, or not to be")
    ledger = tokenize(TokenizeConfig(train_paths=(str(tmp_path / "*.txt"),),
                                     cache_path=str(tmp_path / "cache")))
    totals = ledger.totals["train"]
    assert (totals.documents, totals.empty_documents) == (1, 1)


@pytest.mark.parametrize("path, message", [
    ("{tmp}/nope.txt", "input path '{tmp}/nope.txt' does not exist"),
    ("{tmp}/*.jsonl", "input glob '{tmp}/*.jsonl' matches no file"),
])
def test_missing_paths_and_empty_globs_are_named(tmp_path: Path, path, message):
    with pytest.raises(InputError) as info:
        tokenize(TokenizeConfig(train_paths=(path.format(tmp=tmp_path),),
                                cache_path=str(tmp_path / "cache")))
    assert str(info.value) == message.format(tmp=tmp_path)
    assert not (tmp_path / "cache" / "ledger.json").exists()


def test_changed_data_gets_a_new_version_and_unchanged_data_does_not(tmp_path: Path):
    data = tmp_path / "data.txt"
    data.write_text("first version of the corpus")
    prefix = str(tmp_path / "prefix")
    first = Executor(prefix).plan([tokenize_step("tokenized/x", [str(data)])]).entries[0]
    again = Executor(prefix).plan([tokenize_step("tokenized/x", [str(data)])]).entries[0]
    assert first.node.hash == again.node.hash
    assert Executor(prefix).run([tokenize_step("tokenized/x", [str(data)])]).ok
    time.sleep(0.01)
    data.write_text("second, longer version of the corpus")
    changed = Executor(prefix).plan([tokenize_step("tokenized/x", [str(data)])]).entries[0]
    assert changed.node.hash != first.node.hash
    assert changed.action == "run"
    assert changed.reason.startswith("config changed since x-") and "input_fingerprint" in \
        changed.reason


def test_a_cache_with_another_tokenizer_is_a_clear_error(corpus: Path, tmp_path: Path):
    from marin.processing.tokenize import TrainTokenizerConfig, train_tokenizer

    cache = str(tmp_path / "cache")
    tokenize(TokenizeConfig(train_paths=(str(corpus / "*.txt"),), cache_path=cache))
    trained = train_tokenizer(TrainTokenizerConfig(input_paths=(str(corpus / "*.txt"),),
                                                   vocab_size=600,
                                                   output_path=str(tmp_path / "tok")))
    with pytest.raises(CacheError, match=r"was tokenized with 'gpt2' \(vocabulary 50257\), but "
                       r"this step asks for .*tok'? \(vocabulary 600\)"):
        TokenCacheDataset(cache, seq_len=64, expected_tokenizer=str(tmp_path / "tok"))
    assert trained.endswith("tokenizer.json")


def test_a_trained_tokenizer_tokenizes_through_the_executor(corpus: Path, tmp_path: Path):
    from marin.execution import ExecutorStep
    from marin.processing.tokenize import TrainTokenizerConfig, train_tokenizer

    tok = ExecutorStep("tokenizers/plays-1k", train_tokenizer, TrainTokenizerConfig(
        input_paths=(str(corpus / "*.txt"),), vocab_size=1000))
    step = tokenize_step("tokenized/plays-1k", [str(corpus / "*.txt")], tokenizer=tok)
    result = Executor(str(tmp_path / "prefix")).run([step])
    assert result.ok, result.summary()
    cache = result.plan.entry_of(result.plan.graph.node_of(step)).output_path
    dataset = TokenCacheDataset(cache, seq_len=64)
    assert dataset.vocab_size == 1000
    seq = dataset.sequence(0)
    assert seq.max() < 1000
    tokenizer = load_encoder(str(Path(cache).parent.parent / "tokenizers" /
                                 os.listdir(tmp_path / "prefix" / "tokenizers")[0]))
    decoded = tokenizer.tokenizer.decode(seq.tolist())
    first_play = sorted(corpus.glob("*.txt"))[0].read_text()
    assert first_play.startswith(decoded[:40])


def test_the_loader_is_deterministic_resumable_and_reads_the_right_tokens(corpus: Path,
                                                                           tmp_path: Path):
    cache = str(tmp_path / "cache")
    tokenize(TokenizeConfig(train_paths=(str(corpus / "*.txt"),), cache_path=cache))
    dataset = TokenCacheDataset(cache, seq_len=256)
    stream = np.concatenate([np.fromfile(p, dtype="<u2") for p in
                             sorted(glob.glob(f"{cache}/train/*.tokens"))])
    assert np.array_equal(dataset.sequence(7), stream[7 * 256:8 * 256])
    a = DataLoader(dataset, batch_size=4, seed=1)
    b = DataLoader(dataset, batch_size=4, seed=1)
    c = DataLoader(dataset, batch_size=4, seed=2)
    assert np.array_equal(a.batch(3), b.batch(3))
    assert not np.array_equal(a.batch(3), c.batch(3))
    epoch = dataset.num_sequences // 4
    seen = np.concatenate([a.indices(s) for s in range(epoch)])
    assert len(set(seen.tolist())) == len(seen)  # no repeats within an epoch
    resumed = DataLoader(dataset, batch_size=4, seed=1, start_step=5)
    iterator = iter(resumed)
    for expected_step in range(5, 9):
        step, batch = next(iterator)
        assert step == expected_step and np.array_equal(batch, a.batch(step))
    assert batch.shape == (4, 256) and batch.dtype == np.int32


def _in_a_thread(fn):
    """Run ``fn`` in a second thread, as the executor's runner does; returns or raises."""
    import threading

    out: dict = {}

    def run() -> None:
        try:
            out["value"] = fn()
        except BaseException as e:
            out["error"] = e

    worker = threading.Thread(target=run)
    worker.start()
    worker.join()
    if "error" in out:
        raise out["error"]
    return out["value"]


def test_inside_an_executor_thread_the_shards_equal_a_single_workers(corpus: Path,
                                                                    tmp_path: Path):
    pattern = str(corpus / "*.txt")
    threaded = tmp_path / "threaded"
    _in_a_thread(lambda: tokenize(TokenizeConfig(train_paths=(pattern,),
                                                 cache_path=str(threaded), num_processes=3)))
    single = tmp_path / "single"
    tokenize(TokenizeConfig(train_paths=(pattern,), cache_path=str(single), num_processes=1))
    shards = sorted(p.name for p in (single / "train").iterdir())
    assert shards == sorted(p.name for p in (threaded / "train").iterdir()) and shards
    for name in shards:
        assert (threaded / "train" / name).read_bytes() == (single / "train" / name).read_bytes()
    ledger = json.loads((threaded / "ledger.json").read_text())
    assert ledger["complete"] and len(ledger["splits"]["train"]) == len(shards) // 2


def test_array_encoding_is_ordinary_encoding_even_with_special_token_text():
    """The cache holds what ``encode_ordinary`` gives: "<|endoftext|>" inside a document is
    text, not the end-of-document token."""
    ours = load_encoder("gpt2")
    texts = ["Hello <|endoftext|> world", "", "Ünïcödé and emoji \U0001f600", "x" * 5000]
    arrays = ours.encode_arrays(texts)
    assert [a.tolist() for a in arrays] == ours.encoding.encode_ordinary_batch(texts)
    assert ours.eos_id not in arrays[0].tolist()


def test_each_thread_encodes_with_its_own_copy_of_the_encoding():
    import threading

    ours = load_encoder("gpt2")
    texts = ["Hello world", "Ünïcödé and emoji \U0001f600", " spaces   and\n\nlines "]
    seen: dict[str, tuple] = {}

    def encode(name: str) -> None:
        seen[name] = (ours.thread_encoding(), [a.tolist() for a in ours.encode_arrays(texts)],
                      ours.encode_batch(texts))

    threads = [threading.Thread(target=encode, args=(f"t{i}",)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    encode("main")
    copies = {id(encoding) for encoding, _, _ in seen.values()}
    assert len(copies) == 3 and ours.thread_encoding() is seen["main"][0]
    expected = ours.encoding.encode_ordinary_batch(texts)
    assert all(arrays == lists == expected for _, arrays, lists in seen.values())
    again = pickle.loads(pickle.dumps(ours))  # e.g. to a worker process: copies stay behind
    assert again.encode_batch(texts) == expected


@pytest.mark.slow
def test_a_workers_error_inside_an_executor_thread_is_raised_with_its_message(tmp_path: Path):
    folder = tmp_path / "bad"
    folder.mkdir()
    for i in range(3):
        (folder / f"part-{i}.jsonl").write_text(json.dumps({"text": "fine"}) + "\n")
    (folder / "part-1.jsonl").write_text(json.dumps({"body": "no text field"}) + "\n")
    config = TokenizeConfig(train_paths=(str(folder / "*.jsonl"),),
                            cache_path=str(tmp_path / "cache"), num_processes=2)
    with pytest.raises(InputError, match=r"part-1\.jsonl, line 1 \(byte 0\): no string field "
                       r"'text' \(its fields are 'body'\)"):
        _in_a_thread(lambda: tokenize(config))
    ledger = tmp_path / "cache" / "ledger.json"  # written once a first shard is recorded
    assert not ledger.exists() or not json.loads(ledger.read_text())["complete"]
    left = sorted(p.name for p in (tmp_path / "cache").rglob("*") if p.is_file())
    assert not [n for n in left if n.endswith(".tokens")]  # the failed unit wrote nothing
    assert not [n for n in left if ".tmp-" in n]  # and no temporary file is left


@pytest.mark.slow
@pytest.mark.parametrize("store", ["gcs_bucket", "s3_bucket"])
def test_a_cache_in_a_bucket_equals_a_local_one(store: str, corpus: Path, tmp_path: Path,
                                                request):
    from marin.processing.tokenize.cache_stats import find_caches
    from marin.storage.files import move_into_place

    bucket = request.getfixturevalue(store)
    local_inputs = sorted(corpus.glob("*.txt"))[:2]
    for path in local_inputs:
        copy = tmp_path / path.name
        shutil.copy(path, copy)
        move_into_place(str(copy), f"{bucket}/inputs/{path.name}")
    remote = f"{bucket}/tokenized/plays/"  # a trailing slash joins like none
    tokenize(TokenizeConfig(train_paths=(f"{bucket}/inputs/*.txt",), cache_path=remote,
                            num_processes=2))
    local = tmp_path / "local"
    tokenize(TokenizeConfig(train_paths=tuple(str(p) for p in local_inputs),
                            cache_path=str(local), num_processes=1))
    assert find_caches(f"{bucket}/tokenized") == [f"{bucket}/tokenized/plays"]
    ours = TokenCacheDataset(remote, seq_len=64, record_read=False)
    theirs = TokenCacheDataset(str(local), seq_len=64, record_read=False)
    assert ours.total_tokens == theirs.total_tokens
    last = ours.total_tokens
    assert np.array_equal(ours.tokens(0, last), theirs.tokens(0, last))


def test_a_missing_split_is_named_with_the_splits_there_are(corpus: Path, tmp_path: Path):
    cache = str(tmp_path / "cache")
    tokenize(TokenizeConfig(train_paths=(str(sorted(corpus.glob("*.txt"))[0]),),
                            cache_path=cache, num_processes=1))
    with pytest.raises(CacheError, match=r"has no 'validation' split; it has train$"):
        TokenCacheDataset(cache, seq_len=16, split="validation")
    with pytest.raises(CacheError, match=r"has no split 'validation'; it has train$"):
        read_cache_stats(cache, split="validation")
