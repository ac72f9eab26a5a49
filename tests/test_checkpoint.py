"""Checkpoints: asynchronous sharded saves that count only once complete, keep policies,
restores onto another sharding, and local, gs:// (fake-gcs-server) and s3:// (moto) roots."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from marin.training.checkpoint import (
    COMPLETE,
    CheckpointError,
    Checkpoints,
    complete_checkpoints,
)
from tests.conftest import ROOT


def state(seed: float) -> dict:
    return {"w": jnp.arange(12.0).reshape(3, 4) * seed, "count": jnp.array(7, jnp.int32),
            "nested": (jnp.ones(5, jnp.bfloat16) * seed, None)}


def assert_same(a, b) -> None:
    assert jax.tree.structure(a) == jax.tree.structure(b)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_an_async_save_restores_the_state_and_meta_exactly(tmp_path: Path):
    checkpoints = Checkpoints(str(tmp_path / "ckpt"))
    assert checkpoints.latest_step() is None
    checkpoints.save(5, state(2.0), {"data_step": 5, "rng": [1, 2]})
    checkpoints.close()
    again = Checkpoints(str(tmp_path / "ckpt"))
    assert again.latest_step() == 5
    restored, meta = again.restore(5, like=state(0.0))
    assert_same(restored, state(2.0))
    assert meta == {"data_step": 5, "rng": [1, 2], "step": 5}
    assert complete_checkpoints(str(tmp_path / "ckpt")) == [(5, str(tmp_path / "ckpt" /
                                                                     "step_00000005"))]


def test_keep_last_n_and_keep_every_k(tmp_path: Path):
    checkpoints = Checkpoints(str(tmp_path), keep_last=2, keep_every=4)
    for step in range(1, 11):
        checkpoints.save(step, state(step), {"data_step": step})
    checkpoints.close()
    assert [s for s, _ in complete_checkpoints(str(tmp_path))] == [4, 8, 9, 10]
    restored, _ = Checkpoints(str(tmp_path)).restore(4, like=state(0.0))
    assert_same(restored, state(4))


def test_keep_at_keeps_those_steps_besides_the_newest(tmp_path: Path):
    checkpoints = Checkpoints(str(tmp_path), keep_last=1, keep_at=(3, 7))
    for step in range(1, 10):
        checkpoints.save(step, state(step), {"data_step": step})
    checkpoints.close()
    assert [s for s, _ in complete_checkpoints(str(tmp_path))] == [3, 7, 9]


def test_a_restore_into_another_model_shape_names_the_checkpoint(tmp_path: Path):
    checkpoints = Checkpoints(str(tmp_path))
    checkpoints.save(1, state(1.0), {"data_step": 1})
    checkpoints.close()
    wrong = {**state(0.0), "w": jnp.zeros((5, 5))}
    with pytest.raises(CheckpointError, match=r"step_00000001: state\['w'\] has shape "
                       r"\(5, 5\) here and \(3, 4\) in the checkpoint"):
        Checkpoints(str(tmp_path)).restore(1, like=wrong)
    with pytest.raises(CheckpointError, match="it holds 3 arrays and the state to restore "
                       "has 2"):
        Checkpoints(str(tmp_path)).restore(1, like={"w": state(0.0)["w"], "count": None,
                                                    "extra": jnp.zeros(2)})


def test_a_refused_restore_leaves_no_read_behind(tmp_path: Path, monkeypatch):
    """A refused restore starts no array read: none is left suspended for the garbage
    collector to close, which orbax would report as an unraisable exception (a traceback
    and a TensorStore spec in the test run's warnings)."""
    checkpoints = Checkpoints(str(tmp_path))
    checkpoints.save(1, state(1.0), {"data_step": 1})
    checkpoints.close()
    unraisable: list = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    wrong = {**state(0.0), "w": jnp.zeros((5, 5))}
    for _ in range(8):  # an abandoned read is closed at the collector's whim: try often
        with pytest.raises(CheckpointError):
            Checkpoints(str(tmp_path)).restore(1, like=wrong)
        gc.collect()
    assert [str(u.exc_value)[:120] for u in unraisable] == []


def test_an_unsupported_url_is_refused_naming_it():
    with pytest.raises(CheckpointError, match=r"checkpoints cannot go to memory://x/ckpt: use "
                       "a local path, gs:// or s3://"):
        Checkpoints("memory://x/ckpt")


KILLED_DURING_SAVE = """
import os, signal, sys
sys.path.insert(0, {root!r})
import jax.numpy as jnp
from marin.training.checkpoint import Checkpoints
checkpoints = Checkpoints({path!r})
checkpoints.save(1, {{"w": jnp.ones(1000)}}, {{"data_step": 1}})
checkpoints.wait()
big = {{"w": jnp.ones((64, 1024, 1024), jnp.float32)}}  # 256 MB: far from written at return
checkpoints.save(2, big, {{"data_step": 2}})
# the writes go on in the background: kill once the save's temporary folder exists
import time
deadline = time.monotonic() + 60
while not any(n.startswith("step_00000002") for n in os.listdir({path!r})):
    if time.monotonic() > deadline:
        sys.exit("the save of step 2 made no folder in 60 s")
    time.sleep(0.001)
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.slow
def test_a_save_cut_short_by_sigkill_never_counts(tmp_path: Path):
    root = tmp_path / "ckpt"
    script = KILLED_DURING_SAVE.format(root=str(ROOT), path=str(root))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=300)
    assert out.returncode == -9, out.stderr.decode()[-2000:]
    leftovers = [p.name for p in root.iterdir() if p.name.startswith("step_00000002")]
    assert leftovers and all("tmp" in name for name in leftovers), sorted(os.listdir(root))
    checkpoints = Checkpoints(str(root))
    assert checkpoints.steps() == [1]
    restored, meta = checkpoints.restore(1, like={"w": jnp.zeros(1000)})
    assert float(restored["w"].sum()) == 1000 and meta["data_step"] == 1
    checkpoints.save(2, {"w": jnp.ones(1000) * 2}, {"data_step": 2})
    checkpoints.close()
    assert sorted(os.listdir(root)) == ["step_00000001", "step_00000002"]  # leftovers cleaned


SHARDED = """
import json, sys
sys.path.insert(0, {root!r})
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from marin.training.checkpoint import Checkpoints
mesh = Mesh(np.array(jax.devices()), ("data",))
split = NamedSharding(mesh, P("data", None))
w = jax.device_put(jnp.arange(64.0 * 8).reshape(64, 8), split)
checkpoints = Checkpoints({path!r})
checkpoints.save(3, {{"w": w}}, {{"data_step": 3}})
checkpoints.close()
two = Mesh(np.array(jax.devices()[:2]), ("data",))
like = {{"w": jax.device_put(jnp.zeros((64, 8)), NamedSharding(two, P(None, "data")))}}
restored, _ = Checkpoints({path!r}).restore(3, like=like)
r = restored["w"]
print(json.dumps({{"devices": jax.device_count(), "equal": bool((r == jnp.arange(64.0 * 8)
                   .reshape(64, 8)).all()), "restored_shards": len(r.sharding.device_set),
                   "shard_shape": list(r.addressable_shards[0].data.shape)}}))
"""


@pytest.mark.slow
def test_a_state_sharded_over_four_devices_restores_onto_another_sharding(tmp_path: Path):
    env = {**os.environ, "JAX_PLATFORMS": "cpu",
           "XLA_FLAGS": "--xla_force_host_platform_device_count=4"}
    script = SHARDED.format(root=str(ROOT), path=str(tmp_path / "ckpt"))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result == {"devices": 4, "equal": True, "restored_shards": 2,
                      "shard_shape": [64, 4]}


@pytest.fixture
def gcs_checkpoint_env(gcs_bucket: str, gcs_endpoint: str, monkeypatch) -> str:
    # tensorstore's own GCS driver: the emulator's URL, and a fixed token instead of
    # credentials (the emulator checks none).
    monkeypatch.setenv("TENSORSTORE_GCS_HTTP_URL", gcs_endpoint)
    monkeypatch.setenv("GOOGLE_AUTH_TOKEN_FOR_TESTING", "emulator")
    monkeypatch.setenv("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
    return gcs_bucket


@pytest.mark.slow
@pytest.mark.parametrize("store", ["gs", "s3"])
def test_remote_roots_save_prune_and_restore(store: str, request, tmp_path: Path):
    bucket = request.getfixturevalue("gcs_checkpoint_env" if store == "gs" else "s3_bucket")
    root = f"{bucket}/run/checkpoints"
    checkpoints = Checkpoints(root, keep_last=1, keep_every=2)
    for step in (1, 2, 3):
        checkpoints.save(step, state(step), {"data_step": step})
    checkpoints.close()
    found = complete_checkpoints(root)
    assert [s for s, _ in found] == [2, 3]
    assert found[-1][1] == f"{root}/step_00000003"
    restored, meta = Checkpoints(root).restore(3, like=state(0.0))
    assert_same(restored, state(3))
    assert meta["data_step"] == 3
    if store == "s3":  # a step without its marker (an upload cut short) does not count
        import fsspec

        fs, path = fsspec.core.url_to_fs(root)
        fs.rm(f"{path}/step_00000003/{COMPLETE}")
        assert [s for s, _ in complete_checkpoints(root)] == [2]
