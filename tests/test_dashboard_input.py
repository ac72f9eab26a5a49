"""Bad input to the dashboard gives a page that explains, never a 500: damaged records, odd
bytes in URLs and tokens, links and redirects built from hostile names, and the command's
settings (one line, exit status 2)."""

from __future__ import annotations

import http.client
import json
import os
import re
import subprocess
import sys
from html import unescape
from pathlib import Path
from urllib.parse import urldefrag, urljoin, urlsplit

import pytest

from marin.dashboard.records import decode_invocation
from tests.dashboard_support import get, invocation_records, run_file_steps, running_dashboard

TOKEN = "s3cret"


@pytest.fixture
def ran(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    prefix = tmp_path / "prefix"
    keys = run_file_steps(prefix, {"data/words": {"words.txt": "a b c"},
                                   "data/more": {"more.txt": "d e f"}})
    return prefix, keys


def _no_500(status: int, body: str, what: str) -> None:
    assert status < 500 and "Traceback" not in body, (what, status, body[:300])


def test_damaged_records_are_shown_with_the_rest_of_the_page(ran):
    prefix, keys = ran
    [record] = invocation_records(prefix)
    folder = prefix / ".marin" / "invocations"
    damaged = {**record, "id": "19990101-000000-0badf00d", "started": "yesterday",
               "git_commit": 12345, "argv": 7, "counts": [1],
               "steps": ["notadict", *record["steps"]]}
    (folder / "19990101-000000-0badf00d.json").write_text(json.dumps(damaged))
    deep = "[" * 200_000 + "]" * 200_000
    (folder / "19980101-000000-0deeeeep.json").write_text(deep)
    words, more = prefix / keys["data/words"], prefix / keys["data/more"]
    status = json.loads((words / ".executor_status").read_text())
    (words / ".executor_status").write_text(
        json.dumps(status).replace(f'"time": {status["time"]}', '"time": 1e400'))
    info = json.loads((more / ".executor_info").read_text())
    (more / ".executor_info").write_text(json.dumps({**info, "created": "yesterday",
                                                     "git_commit": 5, "dependencies": "x"}))
    with running_dashboard(str(prefix)) as url:
        answers = {path: get(url + path) for path in (
            "/", "/experiments/all", f"/experiments/{record['id']}",
            "/experiments/19990101-000000-0badf00d", "/experiments/19980101-000000-0deeeeep",
            f"/steps/{keys['data/words']}", f"/steps/{keys['data/more']}", "/runs",
            "/runs?exp=19990101-000000-0badf00d", "/studies", "/caches", "/traces",
            "/api/experiments/19990101-000000-0badf00d/states")}
    for path, (code, body, _) in answers.items():
        _no_500(code, body, path)
    home = unescape(answers["/"][1])
    assert record["id"] in home and "0badf00d" in home  # every record listed
    assert "'started' is not a time in epoch seconds ('yesterday')" in home
    assert "19980101-000000-0deeeeep.json is unreadable" in home
    page = unescape(answers["/experiments/19990101-000000-0badf00d"][1])
    assert "'git_commit' is not text (12345)" in page and "'notadict'" in page
    assert all(s["key"] in page for s in record["steps"])  # the good steps are there
    assert answers["/experiments/19980101-000000-0deeeeep"][0] == 422
    assert "SUCCESS" in answers[f"/steps/{keys['data/words']}"][1]
    assert "is not a time" in unescape(answers[f"/steps/{keys['data/more']}"][1])
    states = json.loads(answers["/api/experiments/19990101-000000-0badf00d/states"][1])
    assert {k: v[0] for k, v in states["states"].items()} == {
        keys["data/words"]: "SUCCESS", keys["data/more"]: "SUCCESS"}


def test_invocation_fields_are_typed_or_named_as_ignored():
    raw = json.dumps({"experiment": ["x"], "started": 1e308 * 10, "ended": 2.0**70,
                      "pid": "12", "steps": [{"key": 5}, {"key": "a-1234abcd",
                                                          "seconds": "long"}]})
    inv = decode_invocation("x.json", raw.encode())
    assert (inv.experiment, inv.started, inv.ended, inv.pid) == ("?", None, None, None)
    assert [s.key for s in inv.steps] == ["a-1234abcd"] and inv.steps[0].seconds is None
    named = " ".join(inv.problems)
    for field in ("'experiment'", "'started'", "'ended'", "'pid'", "step 0", "'seconds'"):
        assert field in named


@pytest.mark.parametrize("path", [
    "/file?step={words}&path=x%00.txt", "/file?step={words}&path=%0a.txt",
    "/steps/data/wo%00rds-12345678", "/study?step=a%00-12345678",
    "/api/metrics?run=a%00-12345678", "/experiments/%00", "/runs?exp=%00",
    "/file?step={words}&path=%C3%A9t%C3%A9.txt", "/steps/%ff%fe-12345678",
    "/experiments/" + "x" * 5000, "/steps/" + "a" * 300 + "-12345678",
    "/file?step={words}&path=" + "b" * 300 + ".txt"])
def test_odd_bytes_in_urls_get_an_answer_not_a_500(ran, path: str):
    prefix, keys = ran
    with running_dashboard(str(prefix)) as url:
        status, body, _ = get(url + path.format(words=keys["data/words"]))
    _no_500(status, body, path)
    assert status in (400, 404)


def test_a_download_keeps_any_file_name(ran):
    prefix, keys = ran
    (prefix / keys["data/words"] / "données ☃.bin").write_bytes(b"\x00\x01")
    with running_dashboard(str(prefix)) as url:
        status, _, headers = get(f"{url}/file?step={keys['data/words']}"
                                 "&path=donn%C3%A9es%20%E2%98%83.bin")
    assert status == 200
    assert "filename*=UTF-8''donn%C3%A9es%20%E2%98%83.bin" in headers["content-disposition"]


@pytest.mark.parametrize("where", ["query", "cookie", "bearer"])
def test_a_non_ascii_token_is_refused_not_a_500(ran, where: str):
    prefix, _ = ran
    with running_dashboard(str(prefix), token=TOKEN) as url:
        if where == "query":
            status, body, _ = get(url + "/?token=%C3%A9t%C3%A9")
        else:
            header = ({"Cookie": "marin_dashboard_token=\xe9t\xe9"} if where == "cookie"
                      else {"Authorization": "Bearer \xe9t\xe9"})
            status, body, _ = get(url + "/", header)
        assert status == 401 and "needs its token" in body
        assert get(url + "/", {"Authorization": f"Bearer {TOKEN}"})[0] == 200


@pytest.mark.parametrize("path", ["//evil.example/?token=" + TOKEN,
                                  "/\\evil.example/?token=" + TOKEN,
                                  "///evil.example/x?token=" + TOKEN])
def test_the_token_redirect_stays_on_the_site(ran, path: str):
    prefix, _ = ran
    with running_dashboard(str(prefix), token=TOKEN) as url:
        connection = http.client.HTTPConnection(urlsplit(url).netloc, timeout=30)
        connection.request("GET", path)  # sent as is: no client normalises it
        response = connection.getresponse()
        location = response.getheader("location")
        connection.close()
    assert response.status == 303
    assert urlsplit(urljoin(url + "/", location)).netloc == urlsplit(url).netloc, location


def test_step_links_reach_steps_whose_names_hold_url_characters(ran):
    prefix, keys = ran
    odd = "h#q?x&y%20z-1234abcd"
    (prefix / odd).mkdir()
    os.link(prefix / keys["data/words"] / ".executor_status", prefix / odd / ".executor_status")
    with running_dashboard(str(prefix)) as url:
        status, body, _ = get(url + "/experiments/all")
        hrefs = [unescape(h) for h in re.findall(r'href="([^"]*)"', body)]
        [href] = {h for h in hrefs if h.startswith("/steps/h")}
        target, fragment = urldefrag(urljoin(url + "/", href))  # as a browser follows it
        status, page, _ = get(target)
    assert fragment == "" and status == 200
    assert f"<h1>{odd.replace('&', '&amp;')}" in page


def _marin(*args: str, cwd: Path, env: dict[str, str] | None = None
           ) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "marin.cli", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=60, env=env)


