"""The storage interface's guarantees, on every backend available here."""

from __future__ import annotations

import multiprocessing
import os
import uuid
from pathlib import Path

import pytest

from marin.storage import StorageError, UnknownSchemeError, get_storage


@pytest.fixture(params=["file", "memory", "gs", "s3"])
def root(request, tmp_path: Path) -> str:
    if request.param == "file":
        return str(tmp_path)
    if request.param == "gs":
        return request.getfixturevalue("gcs_bucket") + "/prefix"
    if request.param == "s3":
        return request.getfixturevalue("s3_bucket") + "/prefix"
    return f"memory://test-{uuid.uuid4().hex}"


def test_create_if_absent_is_exclusive(root: str):
    storage = get_storage(root)
    path = f"{root}/step/.executor_lease"
    token = storage.create_if_absent(path, b"first")
    assert token is not None
    assert storage.create_if_absent(path, b"second") is None
    blob = storage.read(path)
    assert blob is not None and blob.data == b"first" and blob.token == token


def test_compare_and_swap_needs_the_current_token(root: str):
    storage = get_storage(root)
    path = f"{root}/x"
    t1 = storage.create_if_absent(path, b"one")
    t2 = storage.compare_and_swap(path, t1, b"two")
    assert t2 is not None and t2 != t1
    assert storage.compare_and_swap(path, t1, b"stale writer") is None
    assert storage.read(path).data == b"two"
    assert storage.delete_if_unchanged(path, t1) is False
    assert storage.delete_if_unchanged(path, t2) is True
    assert storage.read(path) is None
    assert storage.compare_and_swap(path, t2, b"gone") is None


def test_read_many_keeps_order_and_reports_missing(root: str):
    storage = get_storage(root)
    for i in range(5):
        storage.write(f"{root}/d/{i}", str(i).encode())
    blobs = storage.read_many([f"{root}/d/{i}" for i in (4, 9, 0)])
    assert [b.data if b else None for b in blobs] == [b"4", None, b"0"]
    assert sorted(storage.list_dir(f"{root}/d")) == [str(i) for i in range(5)]
    assert storage.list_dir(f"{root}/missing") == []


def _race(path: str, label: str, queue) -> None:
    queue.put((label, get_storage(path).create_if_absent(path, label.encode()) is not None))


def test_exclusive_create_across_processes(tmp_path: Path):
    path = str(tmp_path / "lease")
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_race, args=(path, f"p{i}", queue)) for i in range(8)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    results = dict(queue.get() for _ in procs)
    winners = [k for k, won in results.items() if won]
    assert len(winners) == 1
    assert Path(path).read_text() == winners[0]
    assert [n for n in os.listdir(tmp_path) if n != "lease"] == []  # no temp files left


def test_unwritable_prefix_is_a_clear_error(tmp_path: Path):
    # A prefix below a regular file cannot be created, even by root (CI runs as root, so
    # folder permissions would not stop it).
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    prefix = str(blocker / "prefix")
    with pytest.raises(StorageError, match=r"prefix .*a_file/prefix is not writable"):
        get_storage(prefix).check_writable(prefix)


def test_unknown_scheme_names_the_url():
    with pytest.raises(UnknownSchemeError, match=r"'nosuch://b/x'.*installed schemes: .*gs://"):
        get_storage("nosuch://b/x")
