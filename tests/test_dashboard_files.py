"""Files of step outputs as the dashboard serves them: every type under a policy that runs
no script on the dashboard's origin (checked in headless Chromium for a hostile SVG and HTML
page), and no read through a symbolic link out of a step's output or out of the prefix."""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.dashboard_support import browser, get, run_file_steps, running_dashboard

# Each marks the dashboard's origin when its script runs there: a cookie and a storage item
# that the origin's own pages can read back.
HOSTILE_SVG = """<svg xmlns="http://www.w3.org/2000/svg" width="40" height="40">
<rect width="40" height="40" fill="red"/>
<script>document.cookie = "xss=svg; path=/"; localStorage.setItem("xss", "svg");</script>
</svg>"""
HOSTILE_HTML = """<!doctype html><html><body><p>plot</p><script>
document.body.dataset.ran = "1";
try { document.cookie = "xss=html; path=/"; document.body.dataset.cookie = "set"; }
catch (e) { document.body.dataset.cookie = "blocked"; }
try { localStorage.setItem("xss", "html"); document.body.dataset.storage = "set"; }
catch (e) { document.body.dataset.storage = "blocked"; }
fetch("/", {credentials: "include"}).then(r => r.text())
  .then(t => { document.body.dataset.read = t.includes("Experiments") ? "read" : "empty"; })
  .catch(() => { document.body.dataset.read = "blocked"; });
</script></body></html>"""
TOKEN = "t0ken-for-the-test"


@pytest.fixture
def hostile(tmp_path: Path) -> tuple[Path, str]:
    import plotly.graph_objects as go

    plot = go.Figure(go.Scatter(x=[1, 2, 3], y=[3, 1, 2])).to_html(include_plotlyjs="cdn")
    prefix = tmp_path / "prefix"
    keys = run_file_steps(prefix, {"out/hostile": {
        "evil.svg": HOSTILE_SVG, "evil.html": HOSTILE_HTML, "plot.html": plot,
        "notes.txt": "<script>alert(1)</script>", "data.json": '{"a": 1}',
        "blob.bin": "\x00\x01", "picture.png": "not really a png"}})
    return prefix, keys["out/hostile"]


def file_url(base: str, key: str, sub: str) -> str:
    return f"{base}/file?step={quote(key)}&path={quote(sub)}"


def test_every_file_is_served_sandboxed_and_without_sniffing(hostile):
    prefix, key = hostile
    with running_dashboard(str(prefix)) as url:
        answers = {name: get(file_url(url, key, name)) for name in (
            "evil.svg", "evil.html", "notes.txt", "data.json", "blob.bin", "picture.png",
            ".executor_info")}
    for name, (status, _, headers) in answers.items():
        assert status == 200, name
        assert headers["x-content-type-options"] == "nosniff", name
        policy = [p.strip() for p in headers["content-security-policy"].split(";")]
        assert any(p.split()[0] == "sandbox" for p in policy), name
        if name != "evil.html":  # no script of any kind, inline or loaded
            assert "sandbox" in policy and "default-src 'none'" in policy, name
            assert not any(p.startswith("script-src") for p in policy), name
    plot_policy = answers["evil.html"][2]["content-security-policy"]
    assert "allow-same-origin" not in plot_policy  # plot scripts run in an opaque origin
    for name in ("evil.svg", "blob.bin"):
        assert answers[name][2]["content-disposition"].startswith("attachment"), name
    assert answers["notes.txt"][2]["content-type"].startswith("text/plain")


def _origin_marks(page, url: str) -> dict[str, object]:
    page.goto(url + "/healthz")
    return {"cookie": "xss=" in page.evaluate("document.cookie"),
            "storage": page.evaluate("localStorage.getItem('xss')")}


