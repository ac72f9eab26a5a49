"""Multi-host training on the CPU: the collectives' share of a step, and what a gang costs
to start.

    python bench/bench_multihost.py          # about 2 minutes on two cores

1. **All-reduce share.** The tiny model trains as a 2-process local gang (``StepResources(
   hosts=2)``, gloo collectives) with a JAX profile of steps [4, 16); marin's trace summary
   of host 0's profile gives the share of the profiled steps spent in communication
   (all-reduce, all-gather, reduce-scatter, not hidden under compute). Cross-check by
   timing: the median step of the 2-process run against one process training one host's
   half of the batch on one device (the same work per device, without the collectives).
2. **Gang start-up.** Seconds until every member of a gang has joined ``jax.distributed``
   and listed the global devices, from the call to the gang's return: a local gang of 2
   against a gang of 1 (one fresh process, same imports, nothing to join); and the same
   with the Ray runner's gang on a 2-node Ray cluster on loopback (``ray start`` twice).
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TRAIN_STEPS, PROFILED = 16, (4, 16)


def join(folder: str) -> None:
    """A member's start-up: import the trainer's distributed setup, join, list devices."""
    entered = time.time()
    import jax

    from marin.training.distributed import start_distributed

    hosts = start_distributed()
    count = jax.device_count()
    with open(os.path.join(folder, f"host-{hosts.index}.json"), "w") as f:
        json.dump({"entered": entered, "joined": time.time(), "devices": count}, f)


def _gang_seconds(gang, folder: Path) -> tuple[float, float]:
    """(seconds the gang took, seconds from the start until the last member entered)."""
    for old in folder.glob("host-*.json"):
        old.unlink()
    started = time.time()
    gang.run(join, str(folder))
    took = time.time() - started
    entered = max(json.loads(p.read_text())["entered"] for p in folder.glob("host-*.json"))
    return took, entered - started


def startup(root: Path) -> None:
    from marin.execution.gang import LocalGang

    folder = root / "startup"
    folder.mkdir()
    one = [_gang_seconds(LocalGang(1), folder) for _ in range(3)]
    two = [_gang_seconds(LocalGang(2), folder) for _ in range(3)]
    _report("local", one, two)
    try:
        ray_startup(folder)
    except Exception as e:  # Ray missing or unable to start here: the local figures stand
        print(f"ray gang start-up: not measured ({type(e).__name__}: {e})")


def ray_startup(folder: Path) -> None:
    import ray
    from marin_ray.gang import RayGang

    from marin.execution import StepResources
    from tests.servers import ray_nodes

    with ray_nodes(2) as address:
        ray.init(address=address, runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}})
        while sum(node["Alive"] for node in ray.nodes()) < 2:
            time.sleep(0.2)
        env = {"env_vars": {"PYTHONPATH": str(ROOT)}}
        one = [_gang_seconds(RayGang(StepResources(hosts=1), env), folder) for _ in range(3)]
        two = [_gang_seconds(RayGang(StepResources(hosts=2, placement="strict_spread"), env),
                             folder) for _ in range(3)]
        ray.shutdown()
    _report("ray", one, two)


def _report(kind: str, one: list, two: list) -> None:
    a, b = statistics.median(t for t, _ in one), statistics.median(t for t, _ in two)
    print(f"{kind} gang start-up (median of 3): 1 host {a:.2f} s (last member entered the "
          f"step after {statistics.median(e for _, e in one):.2f} s), 2 hosts {b:.2f} s "
          f"(after {statistics.median(e for _, e in two):.2f} s); 2 hosts / 1 host = "
          f"{b / a:.2f}x")


def collectives(root: Path) -> None:
    from marin.execution import Executor, ExecutorStep, StepResources, this_output_path
    from marin.profiling import trace_summary
    from marin.training import train_lm
    from tests.helpers.training import build_cache, tiny_config

    (root / "data").mkdir()
    cache = build_cache(root / "data")
    config = tiny_config(cache, root / "unused", train_steps=TRAIN_STEPS, eval_every=0,
                         checkpoint_every=0, compute_dtype="float32", profile_steps=PROFILED,
                         compilation_cache=str(root / "jax-cache"))
    step = ExecutorStep("bench/gang", train_lm, dataclasses.replace(
        config, output_path=this_output_path()), resources=StepResources(hosts=2))
    result = Executor(str(root / "prefix")).run([step])
    assert result.ok, result.summary()
    out = Path(result.steps[0].output_path)
    summary = trace_summary.load(str(out / "profile" / "host-0"))
    shares = summary.breakdown()
    print(f"2-process CPU run (tiny model, batch {config.batch_size}, float32), steps "
          f"{PROFILED[0]}-{PROFILED[1] - 1} profiled on host 0: communication "
          f"{shares['communication'].fraction:.1%} of the profiled time, compute "
          f"{shares['compute'].fraction:.1%}, host {shares['host'].fraction:.1%}, idle "
          f"{shares['idle'].fraction:.1%}; collectives: "
          + ", ".join(f"{k.name} {k.seconds * 1e3:.1f} ms x{k.count}"
                      for k in summary.top_kernels(50) if k.category == "communication"))
    half = dataclasses.replace(config, batch_size=config.batch_size // 2, profile_steps=None,
                               output_path=str(root / "half"))
    train_lm(half)
    two, one = _median_step(out), _median_step(root / "half")
    print(f"timing: median step {two * 1e3:.1f} ms in 2 processes (batch "
          f"{config.batch_size}) against {one * 1e3:.1f} ms for one process on one host's "
          f"half (batch {half.batch_size}): ratio {two / one:.2f}, so about "
          f"{max(0.0, 1 - one / two):.0%} of the 2-process step is not per-device work "
          "(the collectives and their waits)")


def _median_step(run: Path) -> float:
    from marin.training import metric_names as names

    records = [json.loads(line) for line in (run / "metrics.jsonl").open()]
    times = [r[names.STEP_TIME] for r in records
             if names.TRAIN_LOSS in r and r["step"] > PROFILED[0]]
    return statistics.median(times)


def main() -> None:
    print(f"machine load (1, 5, 15 min): {os.getloadavg()}")
    with tempfile.TemporaryDirectory(prefix="marin-bench-multihost-") as tmp:
        root = Path(tmp)
        collectives(root)
        startup(root)


if __name__ == "__main__":
    main()
