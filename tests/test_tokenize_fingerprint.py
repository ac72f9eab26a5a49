"""Input fingerprints by content: touching a file keeps a tokenize step's key."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from marin.execution import Executor
from marin.processing.tokenize import tokenize_step
from marin.processing.tokenize.fingerprint import content_hash
from marin.processing.tokenize.inputs import fingerprint_inputs, list_inputs


@pytest.fixture(autouse=True)
def _hash_cache_in_tmp(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MARIN_CACHE_DIR", str(tmp_path / "marin-cache"))


def _key(prefix: Path, data: Path) -> str:
    return Executor(str(prefix)).plan([tokenize_step("tokenized/x", [str(data)])]
                                      ).entries[0].node.hash


def test_touching_an_input_keeps_the_tokenize_steps_key(tmp_path: Path):
    data = tmp_path / "topics.txt"
    data.write_text("the same content, rewritten")
    first = _key(tmp_path / "prefix", data)
    stat = data.stat()
    os.utime(data, ns=(stat.st_atime_ns + 10**9, stat.st_mtime_ns + 10**9))
    data.write_text("the same content, rewritten")  # as a script that writes it on import
    assert data.stat().st_mtime_ns != stat.st_mtime_ns
    assert _key(tmp_path / "prefix", data) == first
    data.write_text("other content, same length!")
    assert _key(tmp_path / "prefix", data) != first


def test_an_unchanged_file_is_not_read_again(tmp_path: Path):
    data = tmp_path / "a.txt"
    data.write_bytes(b"some bytes")
    cache = tmp_path / "hashes"
    true = "sha256:" + hashlib.sha256(b"some bytes").hexdigest()
    assert content_hash(str(data), str(cache)) == true
    [entry] = [p for p in cache.rglob("*") if p.is_file()]
    entry.write_text("sha256:remembered")  # what a second look returns if it does not read
    assert content_hash(str(data), str(cache)) == "sha256:remembered"
    os.utime(data, ns=(1, 1))  # a new version of the stat: read again, the true hash
    assert content_hash(str(data), str(cache)) == true


@pytest.mark.slow
@pytest.mark.parametrize("store", ["gcs_bucket", "s3_bucket"])
def test_bucket_inputs_are_fingerprinted_by_the_stores_checksum(store: str, tmp_path: Path,
                                                                 request):
    from marin.storage.files import move_into_place

    bucket = request.getfixturevalue(store)

    def upload(content: bytes) -> None:
        local = tmp_path / "upload.jsonl"
        local.write_bytes(content)
        move_into_place(str(local), f"{bucket}/in/a.jsonl")

    upload(json.dumps({"text": "one"}).encode() + b"\n")
    [listed] = list_inputs([f"{bucket}/in/*.jsonl"])
    assert listed.checksum and listed.checksum.split(":")[0] in ("md5", "crc32c", "etag")
    first = fingerprint_inputs([f"{bucket}/in/*.jsonl"])
    upload(json.dumps({"text": "one"}).encode() + b"\n")  # a new object, the same bytes
    assert fingerprint_inputs([f"{bucket}/in/*.jsonl"]) == first
    upload(json.dumps({"text": "two"}).encode() + b"\n")
    assert fingerprint_inputs([f"{bucket}/in/*.jsonl"]) != first


def test_a_local_folder_lists_what_fsspecs_find_lists(tmp_path: Path):
    """Local folders are listed with os.scandir; the files and sizes are fsspec's own
    ``find``'s (the reference), so fingerprints do not move: nested folders, hidden files,
    links to a file, to a folder (not followed) and to nowhere, other suffixes."""
    import fsspec

    root = tmp_path / "corpus"
    (root / "a" / "b").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "far.txt").write_text("far away")
    (root / "one.txt").write_text("one")
    (root / ".hidden.jsonl").write_text('{"text": "h"}\n')
    (root / "a" / "b" / "deep.jsonl").write_text('{"text": "deep"}\n')
    (root / "a" / "notes.csv").write_text("x,y\n")
    (root / "a" / "link.txt").symlink_to(tmp_path / "elsewhere" / "far.txt")
    (root / "a" / "folder.txt").symlink_to(tmp_path / "elsewhere")
    (root / "a" / "broken.txt").symlink_to(tmp_path / "nowhere.txt")
    fs = fsspec.filesystem("file")
    expected = sorted((p, info["size"]) for p, info in fs.find(str(root), detail=True).items()
                      if p.endswith((".txt", ".jsonl")))
    listed = [(f.url, f.size) for f in list_inputs([str(root)])]
    assert listed == expected
    assert (str(root / "a" / "link.txt"), len("far away")) in listed  # the target's size
    assert all(f.checksum is None for f in list_inputs([str(root)]))

