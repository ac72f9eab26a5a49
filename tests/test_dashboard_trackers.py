"""A run's trackers on the dashboard: the W&B run's page when its entity and project are
known, an offline run's folder with a shell-quoted ``wandb sync``, the config's trackers
before the run wrote ``trackers.json``; and hostile records shown as text, never as markup
or as a link elsewhere."""

from __future__ import annotations

import html
import json
from pathlib import Path

import pytest

from marin.dashboard.trackers import tracker_views, wandb_url
from tests.dashboard_support import get, run_file_steps, running_dashboard

RUN = "/data/my runs/train/tiny-1a2b3c4d"


def record(*trackers: dict) -> dict:
    return {"format": "marin.trackers", "version": 1, "trackers": list(trackers)}


def wandb(**details) -> dict:
    return {"type": "wandb", "details": {"project": "iso", "entity": "team", "id": "train-tiny",
                                         "mode": "online", **details}, "failed": None}


def test_an_online_run_links_its_wandb_page():
    [view] = tracker_views(record(wandb()), None, RUN)
    assert view.link == "https://wandb.ai/team/iso/runs/train-tiny"
    assert view.folder is None and view.sync is None and view.source == "recorded"
    [spaced] = tracker_views(record(wandb(entity="my team", project="a&b")), None, RUN)
    assert spaced.link == "https://wandb.ai/my%20team/a%26b/runs/train-tiny"


def test_an_offline_run_shows_its_folder_and_the_sync_command():
    [view] = tracker_views(record(wandb(mode="offline", entity=None,
                                        run_folder="wandb/offline-run-20260101_1-train-tiny")),
                           None, RUN)
    folder = f"{RUN}/wandb/offline-run-20260101_1-train-tiny"
    assert view.folder == folder and view.link is None
    assert view.sync == f"wandb sync '{folder}'"  # quoted: the path holds a space
    [known] = tracker_views(record(wandb(mode="offline", run_folder="wandb/r")), None, RUN)
    assert known.link == "https://wandb.ai/team/iso/runs/train-tiny"  # once uploaded


def test_other_trackers_and_failures_are_listed():
    views = tracker_views(record({"type": "json", "details": {"file": "tracker.jsonl"}},
                                 {"type": "broken", "details": {}, "failed": "it raised"}),
                          None, RUN)
    assert [(v.type, v.folder, v.note) for v in views] == [
        ("json", f"{RUN}/tracker.jsonl", None), ("broken", None, "it raised")]


def test_before_a_record_the_configs_trackers_are_shown_with_the_keys_run_id():
    config = {"train": {"trackers": [{"type": "json"},
                                     {"type": "wandb", "project": "iso", "entity": "team"}]}}
    views = tracker_views(None, config, RUN)
    assert [(v.type, v.source) for v in views] == [("json", "configured"),
                                                   ("wandb", "configured")]
    # the id W&B is given: the step's key, "/" as "-"
    assert views[1].link == "https://wandb.ai/team/iso/runs/train-tiny-1a2b3c4d"
    assert tracker_views(None, {"trackers": []}, RUN) == []
    assert tracker_views({"format": "other"}, None, RUN) == []


@pytest.mark.parametrize("details", [
    {"entity": "evil.example/x"}, {"entity": "a\nb"}, {"project": ""}, {"id": "../../logout"},
    {"id": "a b"}, {"id": 'x"onmouseover="alert(1)'}, {"entity": 5},
])
def test_a_link_is_made_only_of_valid_names(details):
    [view] = tracker_views(record(wandb(**details)), None, RUN)
    assert view.link is None
    assert wandb_url(*(details.get(k, d) for k, d in (
        ("entity", "team"), ("project", "iso"), ("id", "train-tiny")))) is None


@pytest.mark.parametrize("folder", ["../../etc", "/etc/passwd", "wandb/run; rm -rf ~",
                                    "wandb/$(reboot)", "wandb/../../x", ".hidden", ""])
def test_an_offline_folder_must_be_plain_parts_under_the_run(folder):
    [view] = tracker_views(record(wandb(mode="offline", run_folder=folder)), None, RUN)
    assert view.folder is None and view.sync is None


HOSTILE = "<img src=x onerror=alert(1)>"


def test_the_step_and_runs_pages_show_trackers_escaped(tmp_path: Path):
    prefix = tmp_path / "prefix"
    records = {
        "train/online": record(wandb(), {"type": "json", "details": {"file": "tracker.jsonl"}}),
        "train/offline": record(wandb(mode="offline", run_folder="wandb/offline-run-1-x")),
        "train/hostile": record(
            {"type": HOSTILE, "details": {}, "failed": f"<script>alert(2)</script>{HOSTILE}"},
            wandb(entity='x"><script>alert(3)</script>', run_folder="wandb/a b")),
    }
    keys = run_file_steps(prefix, {name: {"trackers.json": json.dumps(data),
                                          "metrics.jsonl": '{"step": 1, "train/loss": 3.0}\n'}
                                   for name, data in records.items()})
    with running_dashboard(str(prefix)) as url:
        pages = {name: get(f"{url}/steps/{key}")[1] for name, key in keys.items()}
        runs = get(f"{url}/runs")[1]
    assert 'href="https://wandb.ai/team/iso/runs/train-tiny"' in pages["train/online"]
    assert "tracker.jsonl" in pages["train/online"]
    offline = str(prefix / keys["train/offline"] / "wandb" / "offline-run-1-x")
    assert html.escape(f"wandb sync {offline}") in pages["train/offline"]
    hostile = pages["train/hostile"]
    for raw in ("<script>alert(2)", "<script>alert(3)", HOSTILE):
        assert raw not in hostile and raw not in runs
    assert html.escape(HOSTILE, quote=False) in hostile  # shown, as text
    assert "wandb.ai" not in hostile.split('id="trackers"')[1]  # no link from bad names
    # the online run and the offline one (whose entity is known): not the hostile one
    assert runs.count('class="wandb-link" href="https://wandb.ai/team/iso/runs/train-tiny"') == 2
