"""Trace summaries of real JAX profiles (CPU, 1 and 4 devices, the trainer), of GPU and
TPU traces built through jaxlib's own XPlane API, through gs://, and of bad files."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import fsspec
import jax
import jax.numpy as jnp
import pytest
from jax.profiler import ProfileData

from marin import registry
from marin.cli import main
from marin.profiling import trace_summary
from marin.profiling.trace_summary import TraceError
from tests.conftest import ROOT
from tests.helpers.distributions import make_distribution


def matmul_program(a, b, c):
    # the dominant op: 768^3 multiply-adds, beside elementwise ops on 64 x 64 values
    return a @ b, jnp.tanh(c) * 2.0 - jnp.sin(c) + jnp.exp(-c)


@pytest.fixture(scope="module")
def matmul_trace(tmp_path_factory) -> tuple[Path, str]:
    """A profile of three steps of ``matmul_program``, and the compiled HLO's text."""
    out = tmp_path_factory.mktemp("matmul")
    args = [jnp.full((768, 768), 0.01), jnp.full((768, 768), 0.02), jnp.full((64, 64), 0.5)]
    fn = jax.jit(matmul_program)
    jax.block_until_ready(fn(*args))
    with jax.profiler.trace(str(out)):
        for step in range(3):
            with jax.profiler.StepTraceAnnotation("train", step_num=step):
                with jax.profiler.TraceAnnotation("marin.data/load_batch"):
                    sum(range(20000))
                jax.block_until_ready(fn(*args))
    return out, fn.lower(*args).compile().as_text()


def xplane_file(folder: Path) -> Path:
    (found,) = folder.rglob("*.xplane.pb")
    return found


def test_the_matmul_tops_the_kernels(matmul_trace):
    folder, hlo = matmul_trace
    entry = hlo[hlo.index("\nENTRY"):]
    # the entry instruction that carries the matmul, whatever this backend calls it
    (matmul,) = re.findall(r'%([\w.\-]+) = [^\n]*op_name="jit\(matmul_program\)/dot_general"',
                           entry)
    summary = trace_summary.load(str(folder))
    assert summary.platform == "cpu"
    (name, seconds), = summary.top_kernels(1)
    assert name == matmul
    assert summary.top_kernels(1)[0].count == 3 and seconds > 0
    assert summary.steps().count == 3 and summary.steps().numbers == (0, 1, 2)


def test_kernel_totals_match_an_independent_reading_of_the_trace(matmul_trace):
    folder, _ = matmul_trace
    totals: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    for plane in ProfileData.from_file(str(xplane_file(folder))).planes:
        for line in plane.lines:
            for event in line.events:
                stats = dict(event.stats)
                if "hlo_op" in stats:
                    totals[stats["hlo_op"]] += event.duration_ns / 1e9
                    counts[stats["hlo_op"]] += 1
    kernels = trace_summary.load(str(folder)).top_kernels(1000)
    assert {k.name for k in kernels} == set(totals)
    for kernel in kernels:
        assert kernel.seconds == pytest.approx(totals[kernel.name], rel=0.05)
        assert kernel.count == counts[kernel.name]


def test_breakdown_sums_to_the_window_and_data_scopes_count(matmul_trace):
    summary = trace_summary.load(str(matmul_trace[0]))
    shares = summary.breakdown()
    assert sum(s.fraction for s in shares.values()) == pytest.approx(1.0, abs=1e-6)
    assert sum(s.seconds for s in shares.values()) == pytest.approx(sum(summary.steps().times))
    assert shares["compute"].seconds > 0 and shares["data_loading"].seconds > 0
    assert shares["communication"].seconds == 0  # one device: nothing to communicate


