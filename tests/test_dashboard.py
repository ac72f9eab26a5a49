"""The dashboard over HTTP (a real uvicorn server on loopback) and the invocation records the
executor writes for it: pages and JSON against the stored files, bad input, the token, the
command line, and a gs:// prefix on the GCS emulator."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from marin.dashboard.layout import layout_graph
from marin.execution import Executor, ExecutorStep, output_path_of, this_output_path
from tests.conftest import ROOT, snapshot
from tests.dashboard_support import get, invocation_records, running_dashboard, status_of
from tests.servers import free_port


@dataclass(frozen=True)
class WordsConfig:
    text: str
    output_path: str = this_output_path()


@dataclass(frozen=True)
class CountConfig:
    words: str
    fail: bool = False
    output_path: str = this_output_path()


def write_words(config: WordsConfig) -> None:
    import fsspec

    with fsspec.open(f"{config.output_path}/words.txt", "w") as f:
        f.write(config.text)


def count_words(config: CountConfig) -> None:
    if config.fail:
        raise RuntimeError("counting failed on purpose")


def pipeline(fail: bool = True) -> list[ExecutorStep]:
    words = ExecutorStep("data/words", write_words, WordsConfig(text="a b c"))
    ok = ExecutorStep("count/ok", count_words, CountConfig(words=output_path_of(words)))
    bad = ExecutorStep("count/bad", count_words, CountConfig(words=output_path_of(words),
                                                             fail=fail))
    after = ExecutorStep("count/after", count_words, CountConfig(words=output_path_of(bad)))
    return [words, ok, bad, after]


@pytest.fixture
def ran(tmp_path: Path) -> Path:
    prefix = tmp_path / "prefix"
    result = Executor(str(prefix), max_concurrent=2).run(pipeline())
    assert not result.ok
    return prefix


def test_each_run_records_its_invocation_and_a_dry_run_records_none(ran: Path):
    [record] = invocation_records(ran)
    by_name = {s["name"]: s for s in record["steps"]}
    assert {n: s["outcome"] for n, s in by_name.items()} == {
        "data/words": "succeeded", "count/ok": "succeeded", "count/bad": "failed",
        "count/after": "blocked"}
    assert all(s["action"] == "run" and s["reason"] == "no output yet"
               for s in record["steps"])
    assert by_name["count/after"]["dependencies"] == [by_name["count/bad"]["key"]]
    assert record["counts"] == {"succeeded": 2, "failed": 1, "blocked": 1}
    assert record["ended"] >= record["started"] and record["user"] and record["host"]
    assert "counting failed on purpose" in by_name["count/bad"]["error"]

    Executor(str(ran)).plan(pipeline())
    assert len(invocation_records(ran)) == 1
    Executor(str(ran)).run(pipeline(fail=False))
    second = next(r for r in invocation_records(ran) if r["id"] != record["id"])
    assert {s["name"]: s["outcome"] for s in second["steps"]}["data/words"] == "skipped"
    assert {s["name"]: s["action"] for s in second["steps"]}["data/words"] == "skip"


def test_layout_places_each_step_right_of_its_dependencies():
    placed = layout_graph([("a", []), ("b", ["a"]), ("c", ["a"]), ("d", ["b", "c"]),
                           ("e", ["zz-not-in-graph"])])
    column = {n.key: n.column for n in placed.nodes}
    assert column == {"a": 0, "b": 1, "c": 1, "d": 2, "e": 0}
    assert len(placed.edges) == 4
    rows = {(n.column, n.y) for n in placed.nodes}
    assert len(rows) == 5  # no two boxes overlap


def test_pages_and_live_states_agree_with_the_stored_files(ran: Path):
    [record] = invocation_records(ran)
    before = snapshot(ran)
    with running_dashboard(str(ran)) as url:
        status, body, _ = get(url + "/")
        assert status == 200 and record["id"] in body
        status, body, _ = get(f"{url}/experiments/{record['id']}")
        assert status == 200
        for step in record["steps"]:
            assert step["key"] in body
        status, body, _ = get(f"{url}/api/experiments/{record['id']}/states")
        states = json.loads(body)["states"]
        assert {k: v[0] for k, v in states.items()} == {
            s["key"]: status_of(ran / s["key"]) for s in record["steps"]}
        bad = next(s["key"] for s in record["steps"] if s["name"] == "count/bad")
        assert "counting failed on purpose" in states[bad][2]
        status, body, _ = get(f"{url}/steps/{bad}")
        assert status == 200 and "RuntimeError: counting failed on purpose" in body
        assert "Traceback (most recent call last)" in body  # the step's own, shown as data
        words = next(s["key"] for s in record["steps"] if s["name"] == "data/words")
        status, body, headers = get(f"{url}/file?step={words}&path=words.txt")
        assert (status, body) == (200, "a b c") and headers["content-type"].startswith(
            "text/plain")
        status, body, _ = get(f"{url}/experiments/all")
        # Without the invocation, steps are found by their output folders: the blocked
        # step never got one.
        assert status == 200 and all(s["key"] in body for s in record["steps"]
                                     if s["outcome"] != "blocked")
    assert snapshot(ran) == before


def test_an_empty_or_missing_prefix_says_so(tmp_path: Path):
    (tmp_path / "empty").mkdir()
    with running_dashboard(str(tmp_path / "empty")) as url:
        status, body, _ = get(url + "/")
        assert status == 200 and "holds no executor outputs yet" in body
        for page in ("/runs", "/studies", "/caches", "/traces", "/experiments/all"):
            assert get(url + page)[0] == 200
    with running_dashboard(str(tmp_path / "missing")) as url:
        status, body, _ = get(url + "/")
        assert status == 200 and "does not exist" in body
    assert not (tmp_path / "missing").exists()


def test_corrupted_records_are_shown_not_fatal(ran: Path):
    [record] = invocation_records(ran)
    ok = next(s["key"] for s in record["steps"] if s["name"] == "count/ok")
    words = next(s["key"] for s in record["steps"] if s["name"] == "data/words")
    (ran / ok / ".executor_status").write_text("{not json")
    (ran / words / ".executor_info").write_bytes(b"\x00\xff garbage")
    (ran / ".marin" / "invocations" / "19990101-000000-deadbeef.json").write_text("[1, 2")
    with running_dashboard(str(ran)) as url:
        status, body, _ = get(url + "/")
        assert status == 200 and "19990101-000000-deadbeef.json is unreadable" in body
        status, body, _ = get(f"{url}/experiments/{record['id']}")
        assert status == 200 and "CORRUPT" in body and f"{ok}/.executor_status" in body
        status, body, _ = get(f"{url}/experiments/all")  # infos are read for this view
        assert status == 200 and f"{words}/.executor_info is unreadable" in body
        status, body, _ = get(f"{url}/steps/{ok}")
        assert status == 200 and "is unreadable" in body
        status, body, _ = get(f"{url}/steps/{words}")
        assert status == 200 and f"{words}/.executor_info is unreadable" in body
        status, body, _ = get(f"{url}/experiments/19990101-000000-deadbeef")
        assert status == 422 and "is unreadable" in body and "Traceback" not in body


@pytest.mark.parametrize("path", ["/steps/nothing-12345678", "/steps/../../etc-12345678",
                                  "/steps/not-a-step", "/experiments/no-such-run",
                                  "/file?step=data/x-12345678&path=../../../etc/passwd",
                                  "/study?step=nope-12345678", "/no/such/page"])
def test_unknown_things_get_a_404_page(ran: Path, path: str):
    with running_dashboard(str(ran)) as url:
        status, body, _ = get(url + path)
    assert status == 404 and "Traceback" not in body and "Cannot show this page" in body


@pytest.mark.slow
def test_an_unreachable_bucket_gives_a_page_that_says_so(monkeypatch):
    from marin.storage import reset_storage_instances

    closed = free_port()  # nothing listens there
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", f"http://127.0.0.1:{closed}")
    reset_storage_instances()
    try:
        with running_dashboard("gs://unreachable-bucket/x", read_timeout=3) as url:
            status, body, _ = get(url + "/")
            api_status, api_body, _ = get(url + "/api/experiments/all/states")
    finally:
        reset_storage_instances()
    assert status in (503, 504) and "gs://unreachable-bucket/x" in body
    assert "Traceback" not in body
    assert api_status in (503, 504) and "gs://unreachable-bucket/x" in json.loads(
        api_body)["error"]


def test_a_token_guards_every_page_but_static_assets(ran: Path):
    with running_dashboard(str(ran), token="s3cret") as url:
        status, body, _ = get(url + "/")
        assert status == 401 and "token" in body
        assert get(url + "/", {"Authorization": "Bearer wrong"})[0] == 401
        assert get(url + "/", {"Authorization": "Bearer s3cret"})[0] == 200
        status, _, headers = get(url + "/runs?token=s3cret&exp=all")
        assert status == 303 and headers["location"] == "/runs?exp=all"
        cookie = headers["set-cookie"].split(";")[0]
        assert "httponly" in headers["set-cookie"].lower()
        assert get(url + "/runs?exp=all", {"Cookie": cookie})[0] == 200
        assert get(url + "/static/plotly.min.js")[0] == 200


def test_off_loopback_a_token_is_required_and_made_when_missing():
    from marin.dashboard import DashboardConfig
    from marin.dashboard.server import prepare

    assert prepare(DashboardConfig(prefix="/tmp/x")).token is None
    made = prepare(DashboardConfig(prefix="/tmp/x", host="0.0.0.0")).token
    assert made and len(made) >= 24
    assert prepare(DashboardConfig(prefix="/tmp/x", host="::", token="t")).token == "t"


def _marin(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "marin.cli", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=60, env={**os.environ, **(env or {})})


def test_the_command_refuses_bad_settings_in_one_line(tmp_path: Path):
    out = _marin("dashboard", "--prefix", "   ")
    assert out.returncode == 2 and "prefix is empty" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    out = _marin("dashboard", "--prefix", "nosuch://bucket/x")
    assert out.returncode == 2 and "nosuch://" in out.stderr and "Traceback" not in out.stderr
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        out = _marin("dashboard", "--prefix", str(tmp_path), "--port", str(port))
    assert out.returncode == 2 and f"cannot listen on 127.0.0.1:{port}" in out.stderr


@pytest.mark.slow
def test_the_command_serves_until_stopped(ran: Path):
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "marin.cli", "dashboard", "--prefix",
                             str(ran), "--port", str(port)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        line = proc.stdout.readline()
        assert f"http://127.0.0.1:{port}/" in line and str(ran) in line
        assert get(f"http://127.0.0.1:{port}/healthz")[1] == "ok"
        [record] = invocation_records(ran)
        assert record["id"] in get(f"http://127.0.0.1:{port}/")[1]
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_a_large_graph_is_summarised_by_family(tmp_path: Path):
    steps = [ExecutorStep(f"many/s{i:03d}", count_words, CountConfig(words=str(i)))
             for i in range(320)]
    Executor(str(tmp_path), max_concurrent=2).run(steps)
    [record] = invocation_records(tmp_path)
    with running_dashboard(str(tmp_path)) as url:
        status, body, _ = get(f"{url}/experiments/{record['id']}")
    assert status == 200 and 'id="families"' in body and 'id="graph"' not in body
    assert "SUCCESS <b data-count=\"SUCCESS\">320</b>" in body


@pytest.mark.slow
def test_a_gcs_prefix_reads_through_marin_storage(gcs_bucket: str):
    prefix = f"{gcs_bucket}/experiments"
    result = Executor(prefix, max_concurrent=2).run(pipeline())
    keys = {s.name: s.key for s in result.steps}
    from marin.storage import get_storage

    [name] = get_storage(prefix).list_dir(f"{prefix}/.marin/invocations")
    with running_dashboard(prefix) as url:
        status, body, _ = get(url + "/")
        assert status == 200 and name[: -len(".json")] in body
        _, body, _ = get(f"{url}/api/experiments/{name[: -len('.json')]}/states")
        states = {k: v[0] for k, v in json.loads(body)["states"].items()}
        _, body, _ = get(url + "/api/experiments/all/states")
        found = {k: v[0] for k, v in json.loads(body)["states"].items()}
        status, page, _ = get(f"{url}/steps/{keys['count/bad']}")
        words, _, _ = get(f"{url}/file?step={keys['data/words']}&path=words.txt")
    assert states == {keys["data/words"]: "SUCCESS", keys["count/ok"]: "SUCCESS",
                      keys["count/bad"]: "FAILED", keys["count/after"]: "PENDING"}
    assert found == {k: v for k, v in states.items() if v != "PENDING"}
    assert status == 200 and "counting failed on purpose" in page
    assert words == 200


def test_steps_are_found_in_nested_and_dotted_folders(tmp_path: Path):
    from marin.dashboard.reader import PrefixReader

    steps = [ExecutorStep("top", count_words, CountConfig(words="1")),
             ExecutorStep("sweep/v1.5/lr0.01", count_words, CountConfig(words="2")),
             ExecutorStep("a/b/c/d", count_words, CountConfig(words="3"))]
    result = Executor(str(tmp_path), max_concurrent=2).run(steps)
    (tmp_path / "notes.txt").write_text("not a step")
    assert PrefixReader(str(tmp_path)).discover_steps() == sorted(s.key for s in result.steps)


_TRAINING = __import__("threading").Event()


@dataclass(frozen=True)
class FakeRunConfig:
    records: int
    output_path: str = this_output_path()


def write_metrics_then_wait(config: FakeRunConfig) -> None:
    """Writes its metrics the way the trainer does, into the attempt folder the executor
    gives it, then waits until the test has looked."""
    import fsspec

    with fsspec.open(f"{config.output_path}/metrics.jsonl", "w") as f:
        for step in range(config.records):
            f.write(json.dumps({"step": step, "loss": 5.0 - step}) + "\n")
    assert _TRAINING.wait(timeout=120)


def test_a_running_run_shows_the_metrics_of_its_attempt_folder(tmp_path: Path):
    import threading

    step = ExecutorStep("train/live", write_metrics_then_wait, FakeRunConfig(records=3))
    _TRAINING.clear()
    runner = threading.Thread(target=lambda: Executor(str(tmp_path)).run([step]))
    runner.start()
    try:
        attempts = list(tmp_path.glob("train/live-*/.attempts/*/metrics.jsonl"))
        for _ in range(600):
            if attempts:
                break
            __import__("time").sleep(0.05)
            attempts = list(tmp_path.glob("train/live-*/.attempts/*/metrics.jsonl"))
        assert attempts, "the step never wrote its metrics"
        key = attempts[0].parent.parent.parent.relative_to(tmp_path).as_posix()
        with running_dashboard(str(tmp_path)) as url:
            status, body, _ = get(f"{url}/api/metrics?run={key}")
            run = json.loads(body)["runs"][key]
            assert status == 200 and run["state"] == "RUNNING"
            assert run["records"] == 3 and run["series"]["loss"][1] == [5.0, 4.0, 3.0]
            _, runs_page, _ = get(f"{url}/runs")
            assert key in runs_page  # listed as a training run while it trains
    finally:
        _TRAINING.set()
        runner.join(timeout=60)
    assert status_of(next(tmp_path.glob("train/live-*"))) == "SUCCESS"


@dataclass(frozen=True)
class WatchConfig:
    checkpoints: str
    words: str


def test_the_step_page_marks_a_nonblocking_dependency(tmp_path: Path):
    prefix = tmp_path / "prefix"
    words = ExecutorStep("data/words", write_words, WordsConfig(text="a b c"))
    other = ExecutorStep("data/other", write_words, WordsConfig(text="d e"))
    watch = ExecutorStep("count/watch", lambda config: None, WatchConfig(
        checkpoints=output_path_of(words, blocking=False), words=output_path_of(other)))
    assert Executor(str(prefix)).run([watch]).ok
    [record] = invocation_records(prefix)
    keys = {s["name"]: s["key"] for s in record["steps"]}
    with running_dashboard(str(prefix)) as url:
        status, body, _ = get(f"{url}/steps/{keys['count/watch']}")
    assert status == 200
    marked = f'{keys["data/words"]}</a> (not waited for)'
    assert marked in body
    assert f'{keys["data/other"]}</a> (not waited for)' not in body
    assert f'{keys["data/other"]}</a>' in body
