"""The trackers' own process: every record arrives, in order, in a niced process that is
not the training one; a tracker that prints, hangs or fails cannot break the run; a child
that dies is reported once; without a child the trackers run on a thread."""

from __future__ import annotations

import json
import logging
import os
import subprocess
from pathlib import Path

import pytest

from marin import registry
from marin.trackers import TrackerConfig, TrackerRun
from marin.trackers.fanout import Trackers
from marin.trackers.process import NICE, TrackerProcess, start_trackers
from tests.helpers.distributions import make_distribution

# A tracker that writes what it is given, where it runs, and junk on stdout; and one that
# hangs at the end when told to.
PLUGINS = """
import json, os, sys, time

class Recorder:
    def __init__(self, config, run):
        self.path = os.path.join(run.output_path, "recorded.jsonl")
        self.hang = config.name == "hang"
        self._write({"pid": os.getpid(), "nice": os.nice(0)})

    def _write(self, record):
        with open(self.path, "a") as f:
            f.write(json.dumps(record) + "\\n")

    def log(self, step, metrics):
        print("a tracker's chatter on stdout", flush=True)
        self._write({"step": step, **metrics})

    def summary(self, values):
        self._write({"summary": values})

    def finish(self):
        self._write({"finish": True})
        if self.hang:
            time.sleep(600)
"""


@pytest.fixture
def recorder(tmp_path: Path, monkeypatch):
    site = tmp_path / "site"
    make_distribution(site, "acme-recorder", {"marin.trackers": {"recorder": "acme_rec:Recorder"}},
                      {"acme_rec": PLUGINS})
    monkeypatch.syspath_prepend(str(site))  # the child is told the parent's sys.path
    registry.refresh()
    (tmp_path / "run").mkdir()
    yield tmp_path / "run"
    registry.refresh()


def recorded(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "recorded.jsonl").read_text().splitlines()]


def test_every_record_arrives_in_order_in_a_niced_process_of_its_own(recorder):
    run = TrackerRun.of(str(recorder))
    feed = start_trackers([TrackerConfig("recorder")], run)
    assert isinstance(feed, TrackerProcess)
    for step in range(1, 401):
        feed.log(step, {"train/loss": 1.0 / step})
    feed.close({"eval/loss": 0.5})
    records = recorded(recorder)
    where = records[0]
    assert where["pid"] != os.getpid()
    assert where["nice"] == min(19, os.nice(0) + NICE)
    assert [r["step"] for r in records if "step" in r] == list(range(1, 401))
    assert all(r["train/loss"] == 1.0 / r["step"] for r in records if "step" in r)
    assert records[-2:] == [{"summary": {"eval/loss": 0.5}}, {"finish": True}]
    assert feed.failures == []  # the chatter on stdout broke nothing
    entries = json.loads((recorder / "trackers.json").read_text())["trackers"]
    assert [e["type"] for e in entries] == ["recorder"]


def test_a_hanging_tracker_is_ended_and_the_run_goes_on(recorder, caplog):
    feed = start_trackers([TrackerConfig("recorder", name="hang")], TrackerRun.of(str(recorder)))
    feed.log(1, {"train/loss": 2.0})
    with caplog.at_level(logging.WARNING, "marin.trackers"):
        feed.close({}, timeout=3)
    assert feed._child.poll() is not None  # ended, not left behind with the step
    assert any("still busy after 3 s" in r.getMessage() for r in caplog.records)
    assert recorded(recorder)[-1] == {"finish": True}


def test_a_child_that_dies_is_reported_once_and_logging_goes_on(recorder, caplog):
    feed = start_trackers([TrackerConfig("recorder")], TrackerRun.of(str(recorder)))
    feed.log(1, {"train/loss": 2.0})
    feed._child.kill()
    feed._child.wait()
    with caplog.at_level(logging.WARNING, "marin.trackers"):
        for step in range(2, 2000):
            feed.log(step, {"train/loss": 1.0})
        feed.close({})
    ended = [r for r in caplog.records if "their process ended" in r.getMessage()]
    assert len(ended) == 1 and feed.failures == [ended[0].getMessage()]


def test_without_a_child_the_trackers_run_on_a_thread(recorder, monkeypatch, caplog):
    def no_processes(*args, **kwargs):  # a host that allows no new process
        raise OSError("fork refused")

    monkeypatch.setattr(subprocess, "Popen", no_processes)
    with caplog.at_level(logging.WARNING, "marin.trackers"):
        feed = start_trackers(["recorder"], TrackerRun.of(str(recorder)))
    assert isinstance(feed, Trackers)
    assert "fork refused" in caplog.text and "run on a thread" in caplog.text
    feed.log(1, {"train/loss": 2.0})
    feed.close({})
    records = recorded(recorder)
    assert records[0]["pid"] == os.getpid() and records[1] == {"step": 1, "train/loss": 2.0}
