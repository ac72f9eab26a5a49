"""Executor planning benchmarks.

    python bench/bench_executor.py                 # 1k, 10k, 100k steps
    python bench/bench_executor.py --sizes 10000   # one size

For each size it builds a synthetic graph (chains of 10 steps, every 10th chain hanging off
a shared hub step: chains and fan-out), marks the first half of the steps (in dependency
order) as done on a local prefix, and times:

* graph construction (hashing every config) and the dry-run plan, in this process;
* for 10,000 steps, the whole ``marin executor --dry-run --json`` command, start-up included;
* status reads through ``read_many`` against sequential reads, on a storage that adds a
  fixed latency per request, as a remote bucket does.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from marin.execution import Executor, ExecutorStep, StepGraph, StepStatus, this_output_path
from marin.execution.status import StatusRecord, status_path
from marin.storage._local import LocalStorage


@dataclass(frozen=True)
class SynthConfig:
    index: int
    output_path: str
    upstream: str | None = None
    learning_rate: float = 1e-3
    tags: tuple[str, ...] = ("bench",)


def noop(config: SynthConfig) -> None:
    return None


def synthetic_steps(n: int) -> list[ExecutorStep]:
    steps: list[ExecutorStep] = []
    hub: ExecutorStep | None = None
    for i in range(n):
        if i % 100 == 0:
            upstream = None
        elif i % 10 == 0:
            upstream = hub
        else:
            upstream = steps[-1]
        step = ExecutorStep(f"synth/s{i}", noop,
                            SynthConfig(i, this_output_path(), upstream))  # type: ignore[arg-type]
        if i % 100 == 0:
            hub = step
        steps.append(step)
    return steps


def mark_half_done(prefix: str, steps: list[ExecutorStep]) -> None:
    graph = StepGraph.build(steps, prefix)
    record = StatusRecord.now(StepStatus.SUCCESS, "bench", "").encode()
    for node in graph.nodes[: len(graph.nodes) // 2]:
        os.makedirs(node.output_path, exist_ok=True)
        with open(status_path(node.output_path), "wb") as f:
            f.write(record)


class SlowStorage(LocalStorage):
    """Local storage with a fixed latency per read, standing in for a remote bucket."""

    def __init__(self, latency: float):
        self.latency = latency

    def read(self, path):
        time.sleep(self.latency)
        return super().read(path)

    def read_many(self, paths):
        return super(LocalStorage, self).read_many(paths)  # the concurrent default


def bench_plan(n: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        prefix = os.path.join(tmp, "prefix")
        steps = synthetic_steps(n)
        mark_half_done(prefix, steps)
        t0 = time.perf_counter()
        graph = StepGraph.build(steps, prefix)
        t1 = time.perf_counter()
        plan = Executor(prefix).plan(steps)
        t2 = time.perf_counter()
        totals = plan.totals()
        assert totals["skip"] == n // 2 and totals["run"] == n - n // 2, totals
        result = {"steps": n, "graph_s": t1 - t0, "plan_s": t2 - t1}
        assert len(graph.nodes) == n
        if n == 10_000:
            script = Path(tmp) / "synth_experiment.py"
            script.write_text(
                f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
                "from bench_executor import synthetic_steps\n"
                f"steps = synthetic_steps({n})\n")
            t3 = time.perf_counter()
            out = subprocess.run([sys.executable, "-m", "marin.cli", "executor", "--dry-run",
                                  "--json", "--prefix", prefix, str(script)],
                                 capture_output=True, text=True, check=True)
            result["cli_dry_run_s"] = time.perf_counter() - t3
            assert '"skip": 5000' in out.stdout
        return result


def bench_status_reads(n: int = 1000, latency: float = 0.005) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for i in range(n):
            path = os.path.join(tmp, f"s{i}", ".executor_status")
            os.makedirs(os.path.dirname(path))
            Path(path).write_bytes(b"{}")
            paths.append(path)
        storage = SlowStorage(latency)
        t0 = time.perf_counter()
        sequential = [storage.read(p) for p in paths]
        t1 = time.perf_counter()
        batched = storage.read_many(paths)
        t2 = time.perf_counter()
        assert [b.data for b in sequential] == [b.data for b in batched]
        return {"reads": n, "latency_ms": latency * 1e3, "sequential_s": t1 - t0,
                "read_many_s": t2 - t1, "speedup": (t1 - t0) / (t2 - t1)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    args = parser.parse_args()
    print("dry run = Executor.plan: hashing, graph, batched status reads, decisions")
    print(f"{'steps':>8} {'graph s':>9} {'dry run s':>10} {'us/step':>9}")
    for n in args.sizes:
        r = bench_plan(n)
        print(f"{n:>8} {r['graph_s']:>9.3f} {r['plan_s']:>10.3f} {r['plan_s'] / n * 1e6:>9.1f}")
        if "cli_dry_run_s" in r:
            print(f"{'':>8} whole `marin executor --dry-run --json` on {n} steps: "
                  f"{r['cli_dry_run_s']:.2f} s wall (start-up included)")
    s = bench_status_reads()
    print(f"status reads: {s['reads']} at {s['latency_ms']:.0f} ms each: sequential "
          f"{s['sequential_s']:.2f} s, read_many {s['read_many_s']:.2f} s "
          f"({s['speedup']:.1f}x)")


if __name__ == "__main__":
    main()
