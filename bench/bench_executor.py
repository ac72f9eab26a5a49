"""Executor benchmarks: planning, the whole dry-run command, and per-step overhead.

    python bench/bench_executor.py                          # everything, default sizes
    python bench/bench_executor.py --sizes 1000 10000       # dry-run sizes
    python bench/bench_executor.py --baseline-rev main      # "before" figures from a commit
    python bench/bench_executor.py --install-tools          # DVC and Snakemake, in /tmp

Every figure is measured in this run. The graph is the issue's shape: step ``i`` depends on
steps ``i-1`` and ``i//2``, every step trivial. Sections:

1. ``Executor.plan`` in this process (graph construction with hashing, then the plan) on
   chains with fan-out, half of the steps done;
2. the whole ``marin executor --dry-run`` command (start-up, imports, planning, output), on
   a prefix where every step is done, as a summary and with ``--json``; the same with the
   code of ``--baseline-rev`` (extracted with ``git archive``) as "before";
3. the same up-to-date check by DVC (``dvc status``, ``dvc repro --dry``) and Snakemake
   (``snakemake -n``) on the same graph, where they are installed (they are not project
   dependencies: ``--install-tools`` puts them in a throwaway venv under /tmp, and the
   bench says "not installed" otherwise);
4. per-step overhead of a real run of trivial steps (status, info, lease, attempt folder,
   commit), on a local prefix and on gs:// against fake-gcs-server, for both trees;
5. status reads through ``read_many`` against sequential reads, with per-request latency.

Wall time depends on what else the machine runs; CPU time (user + system of the measured
process) much less, so both are printed.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from slow_storage import SlowStorage  # noqa: E402  (bench/, the script's own folder)

from marin.execution import (  # noqa: E402
    Executor,
    ExecutorStep,
    StepGraph,
    StepStatus,
    this_output_path,
)
from marin.execution.experiments import load_experiment, steps_of  # noqa: E402
from marin.execution.status import StatusRecord, code_fingerprint, status_path  # noqa: E402

TOOLS_VENV = Path("/tmp/marin-bench-tools")

# The experiment file every section uses: step i depends on i-1 and i//2.
DAG_EXPERIMENT = '''
from dataclasses import dataclass

from marin.execution import ExecutorStep, this_output_path


@dataclass(frozen=True)
class DagConfig:
    index: int
    output_path: str
    previous: object = None
    half: object = None


def touch(config):
    return None


def dag(n):
    steps = []
    for i in range(n):
        previous = steps[i - 1] if i else None
        half = steps[i // 2] if i >= 2 else None
        steps.append(ExecutorStep("dag/s" + str(i), touch,
                                  DagConfig(i, this_output_path(), previous, half)))
    return steps


steps = dag({n})
'''


@dataclass
class Timing:
    wall: float
    cpu: float


def timed(command: list[str], env: dict[str, str] | None = None, cwd: Path | None = None,
          expect: str | None = None, timeout: float = 900) -> Timing:
    """Wall and CPU time (user + system) of a child process; checks its output."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd,
                         timeout=timeout)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    text = out.stdout + out.stderr
    if out.returncode != 0 or (expect is not None and expect not in text):
        raise RuntimeError(f"{' '.join(command[:4])}... failed ({out.returncode}): "
                           f"{text[-800:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Timing(wall, cpu)


def tree_env(tree: Path | None, **extra: str) -> dict[str, str]:
    """The environment that makes ``python -m marin...`` use the code of ``tree``."""
    env = {**os.environ, **extra}
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(tree), env.get("PYTHONPATH", "")]).rstrip(
            os.pathsep)
    return env