@pytest.mark.parametrize("port", ["99999", "-1", "65536", "http", "8e3"])
def test_a_bad_port_is_refused_in_one_line(tmp_path: Path, port: str):
    out = _marin("dashboard", "--prefix", str(tmp_path), f"--port={port}", cwd=tmp_path,
                 env=os.environ.copy())
    assert out.returncode == 2 and f"'{port}' is no TCP port" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_a_bad_port_in_a_config_is_a_serve_error():
    from marin.dashboard import DashboardConfig
    from marin.dashboard.server import ServeError, prepare

    with pytest.raises(ServeError, match="no TCP port"):
        prepare(DashboardConfig(prefix="/tmp/x", port=99999))


@pytest.mark.slow
@pytest.mark.parametrize("from_env", [False, True])
def test_without_prefix_the_executors_default_prefix_is_served(tmp_path: Path,
                                                               from_env: bool):
    env = {k: v for k, v in os.environ.items() if k != "MARIN_PREFIX"}
    if from_env:
        env["MARIN_PREFIX"] = str(tmp_path / "elsewhere")
    proc = subprocess.Popen([sys.executable, "-m", "marin.cli", "dashboard", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=tmp_path, env=env)
    try:
        line = proc.stdout.readline()
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    expected = str(tmp_path / "elsewhere") if from_env else str(tmp_path / "local_store")
    assert f"marin dashboard for {expected} at http://127.0.0.1:" in line, (
        line, proc.stderr.read())


def test_names_that_are_not_utf8_are_shown_escaped_and_their_links_work(ran):
    prefix, keys = ran
    out = os.fsencode(prefix / keys["data/words"])
    Path(os.fsdecode(os.path.join(out, b"bad\xff.txt"))).write_bytes(b"odd name")
    os.mkdir(os.path.join(out, b"sub\xfe"))
    Path(os.fsdecode(os.path.join(out, b"sub\xfe", b"x.txt"))).write_bytes(b"odd folder")
    odd_step = os.path.join(os.fsencode(prefix), b"data", b"wo\xffrds-1234abcd")
    os.mkdir(odd_step)
    os.link(os.path.join(out, b".executor_status"), os.path.join(odd_step, b".executor_status"))
    info = json.loads(Path(os.fsdecode(os.path.join(out, b".executor_info"))).read_text())
    info["key"] = os.fsdecode(b"data/wo\xffrds-1234abcd")  # the key the folder's name says
    Path(os.fsdecode(os.path.join(odd_step, b".executor_info"))).write_text(json.dumps(info))
    with running_dashboard(str(prefix)) as url:
        pages = {p: get(url + p) for p in (f"/steps/{keys['data/words']}", "/storage",
                                            "/experiments/all", "/")}
        for page, (status, body, _) in pages.items():
            _no_500(status, body, page)
            assert status == 200, page
        step_page = pages[f"/steps/{keys['data/words']}"][1]
        assert r"bad\xff.txt" in step_page and r"sub\xfe/x.txt" in step_page
        files = {unescape(h) for h in re.findall(r'href="(/file\?[^"]*)"', step_page)}
        served = {get(url + h)[1] for h in files if "%F" in h}
        assert served == {"odd name", "odd folder"}
        for page in ("/storage", "/experiments/all"):
            assert r"data/wo\xffrds-1234abcd" in pages[page][1], page
            [href] = {unescape(h) for h in re.findall(r'href="(/steps/data/wo[^"]*)"',
                                                      pages[page][1]) if "rds-1234abcd" in h}
            status, body, _ = get(url + href)
            assert status == 200 and r"<h1>data/wo\xffrds-1234abcd" in body, page
