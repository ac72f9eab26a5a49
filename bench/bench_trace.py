"""Trace summary benchmark: time and peak memory on 10 MB, 100 MB (and 1 GB) XPlane traces.

    python bench/bench_trace.py              # 10 MB and 100 MB
    python bench/bench_trace.py --with-1gb   # and 1 GB (a few minutes on 2 cores)

A real profile (4 CPU devices, a psum, matmuls, data scopes, step markers) is captured
first; larger traces repeat its lines, each copy shifted later in time by the profile's
length (the line's ``timestamp_ns`` is set again after its events, and protobuf keeps the
last value). Each figure comes from a fresh process: wall time of the summary and its peak
RSS. Beside it, in the same run: the whole-file baseline (``ProfileData.from_file`` and a
walk over every event), and xprof's own conversion (``overview_page``) where xprof is
installed (up to 100 MB: it holds the whole trace several times over). With --with-1gb
the whole-file baseline itself needs about 11 GB of memory.

Goals: 100 MB in under 15 s; 1 GB in under 2 GB of RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

MB = 1 << 20

CAPTURE = """
import sys, jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P
mesh = jax.make_mesh((4,), ("d",))
@jax.jit
def step(x, w):
    def body(v, w):
        h = jnp.tanh(v @ w)
        for _ in range(8):
            h = jnp.sin(h) * 0.5 + jnp.cos(h)
        return jax.lax.psum(h.sum(0), "d")
    return jax.shard_map(body, mesh=mesh, in_specs=(P("d"), P()), out_specs=P())(x, w)
x = jax.device_put(jnp.ones((256, 128)), NamedSharding(mesh, P("d")))
w = jnp.full((128, 128), 0.01)
step(x, w).block_until_ready()
with jax.profiler.trace(sys.argv[1]):
    for i in range(int(sys.argv[2])):
        with jax.profiler.StepTraceAnnotation("train", step_num=i):
            with jax.profiler.TraceAnnotation("marin.data/load_batch"):
                sum(range(2000))
            step(x, w).block_until_ready()
"""

MEASURE = """
import json, resource, sys, time
import jax.profiler
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
mode, path = sys.argv[1], sys.argv[2]
t0, c0 = time.perf_counter(), time.process_time()
if mode == "summary":
    from marin.profiling import trace_summary
    summary = trace_summary.load(path)
    result = {"events": summary.data.events, "top": summary.top_kernels(1)[0].name}
elif mode == "whole_file":
    data = jax.profiler.ProfileData.from_file(path)
    n = total = 0
    for plane in data.planes:
        for line in plane.lines:
            for event in line.events:
                n += 1
                total += event.duration_ns
    result = {"events": n}
else:
    from xprof.convert import raw_to_tool_data
    raw_to_tool_data.xspace_to_tool_data([path], "overview_page", {})
    result = {}
