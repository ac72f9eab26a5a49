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


# -- marin.storage.files: the helpers steps and tools read and write files with ------------

@pytest.mark.parametrize("base, parts, joined", [
    ("gs://b/x", ("y", "z.json"), "gs://b/x/y/z.json"),
    ("gs://b/x/", ("/y/", "z.json"), "gs://b/x/y/z.json"),
    ("/data/run/", ("shard-0",), "/data/run/shard-0"),
    ("data/run", ("", "a", "b/"), "data/run/a/b"),
    ("/", ("a",), "/a"),
    ("gs://", ("bucket", "k"), "gs://bucket/k"),
    ("s3://b/p/", (), "s3://b/p"),
])
def test_join_url_puts_one_slash_between_pieces(base, parts, joined):
    from marin.storage.files import join_url

    assert join_url(base, *parts) == joined


@pytest.mark.parametrize("url, normal", [
    ("gcs://b/x/", "gs://b/x"), ("GS://b/x", "gs://b/x"), ("s3a://b/k", "s3://b/k"),
    ("file:///tmp/x/", "/tmp/x"), ("local:///tmp/x", "/tmp/x"), ("/", "/"),
    ("memory://t/a", "memory://t/a"), ("rel/path/", "rel/path"),
])
def test_normalize_url_spells_each_scheme_one_way(url, normal):
    from marin.storage.files import is_local, normalize_url

    assert normalize_url(url) == normal
    assert is_local(url) == ("://" not in normal)


def test_files_round_trip_and_list_as_urls_of_the_same_scheme(root: str):
    from marin.storage.files import atomic_write, exists, find, glob, join_url, open_url

    first, second = join_url(root, "run/", "a.json"), join_url(root, "run", "sub", "b.txt")
    with atomic_write(first, "w") as f:
        f.write('{"n": 1}')
    with atomic_write(second) as f:
        f.write(b"bytes")
    with open_url(first, "r") as f:
        assert f.read() == '{"n": 1}'
    assert exists(second) and not exists(join_url(root, "run", "missing"))
    found = find(join_url(root, "run"))
    assert [u.rpartition("/")[2] for u in found] == ["a.json", "b.txt"]
    for url in found + glob(join_url(root, "run", "*.json")):  # listed URLs open again
        assert _scheme(url) == _scheme(root)
        with open_url(url) as f:
            assert f.read() in (b'{"n": 1}', b"bytes")
    assert find(join_url(root, "nothing-here")) == []


def test_gcs_spelling_reaches_the_same_objects_as_gs(gcs_bucket: str):
    from marin.storage.files import atomic_write, find, open_url

    with atomic_write(f"{gcs_bucket}/x/y.txt") as f:
        f.write(b"one object")
    alias = "gcs://" + gcs_bucket.removeprefix("gs://")
    with open_url(f"{alias}/x/y.txt") as f:
        assert f.read() == b"one object"
    assert find(f"{alias}/x") == [f"{gcs_bucket}/x/y.txt"]  # listed in the canonical spelling


def test_a_writer_that_raises_leaves_nothing_behind(root: str, tmp_path: Path, monkeypatch):
    import tempfile

    from marin.storage.files import atomic_write, exists, find, join_url

    buffers = tmp_path / "local-buffers"  # where uploads to object stores are staged
    buffers.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(buffers))
    target = join_url(root, "out", "shard.tokens")
    with pytest.raises(RuntimeError, match="writer failed"), atomic_write(target) as f:
        f.write(b"x" * 100_000)
        raise RuntimeError("writer failed")
    assert not exists(target)
    assert find(join_url(root, "out")) == []  # no partial file, no temporary name
    if "://" not in root:
        assert os.listdir(os.path.join(root, "out")) == []
    assert os.listdir(buffers) == []  # the local upload buffer is gone too


def test_a_failed_rewrite_keeps_the_old_contents(root: str):
    from marin.storage.files import atomic_write, join_url, open_url

    target = join_url(root, "ledger.json")
    with atomic_write(target, "w") as f:
        f.write("old")
    with pytest.raises(ValueError), atomic_write(target, "w") as f:
        f.write("new, half")
        raise ValueError
    with open_url(target, "r") as f:
        assert f.read() == "old"


def test_atomic_write_refuses_modes_that_are_not_whole_files(tmp_path: Path):
    from marin.storage.files import atomic_write

    with pytest.raises(ValueError, match="mode 'w' or 'wb', not 'a'"), \
            atomic_write(str(tmp_path / "x"), "a"):
        pass


def test_move_into_place_moves_a_finished_file(root: str, tmp_path: Path):
    from marin.storage.files import join_url, move_into_place, open_url

    source = tmp_path / "finished"
    source.write_bytes(b"whole")
    target = join_url(root, "deep", "er", "file.bin")
    move_into_place(str(source), target)
    assert not source.exists()
    with open_url(target) as f:
        assert f.read() == b"whole"


def _scheme(url: str) -> str:
    return url.partition("://")[0] if "://" in url else "file"
