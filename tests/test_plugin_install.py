"""A third-party plugin installed with pip into a fresh virtual environment is found."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

from marin import registry
from tests.conftest import ROOT

pytestmark = pytest.mark.slow

EXAMPLE = ROOT / "plugins" / "examples" / "marin-example-l4"


def test_pip_install_into_a_fresh_venv_makes_the_plugin_appear(tmp_path: Path):
    assert "gpu-l4" not in registry.names("hardware")  # not part of the standard set-up
    env_dir = tmp_path / "fresh"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()"
                           "['purelib'])"], capture_output=True, text=True, check=True
                          ).stdout.strip()
    # marin itself (and what it needs) comes from the project's environment; the plugin
    # under test is installed into the fresh one by pip.
    base = sysconfig.get_paths()["purelib"]
    Path(site, "marin_base.pth").write_text(f"import site; site.addsitedir({base!r})\n")
    wheels = tmp_path / "wheels"
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
                            "--disable-pip-version-check", "-w", str(wheels), str(EXAMPLE)],
                           capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stdout + build.stderr
    install = subprocess.run([str(python), "-m", "pip", "install", "--no-deps", "--no-index",
                              "--disable-pip-version-check", "-q",
                              *map(str, wheels.glob("*.whl"))],
                             capture_output=True, text=True, timeout=300)
    assert install.returncode == 0, install.stdout + install.stderr
    assert list(Path(site).glob("marin_example_l4-*.dist-info"))
    out = subprocess.run([str(python), "-m", "marin.cli", "plugins", "list", "--json"],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    rows = {(r["group"], r["name"]): r for r in json.loads(out.stdout)}
    l4 = rows[("marin.hardware", "gpu-l4")]
    assert (l4["distribution"], l4["version"], l4["status"]) == ("marin-example-l4", "0.1.0",
                                                                  "ok")
    show = subprocess.run([str(python), "-m", "marin.cli", "hardware", "show", "--hardware",
                           "gpu-l4", "--json"], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)
    assert show.returncode == 0, show.stderr
    assert json.loads(show.stdout)["preset"]["peak_bf16_flops"] == 121e12
    assert sys.prefix != str(env_dir)