@pytest.mark.slow
def test_scripts_in_outputs_never_run_on_the_dashboards_origin(hostile):
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    prefix, key = hostile
    with running_dashboard(str(prefix), token=TOKEN) as url, browser() as chromium:
        context = chromium.new_context(accept_downloads=True)
        page = context.new_page()
        page.goto(f"{url}/?token={TOKEN}")  # the cookie that guards the dashboard's pages
        page.goto(f"{url}/steps/{key}")
        # Opening the SVG from the step page downloads it instead of rendering it here.
        try:
            with page.expect_download(timeout=10_000) as download:
                page.click("#files a:text('evil.svg')")
            downloaded = download.value.suggested_filename
        except PlaywrightTimeout:
            downloaded = None  # it rendered: its script had its chance on this origin
        assert _origin_marks(page, url) == {"cookie": False, "storage": None}
        assert downloaded == "evil.svg"
        # The step page shows it as an image, which runs no script.
        page.goto(f"{url}/steps/{key}")
        selector = "#images img[alt='evil.svg']"
        page.wait_for_function(f"document.querySelector(\"{selector}\")?.complete")
        assert page.evaluate(f"document.querySelector(\"{selector}\").naturalWidth") == 40
        assert _origin_marks(page, url) == {"cookie": False, "storage": None}

        # A plot page's scripts run, but in a sandbox: no cookie, no storage, no reading of
        # the dashboard's pages.
        page.goto(file_url(url, key, "evil.html"))
        page.wait_for_function("document.body.dataset.read !== undefined")
        marks = page.evaluate("({...document.body.dataset})")
        assert marks == {"ran": "1", "cookie": "blocked", "storage": "blocked",
                         "read": "blocked"}
        assert _origin_marks(page, url) == {"cookie": False, "storage": None}

        # A plotly page saved for a CDN still draws, with the bundled plotly.js.
        page.goto(file_url(url, key, "plot.html"))
        page.locator(".plotly-graph-div .main-svg").first.wait_for(timeout=20_000)
        context.close()


@pytest.fixture
def linked(tmp_path: Path) -> dict[str, object]:
    """A prefix whose step outputs hold links out of them, and a step folder that is a link
    out of the prefix."""
    outside = tmp_path / "outside"
    (outside / "folder").mkdir(parents=True)
    (outside / "secret.txt").write_text("TOP-SECRET-FILE")
    (outside / "folder" / "inner.txt").write_text("TOP-SECRET-FOLDER")
    (outside / "info.json").write_text('{"version": {}, "config": {"leak": "TOP-SECRET-INFO"}}')
    prefix = tmp_path / "prefix"
    keys = run_file_steps(prefix, {"data/words": {"words.txt": "a b c"},
                                   "data/other": {"other.txt": "OTHER-STEP"}})
    step = prefix / keys["data/words"]
    (step / "passwd.txt").symlink_to(outside / "secret.txt")
    (step / "leak.log").symlink_to(outside / "secret.txt")
    (step / "sub").symlink_to(outside / "folder", target_is_directory=True)
    (step / "neighbour.txt").symlink_to(prefix / keys["data/other"] / "other.txt")
    (step / "alias.txt").symlink_to(step / "words.txt")  # stays inside: served
    other = prefix / keys["data/other"]
    os.remove(other / ".executor_info")
    (other / ".executor_info").symlink_to(outside / "info.json")
    # A step folder that is a link out of the prefix, with a status of its own.
    (outside / "step").mkdir()
    (outside / "step" / ".executor_status").write_text(
        (step / ".executor_status").read_text())
    (outside / "step" / "secret.txt").write_text("TOP-SECRET-STEP")
    (prefix / "evil").mkdir()
    (prefix / "evil" / "away-1234abcd").symlink_to(outside / "step",
                                                    target_is_directory=True)
    return {"prefix": prefix, "words": keys["data/words"], "other": keys["data/other"]}


def test_links_out_of_a_step_or_out_of_the_prefix_are_not_followed(linked):
    words, other = linked["words"], linked["other"]
    with running_dashboard(str(linked["prefix"])) as url:
        for sub in ("passwd.txt", "leak.log", "sub/inner.txt", "neighbour.txt"):
            status, body, _ = get(file_url(url, words, sub))
            assert status == 404 and "links outside" in body, sub
            assert "TOP-SECRET" not in body and "OTHER-STEP" not in body, sub
        assert get(file_url(url, words, "alias.txt"))[:2] == (200, "a b c")
        status, body, _ = get(file_url(url, "evil/away-1234abcd", "secret.txt"))
        assert status == 404 and "TOP-SECRET" not in body
        pages = [get(f"{url}{path}") for path in (
            f"/steps/{words}", f"/steps/{other}", "/steps/evil/away-1234abcd",
            "/experiments/all", "/", "/runs", "/studies")]
    for status, body, _ in pages:
        assert status in (200, 404) and "Traceback" not in body
        assert not re.search("TOP-SECRET|OTHER-STEP", body)
    assert "evil/away-1234abcd" not in pages[3][1]  # not discovered as a step
    assert "links outside" in pages[1][1]  # the info that is a link is named, not read
