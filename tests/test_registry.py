"""The plugin registry, with real distributions (dist-info folders, as pip writes them)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from marin import registry
from tests.conftest import ROOT


def make_distribution(site: Path, name: str, entry_points: dict[str, dict[str, str]],
                      modules: dict[str, str]) -> None:
    """Write an installed distribution: modules plus a dist-info with entry points."""
    info = site / f"{name.replace('-', '_')}-1.2.3.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.2.3\n")
    lines = []
    for group, items in entry_points.items():
        lines.append(f"[{group}]")
        lines.extend(f"{k} = {v}" for k, v in items.items())
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    for module, source in modules.items():
        (site / f"{module}.py").write_text(textwrap.dedent(source))


@pytest.fixture
def site(tmp_path: Path, monkeypatch) -> Path:
    site = tmp_path / "site"
    site.mkdir()
    make_distribution(site, "acme-broken", {"marin.hardware": {"acme-x1": "acme_broken:X1"}},
                      {"acme_broken": "raise RuntimeError('acme driver missing')\n"})
    make_distribution(site, "acme-wrong", {"marin.hardware": {"acme-x2": "acme_wrong:X2"}},
                      {"acme_wrong": "X2 = {'peak': 1}\n"})
    make_distribution(site, "acme-good", {"marin.hardware": {"acme-x3": "acme_good:X3"}},
                      {"acme_good": """
                          from marin.hardware import HardwarePreset
                          X3 = HardwarePreset(name='acme-x3', platform='gpu', chip='X3',
                                              peak_bf16_flops=1e15, memory_bytes=1e11)
                          """})
    for dist in ("dup-one", "dup-two"):
        module = dist.replace("-", "_")
        make_distribution(site, dist, {"marin.hardware": {"gpu-h100": f"{module}:P"}},
                          {module: "P = None\n"})
    monkeypatch.syspath_prepend(str(site))
    registry.refresh()
    yield site
    registry.refresh()


def test_listing_imports_nothing(site: Path):
    names = registry.names("hardware")
    assert {"acme-x1", "acme-x2", "acme-x3", "cpu", "gpu-h200"} <= set(names)
    assert "acme_broken" not in sys.modules and "acme_good" not in sys.modules


def test_a_plugin_that_raises_on_import_is_one_clear_error_and_spares_the_others(site: Path):
    with pytest.raises(registry.PluginLoadError) as info:
        registry.load("hardware", "acme-x1")
    message = str(info.value)
    assert "'acme-x1'" in message and "acme_broken:X1" in message
    assert "distribution acme-broken 1.2.3" in message
    assert "RuntimeError: acme driver missing" in message
    assert registry.load("hardware", "acme-x3").chip == "X3"
    assert registry.load("hardware", "cpu").platform == "cpu"


def test_a_plugin_that_does_not_fit_its_protocol_is_named(site: Path):
    with pytest.raises(registry.PluginLoadError, match=r"expected a marin.hardware."
                       r"HardwarePreset instance, got dict"):
        registry.load("hardware", "acme-x2")


def test_a_duplicate_name_names_both_distributions(site: Path):
    with pytest.raises(registry.DuplicatePluginError) as info:
        registry.load("hardware", "gpu-h100")
    message = str(info.value)
    assert "marin-gpu 0.1.0" in message and "dup-one 1.2.3" in message
    assert "dup-two 1.2.3" in message


def test_an_unknown_name_lists_what_is_available(site: Path):
    with pytest.raises(registry.PluginNotFoundError, match=r"no marin.hardware plugin named "
                       r"'gpu-z9'; available: .*gpu-h200"):
        registry.load("hardware", "gpu-z9")


def _marin(site: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
    return subprocess.run([sys.executable, "-m", "marin.cli", *args], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=120)


def test_plugins_list_and_check_on_the_command_line(site: Path):
    out = _marin(site, "plugins", "list", "--json")
    assert out.returncode == 0, out.stderr
    status = {(r["group"], r["name"], r["distribution"]): r["status"]
              for r in json.loads(out.stdout)}
    assert status[("marin.hardware", "acme-x1", "acme-broken")] == "broken"
    assert status[("marin.hardware", "acme-x3", "acme-good")] == "ok"
    assert status[("marin.hardware", "gpu-h100", "dup-one")] == "duplicate"
    for first_party in [("marin.storage", "gs", "marin-gcs"), ("marin.storage", "s3", "marin-s3"),
                        ("marin.runners", "ray", "marin-ray"),
                        ("marin.hardware", "tpu-v6e", "marin-tpu"),
                        ("marin.hardware", "cpu", "marin")]:
        assert status[first_party] == "ok", first_party
    check = _marin(site, "plugins", "check")
    assert check.returncode == 1
    assert "acme driver missing" in check.stdout


def test_plugins_check_passes_on_the_first_party_set_up():
    out = subprocess.run([sys.executable, "-m", "marin.cli", "plugins", "check"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert " 0 broken" in out.stdout
