"""The Ray runner on a local Ray cluster on loopback."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import ray  # installed with the marin-ray plugin, which dev.py always installs

from marin.execution import Executor, ExecutorStep, StepResources, output_path_of, this_output_path
from marin.execution.status import StatusRecord, status_path
from tests.conftest import ROOT
from tests.fixtures import ledger_experiment as ledger
from tests.servers import free_port

pytestmark = pytest.mark.slow

#: The Ray workers' import path: this tree and its Ray plugin's source, whatever is installed.
WORKER_PATH = os.pathsep.join([str(ROOT), str(ROOT / "plugins" / "marin-ray")])


@pytest.fixture(scope="module")
def ray_cluster():
    os.environ["RAY_AUTH_MODE"] = "disabled"
    ray.init(address="local", num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1",
             runtime_env={"env_vars": {"PYTHONPATH": WORKER_PATH}})
    yield
    ray.shutdown()


def _ledger_counts(path: Path) -> Counter:
    return Counter(line.split()[0] for line in path.read_text().splitlines())


def _ray_executor(prefix: Path, ledger_file: Path, pack: int = 1, **extra_env: str
                  ) -> Executor:
    env = {"MARIN_TEST_LEDGER": str(ledger_file), "PYTHONPATH": WORKER_PATH, **extra_env}
    return Executor(str(prefix), max_concurrent=2, backend="ray", lease_ttl=10,
                    runner_options={"runtime_env": {"env_vars": env}}, pack=pack)


def test_fan_out_and_a_failing_step_on_ray(ray_cluster, tmp_path: Path):
    ledger_file = tmp_path / "ledger"
    bad = ExecutorStep("ledger/bad", ledger.explode, ledger.LedgerConfig(
        label="bad", output_path=this_output_path(),
        inputs=(output_path_of(ledger.root, "out.txt"),)))
    after_bad = ExecutorStep("ledger/after_bad", ledger.record, ledger.LedgerConfig(
        label="after_bad", output_path=this_output_path(),
        inputs=(output_path_of(bad, "out.txt"),)))
    result = _ray_executor(tmp_path / "prefix", ledger_file).run([ledger.join, after_bad])
    states = {s.name: s.state for s in result.steps}
    assert states["ledger/bad"] == "failed" and states["ledger/after_bad"] == "blocked"
    assert all(states[f"ledger/{n}"] == "succeeded"
               for n in ("root", "left", "right", "far_left", "far_right", "join"))
    counts = _ledger_counts(ledger_file)
    assert counts == Counter(dict.fromkeys(
        ["root", "left", "right", "far_left", "far_right", "join"], 1))
    pids = {int(line.split()[1]) for line in ledger_file.read_text().splitlines()}
    assert os.getpid() not in pids  # the steps ran in Ray workers
    bad_out = result.plan.entry_of(result.plan.graph.node_of(bad)).output_path
    record = StatusRecord.decode(Path(status_path(bad_out)).read_bytes())
    assert "RuntimeError: step bad exploded on purpose" in record.error
    assert "explode" in record.traceback


def test_a_pack_runs_as_one_ray_task_and_each_member_keeps_its_step(ray_cluster,
                                                                    tmp_path: Path):
    ledger_file = tmp_path / "ledger"
    members = [ExecutorStep(f"ledger/packed-{n}", ledger.record_packed, ledger.LedgerConfig(
        label=n, output_path=this_output_path(),
        inputs=(output_path_of(ledger.root, "out.txt"),))) for n in ("left", "right")]
    result = _ray_executor(tmp_path / "prefix", ledger_file, pack=2).run(members)
    assert {s.name: s.state for s in result.steps} == {
        "ledger/root": "succeeded", "ledger/packed-left": "succeeded",
        "ledger/packed-right": "succeeded"}
    rows = {line.split()[0]: line.split()[1:] for line in ledger_file.read_text().splitlines()}
    assert rows["left"][1] == rows["right"][1] == "left,right"  # trained together
    assert rows["left"][0] == rows["right"][0] != str(os.getpid())  # in one Ray task
    for step in result.steps:
        assert StatusRecord.decode(Path(status_path(step.output_path)).read_bytes()).status \
            == "succeeded"


def test_step_resources_become_ray_task_options():
    from marin_ray import ray_options

    assert ray_options(StepResources(cpus=4, gpus=1, memory_gb=2)) == {
        "num_cpus": 4, "num_gpus": 1, "max_retries": 0, "memory": 2 * 2**30}
    assert ray_options(StepResources(tpu="v5e-8"))["resources"] == {"TPU-v5e-8": 1}


def test_a_ray_run_and_a_local_run_on_one_prefix_run_each_step_once(ray_cluster,
                                                                     tmp_path: Path):
    ledger_file = tmp_path / "ledger"
    prefix = tmp_path / "prefix"
    env = {**os.environ, "MARIN_TEST_LEDGER": str(ledger_file), "MARIN_TEST_SLEEP": "0.3"}
    local = subprocess.Popen([sys.executable, "-m", "marin.cli", "executor", "--prefix",
                              str(prefix), "--lease-ttl", "10",
                              "tests.fixtures.ledger_experiment"],
                             cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    result = _ray_executor(prefix, ledger_file, MARIN_TEST_SLEEP="0.3").run(ledger.steps)
    out, err = local.communicate(timeout=180)
    assert local.returncode == 0, out + err
    assert result.ok, result.summary()
    assert _ledger_counts(ledger_file) == Counter(dict.fromkeys(
        ["root", "left", "right", "far_left", "far_right", "join"], 1))


def test_an_unreachable_ray_address_is_a_clear_error(tmp_path: Path):
    port = free_port()
    out = subprocess.run([sys.executable, "-m", "marin.cli", "executor", "--backend", "ray",
                          "--ray-address", f"127.0.0.1:{port}", "--prefix", str(tmp_path),
                          "tests.fixtures.ledger_experiment"], capture_output=True, text=True,
                         cwd=ROOT, timeout=120, env={**os.environ, "MARIN_TEST_LEDGER": "x"})
    assert out.returncode == 2
    assert f"error: cannot reach the Ray cluster at '127.0.0.1:{port}'" in out.stderr
    assert "Traceback" not in out.stderr


def test_local_ray_ignores_a_stale_cluster_file(tmp_path_factory):
    """A crashed Ray session leaves its address file behind; starting a local instance must
    not try to join it."""
    ray_tmp = tmp_path_factory.getbasetemp() / "r"  # short: Ray's socket paths must fit
    (ray_tmp / "ray").mkdir(parents=True)
    (ray_tmp / "ray" / "ray_current_cluster").write_text(f"127.0.0.1:{free_port()}")
    prefix = tmp_path_factory.mktemp("stale-prefix")
    ledger_file = tmp_path_factory.mktemp("stale-ledger") / "ledger"
    script = (
        "from marin.execution import Executor\n"
        "from tests.fixtures import ledger_experiment as ledger\n"
        f"result = Executor({str(prefix)!r}, backend='ray').run([ledger.root])\n"
        "assert result.ok, result.summary()\n")
    pythonpath = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "RAY_TMPDIR": str(ray_tmp), "PYTHONPATH": pythonpath,
           "MARIN_TEST_LEDGER": str(ledger_file)}
    env.pop("RAY_ADDRESS", None)
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert ledger_file.read_text().split()[0] == "root"