result["seconds"] = time.perf_counter() - t0
result["cpu_seconds"] = time.process_time() - c0
result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
result["rss_before_mb"] = base / 1024
print(json.dumps(result))
"""


def capture(folder: Path, steps: int) -> Path:
    env = {**os.environ, "JAX_PLATFORMS": "cpu",
           "XLA_FLAGS": "--xla_force_host_platform_device_count=4"}
    subprocess.run([sys.executable, "-c", CAPTURE, str(folder), str(steps)], check=True,
                   env=env)
    (path,) = folder.rglob("*.xplane.pb")
    return path


def _span_ns(path: Path) -> float:
    from jax.profiler import ProfileData

    starts, ends = [], []
    for plane in ProfileData.from_file(str(path)).planes:
        for line in plane.lines:
            for event in line.events:
                starts.append(event.start_ns)
                ends.append(event.start_ns + event.duration_ns)
    return max(ends) - min(starts) + 1000


def synthesize(source: Path, target: Path, size: int) -> int:
    """Repeat the source's lines, shifted in time, until the file reaches ``size`` bytes."""
    from marin.profiling._wire import _encode_varint, _field, _Reader, _varint

    data = source.read_bytes()
    span = int(_span_ns(source))
    reader = _Reader(open(source, "rb"), len(data))  # noqa: SIM115
    planes = [(value, stop) for number, _, value, stop in reader.fields(0, len(data))
              if number == 1]
    growable = max(planes, key=lambda p: p[1] - p[0])  # the host plane on a CPU trace
    header, lines = bytearray(), []
    for number, start, value, stop in reader.fields(*growable):
        if number == 3:
            timestamp = 0
            for n2, _, v2, s2 in reader.fields(value, stop):
                if n2 == 3:
                    timestamp = _varint(reader.read(v2, s2 - v2), 0)[0]
            lines.append((reader.read(value, stop - value), timestamp))
        else:
            header += reader.read(start, stop - start)
    others = b"".join(_field(1, reader.read(v, s - v)) for v, s in planes if (v, s) != growable)
    per_copy = sum(len(body) + 16 for body, _ in lines)
    copies = max(1, (size - len(others) - len(header)) // per_copy)

    def piece(body: bytes, timestamp: int, k: int) -> bytes:
        return _field(3, body + b"\x18" + _encode_varint(timestamp + k * span))

    length = len(header) + sum(len(piece(body, ts, k)) - len(body)
                               for k in range(copies) for body, ts in lines) \
        + copies * sum(len(body) for body, _ in lines)
    with open(target, "wb") as out:
        out.write(others)
        out.write(_encode_varint(1 << 3 | 2) + _encode_varint(length))
        out.write(header)
        for k in range(copies):
            for body, ts in lines:
                out.write(piece(body, ts, k))
    return copies


def measure(mode: str, path: Path) -> dict:
    out = subprocess.run([sys.executable, "-c", MEASURE, mode, str(path)], capture_output=True,
                         text=True, env={**os.environ, "JAX_PLATFORMS": "cpu"})
    if out.returncode:
        return {"error": out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "failed"}
    return json.loads(out.stdout.strip().splitlines()[-1])


def _time(result: dict) -> str:
    if "seconds" not in result:
        return f"{result.get('error', '-')[:14]:>14}"
    return f"{result['seconds']:>6.2f} ({result['cpu_seconds']:>5.2f})"


def _rss(result: dict) -> str:
    return f"{result['peak_rss_mb']:>6.0f}" if "peak_rss_mb" in result else f"{'-':>6}"


def _has_xprof() -> bool:
    try:
        import xprof  # noqa: F401
    except ImportError:
        return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--with-1gb", action="store_true", help="also the 1 GB trace")
    parser.add_argument("--steps", type=int, default=60, help="steps in the captured profile")
    args = parser.parse_args()
    sizes = [10 * MB, 100 * MB] + ([1024 * MB] if args.with_1gb else [])
    xprof = _has_xprof()
    with tempfile.TemporaryDirectory() as tmp:
        source = capture(Path(tmp) / "capture", args.steps)
        print(f"captured profile: {source.stat().st_size / MB:.1f} MB "
              f"(4 CPU devices, {args.steps} steps)")
        print("times: wall seconds (CPU seconds of the process); RSS: peak, MB")
        print(f"{'size':>8} {'events':>10} | {'summary':>14} {'RSS':>6} | "
              f"{'whole file':>14} {'RSS':>6} | {'xprof':>14} {'RSS':>6} | "
              f"{'summary/whole-file CPU':>22}")
        for size in sizes:
            path = Path(tmp) / f"trace-{size // MB}mb.xplane.pb"
            t0 = time.perf_counter()
            synthesize(source, path, size)
            made = time.perf_counter() - t0
            ours = measure("summary", path)
            whole = measure("whole_file", path)
            xp = measure("xprof", path) if xprof and size <= 100 * MB else {}
            ratio = ours["cpu_seconds"] / whole["cpu_seconds"] if "cpu_seconds" in whole \
                else float("nan")
            print(f"{path.stat().st_size / MB:>6.0f}MB {ours.get('events', 0):>10} | "
                  f"{_time(ours)} {_rss(ours)} | {_time(whole)} {_rss(whole)} | "
                  f"{_time(xp)} {_rss(xp)} | {ratio:>22.2f}   (synthesised in {made:.1f} s)",
                  flush=True)
            path.unlink()
        print(f"RSS before loading (jax imported): {ours['rss_before_mb']:.0f} MB. "
              "Goals: 100 MB under 15 s; 1 GB under 2048 MB RSS."
              + ("" if xprof else " xprof is not installed: its column is empty."))


if __name__ == "__main__":
    main()
