"""Dashboard benchmark: how fast a prefix of many steps lists.

    python bench/bench_dashboard.py                  # 10,000 steps
    python bench/bench_dashboard.py --steps 2000 --latency-ms 20

It plans a synthetic graph of ``--steps`` steps (chains with fan-out) with the executor,
writes what executors leave behind (a status and an info per step: mostly SUCCESS, some
FAILED, RUNNING with a live lease, CANCELLED, and some never started) and an invocation
record, then serves the dashboard on loopback and times over HTTP:

* the experiment page (the 10,000-row step list), on a fresh server (cold) and again (warm);
* the live-states poll that open pages repeat;
* the "all steps" page, which finds steps by listing the prefix instead of the record;
* as the baseline, measured in the same run: the executor's own dry-run plan of the same
  steps (one batched read of every status), and a bare ``read_many`` of every status file;
* the cold experiment page on a storage that adds ``--latency-ms`` to every read and
  listing, as a remote bucket does, with ``read_many``'s concurrency.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from slow_storage import SlowStorage  # bench/, the script's own folder

from marin.dashboard.reader import PrefixReader
from marin.execution import Executor, ExecutorStep, this_output_path
from marin.execution.invocations import invocations_folder, planned_step
from marin.execution.lease import LeaseRecord
from marin.execution.status import (
    StatusRecord,
    StepStatus,
    encode_info,
    info_path,
    lease_path,
    status_path,
)
from marin.storage._local import LocalStorage
from tests.dashboard_support import running_dashboard


@dataclass(frozen=True)
class SynthConfig:
    index: int
    output_path: str
    upstream: str | None = None
    learning_rate: float = 1e-3


def noop(config: SynthConfig) -> None:
    return None


def synthetic_steps(n: int) -> list[ExecutorStep]:
    steps: list[ExecutorStep] = []
    for i in range(n):
        upstream = None if i % 50 == 0 else steps[i - 1 if i % 7 else i - (i % 50)]
        steps.append(ExecutorStep(f"sweep/b{i // 1000}/s{i}", noop,
                                  SynthConfig(i, this_output_path(), upstream)))  # type: ignore[arg-type]
    return steps


def write_prefix(prefix: str, n: int) -> list[str]:
    """Statuses, infos, leases and one invocation record, as executors write them."""
    plan = Executor(prefix).plan(synthetic_steps(n))
    now = time.time()
    for i, entry in enumerate(plan.entries):
        out = entry.output_path
        kind = i % 20
        if kind == 19:
            continue  # never started
        status = {17: StepStatus.FAILED, 18: StepStatus.RUNNING,
                  16: StepStatus.CANCELLED}.get(kind, StepStatus.SUCCESS)
        _write(info_path(out), encode_info({
            "name": entry.name, "key": entry.node.key, "version": entry.node.version,
            "config": {"index": i, "learning_rate": 1e-3}, "created": now - 60,
            "dependencies": [d.output_path for d in entry.node.dependencies], "run_id": "r"}))
        record = StatusRecord(status, "r", now - (0 if status is StepStatus.RUNNING else 30),
                              "fp", "ValueError: synthetic failure" if kind == 17 else None,
                              None, "bench-host", 1)
        _write(status_path(out), record.encode())
        if status is StepStatus.RUNNING:
            _write(lease_path(out), LeaseRecord("r", "bench-host", 1, now, 3600).encode())
    steps = [planned_step(e).to_json() for e in plan.entries]
    record = {"format": 1, "experiment": "bench", "started": now - 60, "user": "bench",
              "host": "bench-host"}
    # In flight: no end yet, so durations come from each step's info.
    _write(f"{invocations_folder(prefix)}/{RUNNING_ID}.json",
           json.dumps({**record, "id": RUNNING_ID, "ended": None, "steps": steps}).encode())
    # Finished: outcomes and durations recorded at the end, as the executor does.
    ended = [{**s, "outcome": "succeeded", "seconds": 30.0} for s in steps]
    _write(f"{invocations_folder(prefix)}/{ENDED_ID}.json",
           json.dumps({**record, "id": ENDED_ID, "ended": now, "steps": ended}).encode())
    return [e.output_path for e in plan.entries]


RUNNING_ID = "20250101-000000-inflight"
ENDED_ID = "20250101-000000-finished"


def _write(path: str, data: bytes) -> None:
    # Plain writes: the executor's fsync per file would make setting up 10,000 steps slow.
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_bytes(data)


def fetch(url: str) -> tuple[float, int]:
    t0 = time.perf_counter()
    with urllib.request.urlopen(url, timeout=600) as response:
        body = response.read()
    return time.perf_counter() - t0, len(body)


READ_CONCURRENCY = 64  # overlapping reads, as on gs:// and s3://


def time_pages(prefix: str, invocation: str) -> dict[str, float]:
    """Fresh server: the experiment page cold and warm, the poll, the index."""
    with running_dashboard(prefix) as url:
        cold, size = fetch(f"{url}/experiments/{invocation}")
        warm, _ = fetch(f"{url}/experiments/{invocation}")
        poll, _ = fetch(f"{url}/api/experiments/{invocation}/states")
        index, _ = fetch(f"{url}/")
    return {"cold": cold, "warm": warm, "poll": poll, "index": index, "size": size}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    args = parser.parse_args()
    n = args.steps
    with tempfile.TemporaryDirectory() as tmp:
        prefix = f"{tmp}/prefix"
        t0 = time.perf_counter()
        outputs = write_prefix(prefix, n)
        print(f"prefix of {n:,} steps written in {time.perf_counter() - t0:.1f} s")

        t0 = time.perf_counter()
        Executor(prefix).plan(synthetic_steps(n))
        plan_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        LocalStorage().read_many([status_path(p) for p in outputs])
        reads_s = time.perf_counter() - t0

        finished = time_pages(prefix, ENDED_ID)
        flight = time_pages(prefix, RUNNING_ID)
        with running_dashboard(prefix) as url:
            walk, _ = fetch(f"{url}/experiments/all")

        from marin.dashboard.pages import experiment_page

        reader = PrefixReader(prefix, storage=SlowStorage(args.latency_ms / 1000,
                                                                 READ_CONCURRENCY))
        t0 = time.perf_counter()
        experiment_page(reader, RUNNING_ID, None, False)
        remote = time.perf_counter() - t0

    print(f"baseline, same run: executor dry-run plan of the same {n:,} steps {plan_s:.3f} s; "
          f"bare read_many of every status {reads_s:.3f} s")
    for label, t in (("finished sweep", finished), ("sweep in flight", flight)):
        print(f"{label}: experiment page of {n:,} steps ({t['size'] / 1e6:.2f} MB HTML, "
              f"first {min(n, 500)} rows) cold {t['cold']:.3f} s, warm {t['warm']:.3f} s; "
              f"live poll {t['poll']:.3f} s; index {t['index']:.3f} s  "
              f"[cold/plan {t['cold'] / plan_s:.2f}x, warm/plan {t['warm'] / plan_s:.2f}x]")
    print(f"all steps found by listing the prefix (cold, infos read for every step): "
          f"{walk:.3f} s")
    print(f"with {args.latency_ms:.0f} ms per storage request (remote-like, read_many "
          f"{READ_CONCURRENCY} at a time): cold data of the in-flight page "
          f"{remote:.2f} s = {remote / (2 * n * args.latency_ms / 1000):.3f} of sequential reads")
    print("goal: a prefix of 10,000 steps lists in under 1 s")


if __name__ == "__main__":
    main()