def check_tree(tree: Path | None, cwd: str) -> None:
    """Fail unless a child started with ``tree_env(tree)`` in ``cwd`` imports that tree's
    marin (the current folder comes first on ``sys.path``: never run children in ROOT)."""
    out = subprocess.run([sys.executable, "-c", "import marin; print(marin.__file__)"],
                         capture_output=True, text=True, env=tree_env(tree), cwd=cwd,
                         check=True)
    expected = (tree or ROOT).resolve()
    if not Path(out.stdout.strip()).resolve().is_relative_to(expected):
        raise RuntimeError(f"children import {out.stdout.strip()}, not marin from {expected}")


def extract_revision(rev: str, into: Path) -> Path | None:
    """The repository's ``rev`` as a folder (``git archive``), or None when unknown."""
    archive = into / "baseline.tar"
    with open(archive, "wb") as f:
        out = subprocess.run(["git", "-C", str(ROOT), "archive", rev], stdout=f,
                             stderr=subprocess.PIPE)
    if out.returncode != 0:
        print(f"baseline {rev!r}: {out.stderr.decode().strip()}; no before figures")
        return None
    tree = into / "baseline"
    with tarfile.open(archive) as tar:
        tar.extractall(tree, filter="data")
    return tree


# --- 1. planning in this process --------------------------------------------------------


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


def mark_done(prefix: str, steps: list[ExecutorStep], count: int | None = None) -> None:
    graph = StepGraph.build(steps, prefix)
    nodes = graph.nodes if count is None else graph.nodes[:count]
    records: dict[int, bytes] = {}
    for node in nodes:
        fn = node.step.fn
        record = records.get(id(fn))
        if record is None:
            record = records[id(fn)] = StatusRecord.now(
                StepStatus.SUCCESS, "bench", code_fingerprint(fn), outputs=[]).encode()
        os.makedirs(node.output_path, exist_ok=True)
        with open(status_path(node.output_path), "wb") as f:
            f.write(record)


