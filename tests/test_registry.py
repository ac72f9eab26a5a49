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
from tests.helpers.distributions import make_distribution


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
    make_distribution(site, "acme-exit", {"marin.hardware": {"acme-x4": "acme_exit:X4"}},
                      {"acme_exit": "raise SystemExit(3)\n"})
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
    assert message.endswith("fix or upgrade acme-broken, or uninstall it")
    assert registry.load("hardware", "acme-x3").chip == "X3"
    assert registry.load("hardware", "cpu").platform == "cpu"


def test_a_plugin_that_does_not_fit_its_protocol_is_named(site: Path):
    with pytest.raises(registry.PluginLoadError, match=r"expected a marin.hardware."
                       r"HardwarePreset instance, got dict"):
        registry.load("hardware", "acme-x2")


def test_a_plugin_that_exits_on_import_is_reported_not_obeyed(site: Path):
    with pytest.raises(registry.PluginLoadError, match=r"'acme-x4'.*SystemExit: 3"):
        registry.load("hardware", "acme-x4")
    reports = {(r.spec.name, r.spec.distribution): r.status for r in registry.check_all()}
    assert reports[("acme-x4", "acme-exit")] == "broken"
    assert reports[("acme-x3", "acme-good")] == "ok"


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
    return _run(site, "-m", "marin.cli", *args)


def _run(site: Path | None, *argv: str) -> subprocess.CompletedProcess:
    """This interpreter with ``argv``, ``site`` (an installed plugin set) and the repository
    on its path."""
    path = [str(site)] if site else []
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*path, str(ROOT)])}
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=120)


@pytest.mark.slow  # real `marin` processes
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
    as_json = _marin(site, "plugins", "check", "--json")
    assert as_json.returncode == 1
    report = json.loads(as_json.stdout)
    broken = {(r["group"], r["name"], r["distribution"]): r for r in report["broken"]}
    assert set(broken) == {key for key, st in status.items() if st != "ok"}
    assert any("acme driver missing" in r["error"] for r in broken.values())
    assert report["ok"] == sum(st == "ok" for st in status.values())


def test_plugins_check_passes_on_the_first_party_set_up():
    out = subprocess.run([sys.executable, "-m", "marin.cli", "plugins", "check"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert " 0 broken" in out.stdout


MARIN_GROUPS = ["marin.hardware", "marin.resolvers", "marin.run_observers", "marin.runners",
                "marin.scaling_heuristics", "marin.storage", "marin.trace_analyzers",
                "marin.trackers"]


def _python(code: str, site: Path | None = None) -> subprocess.CompletedProcess:
    return _run(site, "-c", textwrap.dedent(code))


def test_every_group_is_listed_before_its_owner_is_imported_and_declared_on_first_load():
    out = _python("""
        import json, sys
        from marin import registry
        listed = {g: registry.names(g) for g in registry.groups()}
        owners = sorted(m for m in registry.OWNERS.values() if m in sys.modules)
        memory = registry.load("storage", "memory")
        print(json.dumps({"groups": registry.groups(), "listed": listed,
                          "owners_imported_by_listing": owners,
                          "storage_imported_by_load": "marin.storage" in sys.modules,
                          "memory": memory.__name__}))
    """)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["groups"] == MARIN_GROUPS
    assert "file" in result["listed"]["marin.storage"]
    assert {"iris", "http"} <= set(result["listed"]["marin.resolvers"])
    assert {"kernels", "hints"} <= set(result["listed"]["marin.trace_analyzers"])
    assert "step_states" in result["listed"]["marin.run_observers"]
    assert {"json", "tensorboard", "wandb"} <= set(result["listed"]["marin.trackers"])
    assert result["owners_imported_by_listing"] == []
    assert result["storage_imported_by_load"] and result["memory"] == "MemoryStorage"


def test_each_owner_declares_its_group_with_its_protocol():
    out = _python("""
        import json
        from marin import registry
        expected = {g: registry.group_spec(g).expected for g in registry.groups()}
        print(json.dumps(expected))
    """)
    assert out.returncode == 0, out.stderr
    expected = json.loads(out.stdout)
    assert sorted(expected) == MARIN_GROUPS
    assert "HardwarePreset" in expected["marin.hardware"]
    assert "marin.storage.Storage" in expected["marin.storage"]
    assert "analyze(summary)" in expected["marin.trace_analyzers"]
    assert "resolve(url)" in expected["marin.resolvers"]


def test_a_third_party_declares_its_own_group(tmp_path: Path):
    site = tmp_path / "site"
    site.mkdir()
    make_distribution(site, "acme-widgets", {"acme.widgets": {"spinner": "acme_widgets:Spin",
                                                              "rock": "acme_widgets:Rock"}},
                      {"acme_widgets": """
                          from marin import registry
                          registry.declare_group("acme.widgets", expected="an object with spin()",
                                                 fits=registry.has_methods("spin"))
                          class Spin:
                              def spin(self):
                                  return "whirr"
                          Rock = object()
                          """})
    out = _python("""
        import json
        from marin import registry
        assert "acme.widgets" not in registry.groups()
        import acme_widgets
        spinner = registry.load("acme.widgets", "spinner")
        try:
            registry.load("acme.widgets", "rock")
            error = None
        except registry.PluginLoadError as e:
            error = str(e)
        reports = {r.spec.name: r.status for r in registry.check_all()}
        print(json.dumps({"spin": spinner().spin(), "error": error, "reports": reports}))
    """, site)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["spin"] == "whirr"
    assert result["error"].startswith("plugin 'rock' in group acme.widgets (entry point "
                                      "'acme_widgets:Rock' of distribution acme-widgets 1.2.3) "
                                      "does not fit its group: expected an object with spin()")
    assert result["error"].endswith("; point the entry point at such an object, or uninstall "
                                    "acme-widgets")
    assert result["reports"]["spinner"] == "ok" and result["reports"]["rock"] == "broken"
    assert result["reports"]["memory"] == "ok"
