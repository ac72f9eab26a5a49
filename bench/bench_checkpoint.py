"""Checkpoint benchmarks: what checkpoints cost a training run, and their throughput.

    python bench/bench_checkpoint.py [--steps 41] [--every 10] [--placement both]
                                     [--hidden 512 --layers 6]

* Step-time overhead. The same run (a GPT-2-vocabulary transformer of over 50M parameters
  on a token cache of Shakespeare's plays) five times in one process: without checkpoints
  (first and last, since the load of a shared machine drifts),
  with the synchronous save marin had before (equinox's serialisation of the whole state
  into one buffer, written with fsspec), with orbax saving synchronously, and with orbax
  saving asynchronously, a checkpoint every ``--every`` steps (at 10, the synchronous saves
  cost about a fifth of the step time in the split placement below and a third with shared
  cores). The figure is the wall time
  from the end of the first step (compilation) to the end of the last, against the run
  without checkpoints (goal: async within 5%).
  ``--placement`` says where the work runs. ``shared``: every thread on every core, so a
  background save takes its CPU from training's. ``split``: a model of an accelerator host,
  where training computes on a device while the host's cores write: the threads that exist
  once JAX is initialised (XLA's compute threads and the main thread) are kept on one core,
  the "device", and every thread started later (orbax's and tensorstore's writers, the data
  prefetcher) on another, the "host" (it needs 2 CPUs). ``both`` (default) runs the five runs
  once per placement.
* Save and restore throughput (MB/s of parameters plus optimizer state) to a local folder
  and to a GCS emulator (fake-gcs-server on loopback, through tensorstore's GCS driver), and
  the previous synchronous save to the same local folder.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import equinox as eqx  # noqa: E402
import fsspec  # noqa: E402
import jax  # noqa: E402

import marin.training.trainer as trainer  # noqa: E402
from bench.bench_tokenize import write_corpus  # noqa: E402
from marin.models import TransformerConfig  # noqa: E402
from marin.processing.tokenize import TokenizeConfig, tokenize  # noqa: E402
from marin.training import TrainLmConfig, train_lm  # noqa: E402
from marin.training.checkpoint import Checkpoints  # noqa: E402
from marin.training.hyperparameters import OptimizerHyperparameters  # noqa: E402
from tests import servers  # noqa: E402


class EquinoxCheckpoints:
    """marin's checkpoint before orbax: the whole state serialised into one in-memory
    buffer, then written synchronously (same interface as ``Checkpoints``)."""

    def __init__(self, root: str, **_):
        self.root = root.rstrip("/")

    def latest_step(self):
        return None

    def save(self, step: int, state, meta) -> None:
        fs, path = fsspec.core.url_to_fs(f"{self.root}/step-{step:08d}")
        fs.makedirs(path, exist_ok=True)
        buffer = io.BytesIO()
        eqx.tree_serialise_leaves(buffer, state)
        with fs.open(f"{path}/state.eqx", "wb") as f:
            f.write(buffer.getvalue())
        with fs.open(f"{path}/meta.json", "w") as f:
            json.dump({**meta, "step": step}, f)
        fs.pipe(f"{path}/COMPLETE", b"ok")

    def wait(self) -> None:
        pass

    close = wait


PAUSES: list[float] = []  # seconds each save kept the training loop waiting


def timed(cls):
    class Timed(cls):
        def save(self, step, state, meta):
            t0 = time.perf_counter()
            super().save(step, state, meta)
            PAUSES.append(time.perf_counter() - t0)

    return Timed


class SplitCores:
    """Pins the threads alive now to the first CPU this process may use and every thread
    started later to the second, checking every 20 ms (Linux: ``sched_setaffinity`` on a
    thread id moves that thread); on exit every thread gets the CPUs it had."""

    def __init__(self):
        self.allowed = sorted(os.sched_getaffinity(0))
        if len(self.allowed) < 2:
            raise SystemExit(f"--placement split needs 2 CPUs, this process may use "
                             f"{len(self.allowed)}; use --placement shared")
        self.device_cpu, self.host_cpu = self.allowed[:2]
        self.device = set(self._threads())
        self._pinned: set[int] = set()
        self._stop = threading.Event()
        self._watcher = threading.Thread(target=self._watch, name="pin-host-threads",
                                         daemon=True)

    @staticmethod
    def _threads() -> list[int]:
        return [int(t) for t in os.listdir("/proc/self/task")]

    def _pin(self, tid: int, cpus) -> None:
        try:
            os.sched_setaffinity(tid, cpus)
        except ProcessLookupError:  # the thread ended meanwhile
            pass
        self._pinned.add(tid)

    def _watch(self) -> None:
        self._pin(threading.get_native_id(), {self.host_cpu})
        while not self._stop.wait(0.02):
            for tid in self._threads():
                if tid not in self._pinned:
                    self._pin(tid, {self.device_cpu if tid in self.device else self.host_cpu})

    def __enter__(self):
        for tid in self.device:
            self._pin(tid, {self.device_cpu})
        self._watcher.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._watcher.join()
        for tid in self._threads():
            self._pin(tid, self.allowed)


def run(config: TrainLmConfig, checkpoints_class=Checkpoints) -> float:
    """Seconds from the end of step 1 to the end of the last step."""
    PAUSES.clear()
    trainer.Checkpoints = timed(checkpoints_class)
    try:
        train_lm(config)
    finally:
        trainer.Checkpoints = Checkpoints
    lines = Path(config.output_path, "metrics.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    times = [r["wall_time"] for r in records if "loss" in r]
    return times[-1] - times[0]


def state_megabytes(state) -> float:
    return sum(x.nbytes for x in jax.tree.leaves(eqx.filter(state, eqx.is_array))) / 1e6


def throughput(root: str, state, megabytes: float) -> tuple[float, float, float]:
    """Save and restore MB/s, and the seconds ``save`` blocks before training may go on."""
    checkpoints = Checkpoints(root)
    t0 = time.perf_counter()
    checkpoints.save(1, state, {"data_step": 1})
    blocked = time.perf_counter() - t0
    checkpoints.wait()
    save = time.perf_counter() - t0
    checkpoints.close()
    t0 = time.perf_counter()
    restored, _ = Checkpoints(root).restore(1, like=state)
    jax.block_until_ready(restored)
    load = time.perf_counter() - t0
    return megabytes / save, megabytes / load, blocked


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=41)
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--placement", choices=("shared", "split", "both"), default="both")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_corpus(root / "corpus", 1)
        tokenize(TokenizeConfig(train_paths=(str(root / "corpus" / "*.jsonl"),),
                                cache_path=str(root / "cache"), num_processes=1))
        model = TransformerConfig(hidden_dim=args.hidden, intermediate_dim=3 * args.hidden,
                                  num_layers=args.layers, num_heads=8, num_kv_heads=4,
                                  vocab_size=50257, seq_len=args.seq)
        config = TrainLmConfig(
            cache_path=str(root / "cache"), model=model, batch_size=args.batch,
            train_steps=args.steps, tokenizer="gpt2", log_every=10**6,
            optimizer=OptimizerHyperparameters(learning_rate=3e-3, adam_learning_rate=3e-3,
                                               epsilon=1e-8, beta1=0.9, beta2=0.95,
                                               optimizer="adamw", warmup_fraction=0.1),
            output_path="", checkpoint_every=args.every, checkpoint_keep=2)
        print(f"model: {model.num_params() / 1e6:.1f}M parameters; batch {args.batch} x "
              f"{args.seq} tokens; {args.steps} steps, a checkpoint every {args.every}",
              flush=True)

        placements = ("split", "shared") if args.placement == "both" else (args.placement,)
        if "split" in placements:
            # XLA's threads exist from here on; no thread of orbax or tensorstore does yet
            jax.numpy.zeros(1).block_until_ready()
        for placement in placements:
            if placement == "split":
                with SplitCores():
                    overhead(config, root / placement, args)
            else:
                overhead(config, root / placement, args)

        checkpoints = Checkpoints(str(root / placements[-1] / "run2" / "checkpoints"))
        like = trainer_state(config)
        state, _ = checkpoints.restore(checkpoints.latest_step(), like=like)
        megabytes = state_megabytes(state)
        print(f"state (parameters + AdamW moments): {megabytes:.0f} MB")
        save, load, blocked = throughput(str(root / "local"), state, megabytes)
        print(f"  local folder: save {save:.0f} MB/s, restore {load:.0f} MB/s; the "
              f"asynchronous save blocks training for {blocked:.2f} s")
        t0 = time.perf_counter()
        EquinoxCheckpoints(str(root / "legacy-local")).save(1, state, {})
        print(f"  local folder, previous synchronous save: "
              f"{megabytes / (time.perf_counter() - t0):.0f} MB/s")
        with servers.gcs_emulator() as endpoint:
            os.environ.update(TENSORSTORE_GCS_HTTP_URL=endpoint, STORAGE_EMULATOR_HOST=endpoint,
                              GOOGLE_AUTH_TOKEN_FOR_TESTING="emulator",
                              GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT="false")
            bucket = servers.create_gcs_bucket(endpoint)
            save, load, blocked = throughput(f"gs://{bucket}/checkpoints", state, megabytes)
            print(f"  GCS emulator (fake-gcs-server, loopback): save {save:.0f} MB/s, "
                  f"restore {load:.0f} MB/s; blocks training for {blocked:.2f} s")


def overhead(config: TrainLmConfig, folder: Path, args) -> None:
    """Prints each way of checkpointing's step-time overhead against no checkpoints."""

    def variant(name: str, **changes) -> TrainLmConfig:
        return dataclasses.replace(config, output_path=str(folder / name), **changes)

    first_none = run(variant("none", checkpoint_every=0))
    results = {}
    for name, changes, cls in (
            ("previous synchronous save (equinox, one buffer)", {}, EquinoxCheckpoints),
            ("orbax, synchronous", {"async_checkpoints": False}, Checkpoints),
            ("orbax, asynchronous", {}, Checkpoints)):
        seconds = run(variant(f"run{len(results)}", **changes), cls)
        in_loop = PAUSES[:-1]  # the last save is the final one, after the timed steps
        results[name] = (seconds, sum(in_loop) / max(1, len(in_loop)))
    last_none = run(variant("none-again", checkpoint_every=0))
    none = (first_none + last_none) / 2  # before and after: the machine's load drifts
    per = args.steps - 1
    interval = none / per * args.every
    where = {"shared": "training and saves share both cores",
             "split": "training on core 0 (the device), saves on core 1 (the host)"}
    print(f"placement {folder.name}: {where[folder.name]}")
    print(f"  time per step after compilation: no checkpoints {none / per:.3f} s (runs "
          f"before and after the others: {first_none / per:.3f}, {last_none / per:.3f})")
    for name, (seconds, pause) in results.items():
        print(f"  {name}: {seconds / per:.3f} s per step, overhead "
              f"{100 * (seconds / none - 1):+.1f}%; training waits {pause:.2f} s per "
              f"checkpoint ({100 * pause / interval:.1f}% of the interval)", flush=True)
    print("  (goal for async: <= 5% overhead)")


def trainer_state(config: TrainLmConfig):
    from marin.models.transformer import TransformerLM
    from marin.training.optimizer import build_optimizer

    model = TransformerLM.init(config.model, key=jax.random.PRNGKey(config.seed))
    params = eqx.filter(model, eqx.is_inexact_array)
    tx, _ = build_optimizer(config.optimizer, config.train_steps, params)
    return model, tx.init(params)


if __name__ == "__main__":
    main()
