#!/usr/bin/env python3
"""Set up a virtual environment and run marin's main job or its test suite.

    python3 dev.py run     # installs what it needs, then runs the example experiment
    python3 dev.py test    # installs what it needs, then runs every test
    python3 dev.py marin executor --dry-run experiments/hello_pipeline.py   # any marin command
    python3 dev.py python experiments/hello_pipeline.py --dry_run true      # the venv's python
    python3 dev.py --help                                                   # this text

Only the standard library is used here, so this works on a machine that has nothing but
Python 3.11 or 3.12. The environment lives in `.venv/` and is reinstalled whenever a
`pyproject.toml` of the project or of a first-party plugin changes.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
STAMP = VENV / ".marin-install-stamp"
INSTALL_LOG = VENV / "install.log"
MAIN_EXPERIMENT = "experiments/isoflop_tiny.py"


def _venv_python() -> Path:
    return VENV / "bin" / "python"


def _install_inputs() -> list[Path]:
    return [ROOT / "pyproject.toml", *sorted(ROOT.glob("plugins/*/pyproject.toml"))]


def _install_fingerprint() -> str:
    digest = hashlib.sha256()
    for path in _install_inputs():
        digest.update(str(path.relative_to(ROOT)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def ensure_environment() -> Path:
    if sys.version_info[:2] not in ((3, 11), (3, 12)):
        sys.exit(f"marin needs Python 3.11 or 3.12; this is {sys.version.split()[0]}")
    fingerprint = _install_fingerprint()
    if STAMP.exists() and STAMP.read_text() == fingerprint and _venv_python().exists():
        return _venv_python()
    if not _venv_python().exists():
        print(f"creating virtual environment in {VENV}", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
    python = str(_venv_python())
    pip = [python, "-m", "pip", "install", "--disable-pip-version-check"]
    plugins = [f"{p.parent}" for p in _install_inputs()[1:]]
    print(f"installing marin, its first-party plugins and their dependencies "
          f"(log: {INSTALL_LOG.relative_to(ROOT)})", flush=True)
    with INSTALL_LOG.open("w") as log:
        for command in ([*pip, "--upgrade", "pip"],
                        [*pip, "-e", f"{ROOT}[test]",
                         *[arg for p in plugins for arg in ("-e", p)]]):
            log.write(f"$ {' '.join(command)}\n")
            log.flush()
            if subprocess.run(command, stdout=log, stderr=subprocess.STDOUT).returncode:
                tail = INSTALL_LOG.read_text().splitlines()[-15:]
                sys.exit("\n".join(["installation failed; the end of its log:", *tail,
                                    f"full log: {INSTALL_LOG}"]))
    STAMP.write_text(fingerprint)
    print("installed", flush=True)
    return _venv_python()


COMMANDS = ("run", "test", "marin", "python")


def main(argv: list[str]) -> int:
    if argv[:1] in (["-h"], ["--help"]):
        print(__doc__)
        return 0
    if not argv or argv[0] not in COMMANDS:
        if argv:
            print(f"dev.py: unknown command {argv[0]!r}; commands are: {', '.join(COMMANDS)}",
                  file=sys.stderr)
        print(__doc__)
        return 2
    python = str(ensure_environment())
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if argv[0] == "run":
        command = [python, MAIN_EXPERIMENT, *argv[1:]]
    elif argv[0] == "marin":
        command = [python, "-m", "marin.cli", *argv[1:]]
    elif argv[0] == "python":
        command = [python, *argv[1:]]
    else:
        command = [python, "-m", "pytest", *argv[1:]]
    return subprocess.run(command, cwd=ROOT, env=env).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
