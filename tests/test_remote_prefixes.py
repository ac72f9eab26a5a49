"""The executor on gs:// and s3:// prefixes, against real servers on loopback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from marin.execution import Executor, StepStatus
from marin.execution.status import StatusRecord, status_path
from marin.storage import get_storage
from tests.conftest import ROOT
from tests.fixtures import ledger_experiment

pytestmark = pytest.mark.slow


@pytest.fixture(params=["gs", "s3"])
def bucket(request) -> str:
    return request.getfixturevalue("gcs_bucket" if request.param == "gs" else "s3_bucket")


def test_a_graph_runs_then_skips_on_a_remote_prefix(bucket: str, tmp_path: Path, monkeypatch):
    monkeypatch.setenv("MARIN_TEST_LEDGER", str(tmp_path / "ledger"))
    prefix = f"{bucket}/experiments"
    ex = Executor(prefix, max_concurrent=2)
    result = ex.run(ledger_experiment.steps)
    assert result.ok, result.summary()
    storage = get_storage(prefix)
    for entry in result.plan.entries:
        assert entry.output_path.startswith(prefix + "/ledger/")
        record = StatusRecord.decode(storage.read(status_path(entry.output_path)).data)
        assert record.status is StepStatus.SUCCESS
        label = entry.name.split("/")[1]
        assert storage.read(entry.output_path + "/out.txt").data == label.encode()
    assert ex.plan(ledger_experiment.steps).totals()["skip"] == 6
    # Same graph, other bucket path: same hashes.
    assert [e.node.hash for e in Executor(f"{bucket}/elsewhere").plan(
        ledger_experiment.steps).entries] == [e.node.hash for e in result.plan.entries]


def test_two_executors_race_on_a_remote_prefix_and_each_step_runs_once(
        bucket: str, tmp_path: Path):
    ledger = tmp_path / "ledger"
    env = {**os.environ, "MARIN_TEST_LEDGER": str(ledger), "MARIN_TEST_SLEEP": "0.3"}
    command = [sys.executable, "-m", "marin.cli", "executor", "--prefix", f"{bucket}/race",
               "--lease-ttl", "10", "tests.fixtures.ledger_experiment"]
    procs = [subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    for proc in procs:
        out, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, out + err
    counts = Counter(line.split()[0] for line in ledger.read_text().splitlines())
    assert counts == Counter(dict.fromkeys(
        ["root", "left", "right", "far_left", "far_right", "join"], 1))


def test_dry_run_json_on_a_remote_prefix_writes_nothing(bucket: str):
    storage = get_storage(bucket)
    before = storage.list_dir(bucket)
    out = subprocess.run([sys.executable, "-m", "marin.cli", "executor", "--dry-run", "--json",
                          "--prefix", f"{bucket}/dry", "tests.fixtures.ledger_experiment"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["totals"]["run"] == 6
    assert storage.list_dir(bucket) == before


def test_a_graph_runs_twice_on_a_server_that_sends_no_generation_header(
        tmp_path: Path, monkeypatch):
    from marin.storage import reset_storage_instances
    from tests import servers

    monkeypatch.setenv("MARIN_TEST_LEDGER", str(tmp_path / "ledger"))
    with servers.multi_region_gcs_emulator() as endpoint:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", endpoint)
        reset_storage_instances()
        try:
            prefix = f"gs://{servers.create_gcs_bucket(endpoint)}/twice"
            ex = Executor(prefix, max_concurrent=2)
            first = ex.run(ledger_experiment.steps)
            assert first.ok, first.summary()
            again = ex.run(ledger_experiment.steps)  # reads every status: needs generations
            assert again.ok and again.by_state() == {"skipped": 6}, again.summary()
            out = first.plan.entries[0].output_path
            assert get_storage(prefix).read(f"{out}/out.txt").data == b"root"
        finally:
            reset_storage_instances()


@dataclass(frozen=True)
class _PlainConfig:
    output_path: str


def _write_with_open(config: _PlainConfig) -> None:
    os.makedirs(config.output_path, exist_ok=True)  # the mistake: open() knows no URLs
    with open(os.path.join(config.output_path, "data.txt"), "w") as f:
        f.write("lost")


def _write_with_storage_files(config: _PlainConfig) -> None:
    from marin.storage.files import join_url, open_url

    with open_url(join_url(config.output_path, "data.txt"), "w") as f:
        f.write("kept")


def test_a_step_that_writes_to_a_local_folder_named_like_the_url_fails(
        gcs_bucket: str, tmp_path: Path, monkeypatch):
    from marin.execution import ExecutorStep, this_output_path

    monkeypatch.chdir(tmp_path)
    wrong = ExecutorStep("io/open", _write_with_open, _PlainConfig(this_output_path()))
    right = ExecutorStep("io/files", _write_with_storage_files,
                         _PlainConfig(this_output_path()))
    result = Executor(f"{gcs_bucket}/x").run([wrong, right])
    states = {s.name: s for s in result.steps}
    assert states["io/open"].state == "failed"
    assert "local folder" in states["io/open"].error and "open_url" in states["io/open"].error
    assert (tmp_path / "gs:").is_dir()  # where open() put the file
    assert states["io/files"].state == "succeeded"
    out = next(e.output_path for e in result.plan.entries if e.name == "io/files")
    assert get_storage(out).read(out + "/data.txt").data == b"kept"
    record = StatusRecord.decode(get_storage(out).read(status_path(
        next(e.output_path for e in result.plan.entries if e.name == "io/open"))).data)
    assert record.status is StepStatus.FAILED