def bench_plan(n: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        prefix = os.path.join(tmp, "prefix")
        steps = synthetic_steps(n)
        mark_done(prefix, steps, n // 2)
        t0 = time.perf_counter()
        StepGraph.build(steps, prefix)
        t1 = time.perf_counter()
        plan = Executor(prefix).plan(steps)
        t2 = time.perf_counter()
        totals = plan.totals()
        assert totals["skip"] == n // 2 and totals["run"] == n - n // 2, totals
        return {"graph_s": t1 - t0, "plan_s": t2 - t1}


# --- 2. the whole dry-run command ---------------------------------------------------------


def write_dag_experiment(folder: Path, n: int) -> Path:
    path = folder / f"dag_{n}.py"
    path.write_text(DAG_EXPERIMENT.format(n=n))
    return path


def bench_cli(n: int, trees: dict[str, Path | None], table_max: int) -> dict[str, Timing]:
    with tempfile.TemporaryDirectory() as tmp:
        experiment = write_dag_experiment(Path(tmp), n)
        prefix = os.path.join(tmp, "prefix")
        mark_done(prefix, steps_of(load_experiment(str(experiment))))
        base = [sys.executable, "-m", "marin.cli", "executor", "--dry-run", "--prefix", prefix]
        out: dict[str, Timing] = {}
        for label, tree in trees.items():
            env = tree_env(tree)
            check_tree(tree, tmp)
            if tree is None or n <= table_max:
                out[f"{label} text"] = timed([*base, str(experiment)], env, Path(tmp),
                                             expect=f"{n} skipped")
            out[f"{label} json"] = timed([*base, "--json", str(experiment)], env, Path(tmp),
                                         expect=f'"skip": {n}')
        return out


# --- 3. DVC and Snakemake -----------------------------------------------------------------


def tool(name: str) -> Path | None:
    for candidate in (TOOLS_VENV / "bin" / name, shutil.which(name)):
        if candidate and Path(candidate).exists():
            return Path(candidate)
    return None


def install_tools() -> None:
    if not (TOOLS_VENV / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(TOOLS_VENV)], check=True)
    subprocess.run([str(TOOLS_VENV / "bin" / "pip"), "install", "-q", "dvc", "snakemake"],
                   check=True)


def dag_dependencies(i: int) -> list[int]:
    return sorted({i - 1, i // 2} - {i}) if i else []


def bench_dvc(dvc: Path, n: int) -> dict[str, Timing]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        env = {**os.environ, "DVC_NO_ANALYTICS": "1"}
        subprocess.run([str(dvc), "init", "--no-scm", "-q"], cwd=root, check=True, env=env)
        (root / "out").mkdir()
        stages = {}
        for i in range(n):
            stage: dict[str, object] = {"cmd": f"touch out/{i}",
                                        "outs": [{f"out/{i}": {"cache": False}}]}
            if i:
                stage["deps"] = [f"out/{j}" for j in dag_dependencies(i)]
            stages[f"s{i}"] = stage
            (root / "out" / str(i)).write_text(str(i))
        (root / "dvc.yaml").write_text(json.dumps({"stages": stages}))  # JSON is YAML
        subprocess.run([str(dvc), "commit", "-f", "-q"], cwd=root, check=True, env=env,
                       capture_output=True)
        return {"dvc status": timed([str(dvc), "status"], env, root, expect="up to date"),
                "dvc repro --dry": timed([str(dvc), "repro", "--dry"], env, root)}


SNAKEFILE = '''
N = {n}
wildcard_constraints:
    i = r"\\d+"

def dependencies(wildcards):
    i = int(wildcards.i)
    return [f"out/{{j}}" for j in sorted({{i - 1, i // 2}} - {{i}})] if i else []

rule all:
    input: expand("out/{{i}}", i=range(N))

rule step:
    input: dependencies
    output: "out/{{i}}"
    shell: "touch {{output}}"
'''


def bench_snakemake(snakemake: Path, n: int) -> dict[str, Timing]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "Snakefile").write_text(SNAKEFILE.format(n=n))
        (root / "out").mkdir()
        for i in range(n):  # in order, so every output is newer than its inputs
            (root / "out" / str(i)).write_text(str(i))
        return {"snakemake -n": timed([str(snakemake), "-n", "--cores", "1"], None, root,
                                      expect="Nothing to be done")}


# --- 4. per-step overhead of real runs ----------------------------------------------------

THROUGHPUT = '''
import json, sys, time
sys.path.insert(0, {folder!r})
from dag_{n} import steps
from marin.execution import Executor
executor = Executor({prefix!r}, max_concurrent=2)
cpu, wall = time.process_time(), time.perf_counter()
result = executor.run(steps)
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
assert result.ok, result.summary()
print(json.dumps({{"wall": wall, "cpu": cpu}}))
'''


def bench_throughput(n: int, prefix: str, tree: Path | None, env: dict[str, str]) -> Timing:
    with tempfile.TemporaryDirectory() as tmp:
        write_dag_experiment(Path(tmp), n)
        script = THROUGHPUT.format(folder=tmp, n=n, prefix=prefix)
        check_tree(tree, tmp)
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                             env=tree_env(tree, **env), cwd=tmp, timeout=1800)
        if out.returncode != 0:
            raise RuntimeError(out.stderr[-800:])
        data = json.loads(out.stdout.strip().splitlines()[-1])
        return Timing(data["wall"], data["cpu"])


# --- 5. batched status reads --------------------------------------------------------------


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


# --- the report ---------------------------------------------------------------------------


def _fmt(t: Timing) -> str:
    return f"{t.wall:8.2f} s wall {t.cpu:7.2f} s cpu"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000],
                        help="graph sizes for the dry run")
    parser.add_argument("--plan-sizes", type=int, nargs="+", default=[1_000, 10_000])
    parser.add_argument("--baseline-rev", default="main",
                        help="the commit whose code gives the before figures ('' for none)")
    parser.add_argument("--baseline-table-max", type=int, default=10_000,
                        help="largest size at which the baseline's full table is timed")
    parser.add_argument("--tool-sizes", type=int, nargs="*", default=[1_000, 10_000])
    parser.add_argument("--dvc-max", type=int, default=1_000,
                        help="largest size for DVC (its setup hashes every file)")
    parser.add_argument("--install-tools", action="store_true",
                        help=f"pip install dvc and snakemake into {TOOLS_VENV} first")
    parser.add_argument("--steps", type=int, default=500, help="steps of the local real run")
    parser.add_argument("--gcs-steps", type=int, default=100, help="steps of the gs:// run")
    args = parser.parse_args()
    if args.install_tools:
        install_tools()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")

    print("\n1. Executor.plan in this process (chains with fan-out, half done)")
    for n in args.plan_sizes:
        r = bench_plan(n)
        print(f"{n:>8} steps: graph {r['graph_s']:.3f} s, plan {r['plan_s']:.3f} s "
              f"({r['plan_s'] / n * 1e6:.1f} us/step)")

    with tempfile.TemporaryDirectory() as tmp:
        baseline = extract_revision(args.baseline_rev, Path(tmp)) if args.baseline_rev \
            else None
        trees: dict[str, Path | None] = {"after": None}
        if baseline is not None:
            trees = {"before": baseline, "after": None}
        print("\n2. whole `marin executor --dry-run`, every step up to date "
              "(step i depends on i-1 and i//2)")
        for n in args.sizes:
            for label, t in bench_cli(n, trees, args.baseline_table_max).items():
                print(f"{n:>8} steps  {label:<12} {_fmt(t)}")
            if baseline is not None and n > args.baseline_table_max:
                print(f"{n:>8} steps  before text   not timed (the full table takes minutes)")

        print("\n3. the same check by DVC and Snakemake")
        dvc, snakemake = tool("dvc"), tool("snakemake")
        for n in args.tool_sizes:
            if snakemake is None:
                print(f"{n:>8} steps  snakemake -n  not installed (--install-tools)")
            else:
                for label, t in bench_snakemake(snakemake, n).items():
                    print(f"{n:>8} steps  {label:<16} {_fmt(t)}")
            if dvc is None:
                print(f"{n:>8} steps  dvc           not installed (--install-tools)")
            elif n <= args.dvc_max:
                for label, t in bench_dvc(dvc, n).items():
                    print(f"{n:>8} steps  {label:<16} {_fmt(t)}")
            else:
                print(f"{n:>8} steps  dvc           not timed above --dvc-max {args.dvc_max}")

        print("\n4. per-step overhead of a real run of trivial steps (ms per step)")
        from tests import servers

        with tempfile.TemporaryDirectory() as local, servers.gcs_emulator() as endpoint:
            for label, tree in trees.items():
                t = bench_throughput(args.steps, os.path.join(local, label), tree, {})
                print(f"local  {label:<7} {args.steps:>5} steps: {t.wall / args.steps * 1e3:6.2f}"
                      f" ms wall, {t.cpu / args.steps * 1e3:6.2f} ms cpu")
                bucket = servers.create_gcs_bucket(endpoint)
                t = bench_throughput(args.gcs_steps, f"gs://{bucket}/x", tree,
                                     {"STORAGE_EMULATOR_HOST": endpoint})
                print(f"gs://  {label:<7} {args.gcs_steps:>5} steps: "
                      f"{t.wall / args.gcs_steps * 1e3:6.2f} ms wall, "
                      f"{t.cpu / args.gcs_steps * 1e3:6.2f} ms cpu")

    s = bench_status_reads()
    print(f"\n5. status reads: {s['reads']} at {s['latency_ms']:.0f} ms each: sequential "
          f"{s['sequential_s']:.2f} s, read_many {s['read_many_s']:.2f} s "
          f"({s['speedup']:.1f}x)")


if __name__ == "__main__":
    main()
