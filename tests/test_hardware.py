"""Hardware presets: published figures, flag validation, applying before JAX starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from marin.hardware import HardwarePreset, get_preset, plan_preset, preset_names
from marin.hardware.flags import validate_xla_flags
from tests.conftest import ROOT

# Peak dense bf16 FLOP/s per chip that Levanter uses for MFU (the design's table).
LEVANTER_PEAKS = {"gpu-h100": 989.5e12, "gpu-h200": 989.5e12, "gpu-a100": 312e12,
                  "tpu-v4": 275e12, "tpu-v5e": 197e12, "tpu-v5p": 459e12, "tpu-v6e": 918e12}


def test_every_required_preset_is_installed_with_published_peaks():
    assert {"cpu", *LEVANTER_PEAKS} <= set(preset_names())
    for name, peak in LEVANTER_PEAKS.items():
        preset = get_preset(name)
        assert preset.peak_bf16_flops == peak
        assert preset.memory_bytes > 0 and preset.batch_size_advice
    assert get_preset("gpu-h200").memory_bytes > get_preset("gpu-h100").memory_bytes
    assert "--xla_tpu_scoped_vmem_limit_kib=98304" in get_preset("tpu-v6e").libtpu_init_args


def test_the_gpu_flags_are_all_known_to_the_installed_jaxlib():
    known, unknown = validate_xla_flags(get_preset("gpu-h200").xla_flags)
    assert unknown == ()
    assert len(known) == len(get_preset("gpu-h200").xla_flags)


def test_unknown_flags_are_dropped_and_reported_not_fatal():
    preset = HardwarePreset(
        name="test-gpu", platform="gpu", chip="T", peak_bf16_flops=1.0, memory_bytes=1.0,
        xla_flags=("--xla_gpu_enable_latency_hiding_scheduler=true",
                   "--xla_gpu_enable_async_all_gather=true",  # removed upstream
                   "--xla_marin_no_such_flag=1"))
    applied = plan_preset(preset, environ={})
    assert applied.dropped_flags == ["--xla_gpu_enable_async_all_gather=true",
                                     "--xla_marin_no_such_flag=1"]
    assert applied.xla_flags == ["--xla_gpu_enable_latency_hiding_scheduler=true"]
    # With the survivors, JAX starts; with the originals, XLA aborts the process.
    ok = _jax_with_flags(applied.xla_flags)
    assert ok.returncode == 0, ok.stderr
    crash = _jax_with_flags(list(preset.xla_flags))
    assert crash.returncode != 0 and "Unknown flags in XLA_FLAGS" in crash.stderr


def _jax_with_flags(flags: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "XLA_FLAGS": " ".join(flags), "JAX_PLATFORMS": "cpu"}
    return subprocess.run([sys.executable, "-c", "import jax; print(jax.devices())"],
                          env=env, capture_output=True, text=True, timeout=120)


def test_flag_probe_results_are_cached(tmp_path, monkeypatch):
    from marin.hardware import flags

    monkeypatch.setenv("MARIN_CACHE_DIR", str(tmp_path))
    flags._unknown_flags.cache_clear()
    validate_xla_flags(("--xla_gpu_triton_gemm_any=True", "--xla_marin_bogus=2"))
    cache = json.loads((tmp_path / "xla_flags.json").read_text())
    [(key, unknown)] = cache.items()
    assert unknown == ["--xla_marin_bogus=2"] and key.startswith(flags.jaxlib_version())
    calls = []
    monkeypatch.setattr(flags, "_probe", lambda f: calls.append(f) or ())
    flags._unknown_flags.cache_clear()
    assert validate_xla_flags(("--xla_gpu_triton_gemm_any=True", "--xla_marin_bogus=2"))[1] \
        == ("--xla_marin_bogus=2",)
    assert calls == []  # answered from the file cache


APPLY_AFTER_START = """
import jax
jax.devices()
from marin.hardware import apply_preset, get_preset, HardwareError
try:
    apply_preset(get_preset("gpu-h100"))
except HardwareError as e:
    print("REFUSED", e)
"""

APPLY_BEFORE_START = """
import os
from marin.hardware import apply_preset, get_preset
applied = apply_preset(get_preset("gpu-h100"))
import jax
jax.devices()
print(os.environ["XLA_FLAGS"])
print(os.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"])
"""


def test_a_preset_must_be_applied_before_jax_starts():
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    env.pop("XLA_FLAGS", None)
    env.pop("XLA_PYTHON_CLIENT_MEM_FRACTION", None)
    late = subprocess.run([sys.executable, "-c", APPLY_AFTER_START], capture_output=True,
                          text=True, env=env, timeout=120)
    assert "REFUSED cannot apply hardware preset 'gpu-h100': JAX has already initialised" \
        in late.stdout, late.stderr
    early = subprocess.run([sys.executable, "-c", APPLY_BEFORE_START], capture_output=True,
                           text=True, env=env, timeout=120)
    assert early.returncode == 0, early.stderr
    flags_line, fraction = early.stdout.strip().splitlines()
    assert "--xla_gpu_enable_latency_hiding_scheduler=true" in flags_line
    assert fraction == "0.9"


def test_user_flags_win_over_preset_flags():
    user = {"XLA_FLAGS": "--xla_gpu_enable_latency_hiding_scheduler=false",
            "XLA_PYTHON_CLIENT_MEM_FRACTION": "0.5"}
    applied = plan_preset(get_preset("gpu-h200"), environ=user)
    assert applied.xla_flags[0] == "--xla_gpu_enable_latency_hiding_scheduler=false"
    assert "--xla_gpu_enable_latency_hiding_scheduler=true" not in applied.xla_flags
    assert "XLA_PYTHON_CLIENT_MEM_FRACTION" not in applied.env


def test_hardware_show_json_reports_devices_and_the_preset():
    out = subprocess.run([sys.executable, "-m", "marin.cli", "hardware", "show", "--json"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120,
                         env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["backend"] == "cpu" and report["devices"][0]["platform"] == "cpu"
    assert report["preset"]["name"] == "cpu"
    chosen = subprocess.run([sys.executable, "-m", "marin.cli", "hardware", "show",
                             "--hardware", "gpu-h9000"], capture_output=True, text=True,
                            cwd=ROOT, timeout=120)
    assert chosen.returncode == 2
    assert "no marin.hardware plugin named 'gpu-h9000'; available:" in chosen.stderr


@pytest.mark.parametrize("flag", ["xla_no_dashes", "-x"])
def test_presets_refuse_malformed_flags(flag):
    with pytest.raises(ValueError, match="must start with '--'"):
        HardwarePreset(name="bad", platform="gpu", chip="x", peak_bf16_flops=1,
                       memory_bytes=1, xla_flags=(flag,))
