"""Log throughput and latency: the log service against a bundled single-process path.

    python bench/bench_logs.py                       # 8 writers, 25,000 entries each
    python bench/bench_logs.py --writers 8 --entries 50000 --batch 100 --json

Service path: each writer process uses ``LogClient.write_batch`` (``when_full="block"``),
then ``flush``; the log service (its own process, SQLite WAL, fsync per group commit)
stores everything. Durable entries/s = entries counted in the store / time until the last
writer's flush returned (every entry acknowledged after its commit).

Bundled path (the old design): the same writers hand each batch to one process that both
schedules work and writes the logs, and wait for its reply after the commit, so logging
costs each writer a round trip and the scheduler all the storage work.

Figures are printed side by side with their ratio; goals are >= 100k entries/s durable and
a write_batch p99 under 1 ms. Also printed: where the slowest 1% of calls spent their time
(the caller's CPU, other threads of its process, or off-CPU), and the CPU each path costs
per entry in all its processes, which does not depend on what else the machine runs.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

LEVELS = ("INFO", "INFO", "INFO", "WARNING", "DEBUG")


def _batches(writer: int, entries: int, batch: int) -> list[list[dict]]:
    out = []
    for start in range(0, entries, batch):
        out.append([{"level": LEVELS[i % 5], "run": f"bench-{writer}",
                     "msg": f"writer {writer} step {i} loss {i * 0.001:.4f}",
                     "step": i, "source": "bench"}
                    for i in range(start, min(entries, start + batch))])
    return out


def _percentiles(latencies: list[float]) -> dict[str, float]:
    latencies = sorted(latencies)
    pick = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))]  # noqa: E731
    return {"p50_ms": pick(0.50) * 1e3, "p99_ms": pick(0.99) * 1e3,
            "mean_ms": statistics.fmean(latencies) * 1e3}


# -- service path ----------------------------------------------------------------------
def _service_writer(url: str, writer: int, entries: int, batch: int, start, results) -> None:
    from marin.services.log_service.client import LogClient

    batches = _batches(writer, entries, batch)
    client = LogClient.connect(url, when_full="block", buffer_entries=200_000)
    start.wait()
    cpu_start = time.process_time()
    latencies, cpu = [], []
    for b in batches:
        c0, p0 = time.thread_time(), time.process_time()
        t0 = time.perf_counter()
        client.write_batch(b)
        latencies.append(time.perf_counter() - t0)
        cpu.append((time.thread_time() - c0, time.process_time() - p0))
    client.flush()
    done = time.time()
    writer_cpu = time.process_time() - cpu_start
    client.close()
    results.put((latencies, done, cpu, writer_cpu))


def run_service(writers: int, entries: int, batch: int, data: str) -> dict:
    from marin.services.log_service.reader import query  # noqa: F401  (imports grpc before timing)

    proc = subprocess.Popen([sys.executable, "-m", "marin.services.serve", "logger",
                             "--data", data, "--port", "0", "--retention-days", "0"],
                            stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    address = line.split(" listening on ")[1].split()[0]
    try:
        cpu0 = _cpu_seconds(proc.pid)
        result = _drive(_service_writer, address, writers, entries, batch,
                        lambda: _count(os.path.join(data, "logs.sqlite")))
        result["store_cpu_us_per_entry"] = (_cpu_seconds(proc.pid) - cpu0) / \
            result["stored"] * 1e6
        return result
    finally:
        proc.terminate()
        proc.wait()


def _cpu_seconds(pid: int) -> float:
    """CPU time (user + system) a process has used so far (Linux)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _count(path: str) -> int:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT count(*) FROM logs").fetchone()[0]
    finally:
        conn.close()


def _drive(target, arg, writers: int, entries: int, batch: int, count) -> dict:
    ctx = mp.get_context("spawn")
    start, results = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=target, args=(arg, w, entries, batch, start, results))
             for w in range(writers)]
    for p in procs:
        p.start()
    time.sleep(3.0)  # let every writer import and build its batches
    t0 = time.time()
    start.set()
    got = [results.get(timeout=600) for _ in procs]
    for p in procs:
        p.join()
    elapsed = max(done for _, done, _, _ in got) - t0
    stored = count()
    latencies = [lat for lats, _, _, _ in got for lat in lats]
    cpu = [c for _, _, cpus, _ in got for c in cpus]
    return {"entries": writers * entries, "stored": stored, "seconds": elapsed,
            "durable_entries_per_s": stored / elapsed, **_percentiles(latencies),
            "writers_cpu_us_per_entry": sum(w for *_, w in got) / max(1, stored) * 1e6,
            "slowest_1pct": _breakdown(latencies, cpu)}


def _breakdown(latencies: list[float], cpu: list[tuple[float, float]]) -> dict[str, float]:
    """Where the slowest 1% of calls spent their time (mean ms): on the calling thread's
    CPU, on other threads of the process (holding the GIL: the sender's encoding), or
    off-CPU (waiting: the OS ran another process, or a lock or reply)."""
    order = sorted(range(len(latencies)), key=latencies.__getitem__)
    slow = order[int(0.99 * len(order)):] or order[-1:]
    wall = statistics.fmean(latencies[i] for i in slow)
    own = statistics.fmean(cpu[i][0] for i in slow)
    other = statistics.fmean(max(0.0, cpu[i][1] - cpu[i][0]) for i in slow)
    return {"wall_ms": wall * 1e3, "caller_cpu_ms": own * 1e3, "other_threads_ms": other * 1e3,
            "off_cpu_ms": max(0.0, wall - own - other) * 1e3}


