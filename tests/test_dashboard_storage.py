"""The dashboard's storage page over HTTP (a real uvicorn server on loopback): the bytes of
each step version and experiment, and what ``marin gc`` would delete and why, checked
against the files on disk; the page deletes nothing and takes no request that would."""

from __future__ import annotations

import html
import re
import urllib.request
from pathlib import Path

import pytest

from marin.execution import Executor
from tests.conftest import snapshot
from tests.dashboard_support import get, running_dashboard
from tests.fixtures import gc_experiment


def _run(prefix: Path, rate: str, monkeypatch) -> None:
    monkeypatch.setenv("MARIN_TEST_RATE", rate)
    assert Executor(str(prefix), max_concurrent=1).run(gc_experiment.steps(),
                                                       experiment="gc-study").ok


@pytest.fixture
def prefix(tmp_path: Path, monkeypatch) -> Path:
    """Two versions of the study (the older one unreachable) and a cut checkpoint save."""
    monkeypatch.setenv("MARIN_TEST_DIR", str(tmp_path))
    monkeypatch.setenv("MARIN_TEST_SET", "study")
    prefix = tmp_path / "prefix"
    _run(prefix, "1", monkeypatch)
    _run(prefix, "2", monkeypatch)
    new = max((prefix / "gc").glob("study-*"), key=lambda p: p.stat().st_mtime)
    cut = new / "checkpoints" / "step_00000010.orbax-checkpoint-tmp-1700000000"
    cut.mkdir(parents=True)
    (cut / "part").write_bytes(b"y" * 500)
    return prefix


def _bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def _rows(page: str, table: str, attribute: str) -> dict[str, int]:
    body = page.split(f'id="{table}"', 1)[1].split("</table>", 1)[0]
    return {html.unescape(key): int(size) for key, size in re.findall(
        rf'<tr {attribute}="([^"]+)"[^>]*>.*?data-bytes="(\d+)"', body, re.S)}


def test_the_storage_page_shows_sizes_and_what_gc_would_delete(prefix: Path):
    studies = sorted((prefix / "gc").glob("study-*"), key=lambda p: p.stat().st_mtime)
    old, new = studies
    before = snapshot(prefix)
    with running_dashboard(str(prefix)) as url:
        status, page, _ = get(f"{url}/storage")
        refused = [_method(f"{url}/storage", m) for m in ("POST", "DELETE", "PUT")]
    assert status == 200, page
    outputs = {str(p.relative_to(prefix)): _bytes(p) for p in (prefix / "gc").iterdir()}
    assert _rows(page, "storage", "data-key") == outputs
    unreachable = _rows(page, "unreachable", "data-path")
    cut = next((new / "checkpoints").glob("*orbax-checkpoint-tmp*"))
    assert unreachable == {str(old): outputs[str(old.relative_to(prefix))], str(cut): 500}
    assert "latest invocation" in page  # why the old version is unreachable
    assert f'data-bytes="{sum(outputs.values())}"' in page
    assert f'data-bytes="{sum(unreachable.values())}"' in page
    assert refused == [405, 405, 405]
    assert snapshot(prefix) == before  # read only: nothing written, nothing deleted


def _method(url: str, method: str) -> int:
    request = urllib.request.Request(url, method=method, data=b"")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status
    except urllib.error.HTTPError as e:
        return e.code


def test_a_link_out_of_the_prefix_is_not_read_or_counted(prefix: Path, tmp_path: Path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_bytes(b"s" * 12345)
    (outside / ".executor_status").write_text('{"status": "RUNNING"}')
    data = next((prefix / "gc").glob("data-*"))
    (data / "escape").symlink_to(outside)
    with running_dashboard(str(prefix)) as url:
        status, page, _ = get(f"{url}/storage")
    assert status == 200, page
    # The link counts as one entry of its own size, not as the folder it points to.
    assert _rows(page, "storage", "data-key")[str(data.relative_to(prefix))] < 12345
    assert (outside / "secret").exists()