def test_reading_in_small_pieces_gives_the_same_summary(matmul_trace, monkeypatch):
    whole = trace_summary.load(str(matmul_trace[0]))
    monkeypatch.setattr(trace_summary, "PIECE_BYTES", 4096)  # cuts planes and long lines
    pieces = trace_summary.load(str(matmul_trace[0]))
    assert pieces.data.events == whole.data.events
    assert pieces.top_kernels(100) == whole.top_kernels(100)
    assert pieces.steps() == whole.steps()
    for category, share in whole.breakdown().items():
        assert pieces.breakdown()[category].seconds == pytest.approx(share.seconds)


def test_a_file_under_another_name_a_run_folder_and_several_hosts(matmul_trace, tmp_path):
    source = xplane_file(matmul_trace[0])
    renamed = tmp_path / "run_2024_08_27.xplane"
    shutil.copy(source, renamed)
    single = trace_summary.load(str(renamed))
    assert single.top_kernels(5) == trace_summary.load(str(source)).top_kernels(5)
    old = tmp_path / "out" / "profile" / "plugins" / "profile" / "2024_01_01_00_00_00"
    new = old.parent / "2024_08_27_10_00_00"
    for run in (old, new):
        run.mkdir(parents=True)
        shutil.copy(source, run / "host-a.xplane.pb")
    shutil.copy(source, new / "host-b.xplane.pb")
    merged = trace_summary.load(str(tmp_path / "out"))  # a step's output folder
    assert [Path(s).parent.name for s in merged.sources] == [new.name, new.name]
    assert sorted(merged.devices) == ["host-a/cpu:0", "host-b/cpu:0"]
    for one, both in zip(single.top_kernels(5), merged.top_kernels(5), strict=True):
        assert both.name == one.name and both.count == 2 * one.count
        assert both.seconds == pytest.approx(2 * one.seconds)


PSUM = """
import sys, jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P
mesh = jax.make_mesh((4,), ("d",))
@jax.jit
def step(x):
    body = lambda v: jax.lax.psum(jnp.tanh(v @ v.T), "d")
    return jax.shard_map(body, mesh=mesh, in_specs=P("d"), out_specs=P())(x)
x = jax.device_put(jnp.ones((512, 256)), NamedSharding(mesh, P("d")))
step(x).block_until_ready()
with jax.profiler.trace(sys.argv[1]):
    for i in range(3):
        with jax.profiler.StepTraceAnnotation("train", step_num=i):
            step(x).block_until_ready()
"""


@pytest.mark.slow
def test_four_cpu_devices_with_a_psum_show_communication(tmp_path):
    env = {**os.environ, "JAX_PLATFORMS": "cpu",
           "XLA_FLAGS": "--xla_force_host_platform_device_count=4"}
    subprocess.run([sys.executable, "-c", PSUM, str(tmp_path / "trace")], check=True, env=env,
                   timeout=300)
    summary = trace_summary.load(str(tmp_path / "trace"))
    assert summary.devices == ["/cpu:0", "/cpu:1", "/cpu:2", "/cpu:3"]
    assert summary.breakdown()["communication"].fraction > 0
    collectives = [k for k in summary.top_kernels(100) if k.category == "communication"]
    assert collectives and all(k.count == 12 for k in collectives)  # 3 steps x 4 devices


# -- GPU and TPU traces, built through jaxlib's text-proto API -------------------------

def xspace_text(planes: dict[str, dict[str, list[tuple]]]) -> str:
    """An XSpace in protobuf text: {plane: {line: [(event, start_us, dur_us, stats)]}}."""
    out = []
    for plane_id, (plane, lines) in enumerate(planes.items(), 1):
        names, stat_names, body = {}, {}, []
        for line_id, (line, events) in enumerate(lines.items(), 1):
            text = [f'lines {{ id: {line_id} name: "{line}" timestamp_ns: 0']
            for name, start, duration, stats in events:
                meta = names.setdefault(name, len(names) + 1)
                stat_text = []
                for key, value in stats.items():
                    sid = stat_names.setdefault(key, len(stat_names) + 1)
                    kind = "str_value" if isinstance(value, str) else "int64_value"
                    stat_text.append(f"stats {{ metadata_id: {sid} {kind}: {json.dumps(value)} }}")
                text.append(f"events {{ metadata_id: {meta} offset_ps: {int(start * 1e6)} "
                            f"duration_ps: {int(duration * 1e6)} {' '.join(stat_text)} }}")
            body.append(" ".join(text) + " }")
        body += [f'event_metadata {{ key: {i} value {{ id: {i} name: "{n}" }} }}'
                 for n, i in names.items()]
        body += [f'stat_metadata {{ key: {i} value {{ id: {i} name: "{n}" }} }}'
                 for n, i in stat_names.items()]
        out.append(f'planes {{ id: {plane_id} name: "{plane}" {" ".join(body)} }}')
    return "\n".join(out)