# -- bundled path ----------------------------------------------------------------------
def _scheduler(path: str, requests, replies, writers: int) -> None:
    """One process that schedules and writes logs: every batch is inserted and committed
    before its writer hears back."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("CREATE TABLE IF NOT EXISTS logs (id INTEGER PRIMARY KEY, ts REAL, level "
                 "TEXT, run TEXT, step INTEGER, source TEXT, msg TEXT)")
    finished = 0
    while finished < writers:
        item = requests.get()
        if item is None:
            finished += 1
            continue
        writer, rows = item
        conn.execute("BEGIN")
        conn.executemany("INSERT INTO logs (ts, level, run, step, source, msg) VALUES "
                         "(?, ?, ?, ?, ?, ?)", rows)
        conn.execute("COMMIT")
        replies[writer].put(len(rows))
    conn.close()


def _bundled_writer(channels, writer: int, entries: int, batch: int, start, results) -> None:
    from marin.services.log_service.client import LogEntry

    requests, replies = channels
    batches = _batches(writer, entries, batch)
    start.wait()
    cpu_start = time.process_time()
    latencies, cpu = [], []
    for b in batches:
        c0, p0 = time.thread_time(), time.process_time()
        t0 = time.perf_counter()
        rows = [(e.timestamp, e.level, e.run, e.step, e.source, e.msg)
                for e in (LogEntry(**d) for d in b)]
        requests.put((writer, rows))
        replies[writer].get()
        latencies.append(time.perf_counter() - t0)
        cpu.append((time.thread_time() - c0, time.process_time() - p0))
    requests.put(None)
    results.put((latencies, time.time(), cpu, time.process_time() - cpu_start))


def run_bundled(writers: int, entries: int, batch: int, data: str) -> dict:
    ctx = mp.get_context("spawn")
    path = os.path.join(data, "bundled.sqlite")
    requests = ctx.Queue()
    replies = [ctx.Queue() for _ in range(writers)]
    sched = ctx.Process(target=_scheduler, args=(path, requests, replies, writers))
    sched.start()
    cpu = []

    def finish() -> int:
        cpu.append(_cpu_seconds(sched.pid))
        sched.join()
        return _count(path)

    try:
        time.sleep(0.5)
        cpu0 = _cpu_seconds(sched.pid)
        result = _drive(_bundled_writer, (requests, replies), writers, entries, batch, finish)
        result["store_cpu_us_per_entry"] = (cpu[0] - cpu0) / result["stored"] * 1e6
        return result
    finally:
        sched.join(timeout=30)


def _cpu(result: dict) -> float:
    return result["writers_cpu_us_per_entry"] + result["store_cpu_us_per_entry"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--entries", type=int, default=25_000, help="per writer")
    parser.add_argument("--batch", type=int, default=100, help="entries per write_batch")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        service = run_service(args.writers, args.entries, args.batch, os.path.join(tmp, "svc"))
        bundled = run_bundled(args.writers, args.entries, args.batch, tmp)
    ratio = service["durable_entries_per_s"] / bundled["durable_entries_per_s"]
    report = {"writers": args.writers, "entries_per_writer": args.entries,
              "batch": args.batch, "cpus": os.cpu_count(), "service": service,
              "bundled": bundled, "throughput_ratio": ratio,
              "p99_ratio_bundled_over_service": bundled["p99_ms"] / service["p99_ms"],
              "cpu_ratio_bundled_over_service": _cpu(bundled) / _cpu(service)}
    if args.json:
        print(json.dumps(report, indent=1))
        return
    print(f"{args.writers} writers x {args.entries} entries, write_batch of {args.batch}, "
          f"{os.cpu_count()} CPUs")
    print(f"{'':28}{'service':>14}{'bundled':>14}")
    for key, label, fmt in (("durable_entries_per_s", "durable entries/s", "{:14,.0f}"),
                            ("p50_ms", "write_batch p50 (ms)", "{:14.3f}"),
                            ("p99_ms", "write_batch p99 (ms)", "{:14.3f}"),
                            ("stored", "entries stored", "{:14,d}")):
        print(f"{label:28}" + fmt.format(service[key]) + fmt.format(bundled[key]))
    for name, r in (("service", service), ("bundled", bundled)):
        b = r["slowest_1pct"]
        print(f"slowest 1% of {name} calls (mean): {b['wall_ms']:.3f} ms = caller CPU "
              f"{b['caller_cpu_ms']:.3f} + other threads {b['other_threads_ms']:.3f} + "
              f"off-CPU {b['off_cpu_ms']:.3f}")
    for key, label in (("writers_cpu_us_per_entry", "writers' CPU per entry (us)"),
                       ("store_cpu_us_per_entry", "store CPU per entry (us)")):
        print(f"{label:28}{service[key]:14.1f}{bundled[key]:14.1f}")
    cpu_ratio = report["cpu_ratio_bundled_over_service"]
    print(f"CPU per entry, all processes: service {_cpu(service):.1f} us, bundled "
          f"{_cpu(bundled):.1f} us ({cpu_ratio:.1f}x); on {os.cpu_count()} idle CPUs that "
          f"bounds the service at {os.cpu_count() / _cpu(service) * 1e6:,.0f} entries/s")
    print(f"throughput ratio service/bundled: {ratio:.2f}x; p99 latency ratio "
          f"bundled/service: {report['p99_ratio_bundled_over_service']:.1f}x")
    print(f"goals: >= 100,000 durable entries/s "
          f"({'met' if service['durable_entries_per_s'] >= 1e5 else 'not met'}), "
          f"p99 < 1 ms ({'met' if service['p99_ms'] < 1 else 'not met'})")


if __name__ == "__main__":
    main()