def write_xspace(path: Path, planes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(ProfileData.text_proto_to_serialized_xspace(xspace_text(planes)))
    return path


def gpu_trace(path: Path, fusion_us: float = 40) -> Path:
    """Two GPUs; per 100 us step: compute 0-F, an NCCL all-reduce 30-60 on another stream,
    a data wait 60-80 and dispatch 80-85 on the host, nothing after."""
    host = {"python": []}
    devices = {}
    for step in range(2):
        t = 100 * step
        host["python"] += [("train", t, 100, {"step_num": step, "_r": 1}),
                           ("marin.data/wait_for_batch", t + 60, 20, {}),
                           ("PjitFunction(train_step)", t + 80, 5, {})]
    for gpu in range(2):
        compute = [("loop_fusion", 100 * s, fusion_us, {"hlo_op": "fusion.1",
                                                        "hlo_module": "jit_train_step"})
                   for s in range(2)]
        comm = [("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 100 * s + 30, 30,
                 {"hlo_op": "all-reduce-start.1"}) for s in range(2)]
        devices[f"/device:GPU:{gpu}"] = {
            "Stream #7(Compute)": compute, "Stream #13(Nccl)": comm,
            "XLA Modules": [("jit_train_step(1)", 0, 190, {})]}  # a summary line: not ops
    return write_xspace(path, {"/host:CPU": host, **devices})


def test_gpu_planes_streams_and_categories(tmp_path):
    summary = trace_summary.load(str(gpu_trace(tmp_path / "gpu.xplane.pb")))
    assert summary.platform == "gpu"
    assert summary.devices == ["/device:GPU:0", "/device:GPU:1"]
    kernels = {k.name: k for k in summary.top_kernels(10)}
    assert set(kernels) == {"loop_fusion", "ncclDevKernel_AllReduce_Sum_f32_RING_LL"}
    assert kernels["loop_fusion"].count == 4 and kernels["loop_fusion"].category == "compute"
    assert kernels["loop_fusion"].seconds == pytest.approx(160e-6)
    assert kernels["ncclDevKernel_AllReduce_Sum_f32_RING_LL"].category == "communication"
    expected = {"compute": 0.40, "communication": 0.20, "data_loading": 0.20, "host": 0.05,
                "idle": 0.15}
    for category, fraction in expected.items():
        assert summary.breakdown()[category].fraction == pytest.approx(fraction)
    assert summary.overlapped_communication_seconds == pytest.approx(20e-6)  # 10 us x 2
    steps = summary.steps()
    assert steps.count == 2 and steps.steady_median == pytest.approx(100e-6)
    assert {h.id for h in summary.hints()} == {"data-loading", "dominant-kernel"}
    (data_hint,) = [h for h in summary.hints() if h.id == "data-loading"]
    assert data_hint.message.startswith("data loading is 20% of step time (> 10%)")


def test_tpu_xla_ops_line_and_steps_line(tmp_path):
    ops, steps = [], []
    for step in range(2):
        t = 100 * step
        steps.append((str(step), t, 100, {}))
        ops += [("fusion.12", t, 50, {"hlo_category": "convolution fusion"}),
                ("all-reduce.3", t + 50, 20, {"hlo_category": "all-reduce"}),
                ("copy.1", t + 70, 5, {"hlo_category": "data formatting"}),
                ("fusion.7", t + 75, 5, {"hlo_category": "all-gather"})]
    path = write_xspace(tmp_path / "tpu.xplane.pb", {"/device:TPU:0": {
        "XLA Modules": [("jit_step(3)", 0, 180, {})], "XLA Ops": ops, "Steps": steps}})
    summary = trace_summary.load(str(path))
    assert summary.platform == "tpu" and summary.devices == ["/device:TPU:0"]
    assert summary.steps().numbers == (0, 1)
    categories = {k.name: k.category for k in summary.top_kernels(10)}
    assert categories == {"fusion.12": "compute", "all-reduce.3": "communication",
                          "copy.1": "compute", "fusion.7": "communication"}
    shares = summary.breakdown()
    assert shares["compute"].fraction == pytest.approx(0.55)
    assert shares["communication"].fraction == pytest.approx(0.25)
    assert shares["idle"].fraction == pytest.approx(0.20)
    assert {h.id for h in summary.hints()} == {"communication", "dominant-kernel"}  # 100/160


def test_compare_reports_category_and_kernel_deltas(tmp_path):
    before = trace_summary.load(str(gpu_trace(tmp_path / "a" / "t.xplane.pb", fusion_us=40)))
    after = trace_summary.load(str(gpu_trace(tmp_path / "b" / "t.xplane.pb", fusion_us=20)))
    result = before.compare(after)
    # after: compute 0-20, the all-reduce 30-60 fully exposed, idle 20-30 and 85-100
    assert result.categories["compute"]["delta_fraction"] == pytest.approx(-0.20)
    assert result.categories["communication"]["delta_fraction"] == pytest.approx(0.10)
    assert result.categories["idle"]["delta_fraction"] == pytest.approx(0.10)
    assert result.kernels["loop_fusion"]["delta_seconds"] == pytest.approx(-80e-6)
    assert result.kernels["ncclDevKernel_AllReduce_Sum_f32_RING_LL"]["delta_seconds"] == \
        pytest.approx(0)
    json.dumps(result.to_json())


# -- CLI, charts, plugins -------------------------------------------------------------

def test_cli_summarize_json_and_charts(tmp_path, capsys):
    path = gpu_trace(tmp_path / "gpu.xplane.pb")
    html, png = tmp_path / "chart.html", tmp_path / "chart.png"
    assert main(["trace", "summarize", str(path), "--top", "1", "--json", "--html", str(html),
                 "--png", str(png)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["platform"] == "gpu"
    assert list(out["sections"])[:4] == ["kernels", "categories", "steps", "hints"]
    assert [k["name"] for k in out["sections"]["kernels"]["top"]] == ["loop_fusion"]
    assert out["sections"]["categories"]["breakdown"]["data_loading"]["fraction"] == \
        pytest.approx(0.2)
    assert png.read_bytes().startswith(b"\x89PNG") and "plotly" in html.read_text()
    assert main(["trace", "summarize", str(path)]) == 0
    text = capsys.readouterr().out
    assert "loop_fusion" in text and "hint: data loading is 20%" in text
    assert main(["trace", "compare", str(path), str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["categories"]["compute"]["delta_seconds"] == 0


def test_several_traces_give_a_summary_each_in_order(tmp_path, capsys):
    a = gpu_trace(tmp_path / "a" / "t.xplane.pb", fusion_us=40)
    b = gpu_trace(tmp_path / "b" / "t.xplane.pb", fusion_us=20)
    assert main(["trace", "summarize", str(a), str(b), "--json"]) == 0
    documents = json.loads(capsys.readouterr().out)
    assert [d["sources"] for d in documents] == [[str(a)], [str(b)]]
    for document, path in zip(documents, (a, b), strict=True):
        alone = trace_summary.load(str(path)).to_json()
        assert document["sections"]["kernels"] == alone["sections"]["kernels"]
    assert main(["trace", "summarize", str(b), str(a)]) == 0
    text = capsys.readouterr().out
    assert text.count("where the time goes") == 2
    assert text.index(str(b)) < text.index(str(a))


def test_several_traces_fail_together_in_one_line(tmp_path, capsys):
    a = gpu_trace(tmp_path / "a" / "t.xplane.pb")
    missing = tmp_path / "missing.xplane.pb"
    assert main(["trace", "summarize", str(a), str(missing)]) == 2
    out = capsys.readouterr()
    assert out.out == "" and out.err.count("\n") == 1 and str(missing) in out.err
    chart = tmp_path / "chart.html"
    assert main(["trace", "summarize", str(a), str(a), "--html", str(chart)]) == 2
    out = capsys.readouterr()
    assert out.out == "" and out.err.count("\n") == 1
    assert "--html writes the chart of one trace, and 2 were given" in out.err
    assert not chart.exists()


@pytest.mark.slow  # real `marin` processes
def test_a_glob_over_two_versions_of_a_step_summarizes_both(matmul_trace, tmp_path):
    """The documented ``marin trace summarize local_store/train/tiny-*/``, typed in a shell
    where two versions of the step have run."""
    for version in ("tiny-0a1b2c3d", "tiny-4e5f6a7b"):
        shutil.copytree(matmul_trace[0], tmp_path / "local_store" / "train" / version /
                        "profile")
    marin = Path(sys.executable).parent / "marin"
    out = subprocess.run(["bash", "-c", f"{marin} trace summarize local_store/train/tiny-*/"],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path,
                         env={**os.environ, "COLUMNS": "400"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("where the time goes") == 2
    assert out.stdout.index("tiny-0a1b2c3d") < out.stdout.index("tiny-4e5f6a7b")


@pytest.fixture
def analyzer_site(tmp_path, monkeypatch):
    site = tmp_path / "site"
    site.mkdir()
    make_distribution(site, "acme-trace", {"marin.trace_analyzers": {
        "memcpy": "acme_trace:MemcpyAnalyzer"}}, {"acme_trace": """
            class MemcpyAnalyzer:
                def analyze(self, summary):
                    ops = summary.top_kernels(1000)
                    return {"ops": len(ops), "hints": ["acme: no memcpy found"]}
            """})
    make_distribution(site, "acme-broken-trace", {"marin.trace_analyzers": {
        "broken": "acme_broken_trace:Analyzer"}},
        {"acme_broken_trace": "raise ImportError('acme needs libfoo')\n"})
    make_distribution(site, "acme-raising", {"marin.trace_analyzers": {
        "raising": "acme_raising:Analyzer"}}, {"acme_raising": """
            class Analyzer:
                def analyze(self, summary):
                    raise RuntimeError("boom")
            """})
    monkeypatch.syspath_prepend(str(site))
    registry.refresh()
    yield site
    registry.refresh()


def test_third_party_analyzers_add_sections_and_broken_ones_are_isolated(
        analyzer_site, tmp_path, capsys):
    path = gpu_trace(tmp_path / "gpu.xplane.pb")
    summary = trace_summary.load(str(path))
    sections = summary.to_json()["sections"]
    assert sections["memcpy"] == {"ops": 2, "hints": ["acme: no memcpy found"]}
    assert "acme-broken-trace" in sections["broken"]["error"]
    assert "boom" in sections["raising"]["error"]
    assert sections["kernels"]["top"][0]["name"] == "loop_fusion"
    assert len(summary.analyzer_errors) == 2
    assert main(["trace", "summarize", str(path)]) == 0
    captured = capsys.readouterr()
    assert "hint: acme: no memcpy found" in captured.out
    assert "libfoo" in captured.err
    assert main(["plugins", "list", "--json"]) == 0
    listed = {(p["group"], p["name"]): p for p in json.loads(capsys.readouterr().out)}
    assert listed[("marin.trace_analyzers", "memcpy")]["distribution"] == "acme-trace"
    assert listed[("marin.trace_analyzers", "kernels")]["distribution"] == "marin"
    assert listed[("marin.trace_analyzers", "broken")]["status"] == "broken"


# -- storage and bad input -------------------------------------------------------------

@pytest.mark.slow
def test_load_through_gcs(gcs_bucket, matmul_trace):
    local = trace_summary.load(str(matmul_trace[0]))
    source = xplane_file(matmul_trace[0])
    fs = fsspec.filesystem("gs")
    run = f"{gcs_bucket}/train/run-1/profile/plugins/profile/2024_08_27_10_00_00"
    fs.put_file(str(source), f"{run}/host0.xplane.pb")
    fs.put_file(str(source), f"{gcs_bucket}/traces/run_2024_08_27.xplane")
    for url in (f"{gcs_bucket}/traces/run_2024_08_27.xplane", f"{gcs_bucket}/train/run-1"):
        remote = trace_summary.load(url)
        assert remote.top_kernels(5) == local.top_kernels(5)
        assert remote.sources[0].startswith("gs://")


def bad_inputs(tmp_path: Path, source: Path) -> dict[str, Path]:
    data = source.read_bytes()
    cases = {"empty": tmp_path / "empty.xplane.pb", "truncated": tmp_path / "cut.xplane.pb",
             "random": tmp_path / "noise.xplane.pb", "extension": tmp_path / "trace.bin",
             "folder": tmp_path / "nothing"}
    cases["empty"].write_bytes(b"")
    cases["truncated"].write_bytes(data[:len(data) // 2])
    cases["random"].write_bytes(random.Random(0).randbytes(4096))
    cases["extension"].write_bytes(data)
    cases["folder"].mkdir()
    (cases["folder"] / "notes.txt").write_text("no trace here")
    return cases


def test_bad_inputs_give_one_line_errors_naming_the_file(matmul_trace, tmp_path):
    for case, path in bad_inputs(tmp_path, xplane_file(matmul_trace[0])).items():
        with pytest.raises(TraceError) as error:
            trace_summary.load(str(path))
        message = str(error.value)
        assert str(path) in message and "\n" not in message, case
    with pytest.raises(TraceError, match="no such file"):
        trace_summary.load(str(tmp_path / "missing.xplane.pb"))


@pytest.mark.slow  # real `marin` processes
def test_the_cli_exits_2_with_one_line_on_bad_input(matmul_trace, tmp_path):
    cases = bad_inputs(tmp_path, xplane_file(matmul_trace[0]))
    out = subprocess.run([sys.executable, "-m", "marin.cli", "trace", "summarize",
                          str(cases["truncated"])], capture_output=True, text=True, timeout=120,
                         cwd=ROOT, env={**os.environ, "COLUMNS": "400"})
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and str(cases["truncated"]) in out.stderr


# -- the trainer's profile -------------------------------------------------------------

@pytest.mark.slow
def test_a_trainer_run_with_profile_steps_summarizes_its_steps(cache, tmp_path, capsys):
    from marin.training import train_lm
    from tests.helpers.training import tiny_config

    out = tmp_path / "train"
    train_lm(tiny_config(cache, out, train_steps=6, eval_every=0, profile_steps=(2, 5)))
    summary = trace_summary.load(str(out))  # the step's output folder
    steps = summary.steps()
    assert steps.numbers == (2, 3, 4) and all(t > 0 for t in steps.times)
    shares = summary.breakdown()
    assert shares["compute"].seconds > 0
    assert sum(s.fraction for s in shares.values()) == pytest.approx(1.0, abs=1e-6)
    recorded = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    timed = sum(r["throughput/duration"] for r in recorded if r["step"] in (3, 4, 5))
    assert sum(steps.times) >= timed  # a step marker spans the timed part of the step
    assert main(["trace", "summarize", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["sections"]["steps"]["count"] == 3
