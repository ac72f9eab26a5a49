#!/usr/bin/env python3
"""Set up a virtual environment and run marin's main job or its test suite.

    python3 dev.py run     # installs what it needs, then runs the example experiment
    python3 dev.py test    # installs what it needs, then runs every test
    python3 dev.py test --fast            # the fast lane: every test not marked slow
    python3.12 dev.py test --newest-jax   # the newest-JAX subset, in .venv-jax-newest/
    python3.12 dev.py test --jax 0.11.2   # the same subset on one JAX release
    python3 dev.py marin executor --dry-run experiments/hello_pipeline.py   # any marin command
    python3 dev.py python experiments/hello_pipeline.py --dry_run true      # the venv's python
    python3 dev.py --help                                                   # this text

Only the standard library is used here, so this works on a machine that has nothing but
Python 3.11 or 3.12. The environment lives in `.venv/` (Python 3.12's in `.venv-3.12/`, so
the two never share one) and is reinstalled whenever a `pyproject.toml` of the project or of
a first-party plugin changes.

`test --fast` runs the suite without the tests marked `slow` (pytest's `-m "not slow"`: the
real studies, trainings, processes and servers, and the documentation's blocks); `test`
alone runs all of them, as CI does.

`test --newest-jax` (Python 3.12 only: 3.11 keeps jax 0.10.2) runs `NEWEST_JAX_TESTS`, the
tests of training, checkpoints, profiling and the study, against the newest JAX that
pyproject.toml admits, in an environment of its own without torch (only the Hugging Face
export's test needs it); `--jax VERSION` pins one release instead, such as a GPU image's.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
# One environment per Python: a 3.12 run must not reinstall 3.11's, nor run in it.
VENV = ROOT / (".venv" if sys.version_info[:2] != (3, 12) else ".venv-3.12")
FAST = ("-m", "not slow")  # what `test --fast` passes to pytest
MAIN_EXPERIMENT = "experiments/isoflop_tiny.py"

# The tests `test --newest-jax` runs: training, checkpoints, profiling and the study, within
# about four minutes on two cores.
NEWEST_JAX_TESTS = (
    "tests/test_jax_compat.py",
    "tests/test_training.py",
    "tests/test_checkpoint.py",
    "tests/test_profiling.py",
    "tests/test_isoflop_study.py",
)


def _venv_python(venv_dir: Path) -> Path:
    return venv_dir / "bin" / "python"


def _install_inputs() -> list[Path]:
    return [ROOT / "pyproject.toml", *sorted(ROOT.glob("plugins/*/pyproject.toml"))]


def _install_fingerprint() -> str:
    digest = hashlib.sha256()
    for path in _install_inputs():
        digest.update(str(path.relative_to(ROOT)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def ensure_environment(venv_dir: Path = VENV, extra: str = "test",
                       pins: tuple[str, ...] = ()) -> Path:
    """The environment in `venv_dir` with marin[extra], its plugins and `pins` installed."""
    if sys.version_info[:2] not in ((3, 11), (3, 12)):
        sys.exit(f"marin needs Python 3.11 or 3.12; this is {sys.version.split()[0]}")
    stamp, install_log = venv_dir / ".marin-install-stamp", venv_dir / "install.log"
    fingerprint = _install_fingerprint() + " ".join(pins)
    if stamp.exists() and stamp.read_text() == fingerprint and _venv_python(venv_dir).exists():
        return _venv_python(venv_dir)
    if not _venv_python(venv_dir).exists():
        print(f"creating virtual environment in {venv_dir}", flush=True)
        venv.EnvBuilder(with_pip=True).create(venv_dir)
    python = str(_venv_python(venv_dir))
    pip = [python, "-m", "pip", "install", "--disable-pip-version-check"]
    plugins = [f"{p.parent}" for p in _install_inputs()[1:]]
    print(f"installing marin, its first-party plugins and their dependencies "
          f"(log: {install_log.relative_to(ROOT)})", flush=True)
    with install_log.open("w") as log:
        for command in ([*pip, "--upgrade", "pip"],
                        [*pip, "-e", f"{ROOT}[{extra}]", *pins,
                         *[arg for p in plugins for arg in ("-e", p)]]):
            log.write(f"$ {' '.join(command)}\n")
            log.flush()
            if subprocess.run(command, stdout=log, stderr=subprocess.STDOUT).returncode:
                tail = install_log.read_text().splitlines()[-15:]
                sys.exit("\n".join(["installation failed; the end of its log:", *tail,
                                    f"full log: {install_log}"]))
    stamp.write_text(fingerprint)
    print("installed", flush=True)
    return _venv_python(venv_dir)


def _jax_subset(args: list[str]) -> tuple[Path, tuple[str, ...], list[str]] | None:
    """For `test --newest-jax` or `test --jax VERSION`: the environment's folder, what pip
    installs besides marin, and pytest's arguments; None for a plain `test`."""
    flag = args[0] if args else ""
    if flag == "--newest-jax":
        name, pins, rest = "newest", ("--upgrade", "jax", "jaxlib"), args[1:]
    elif flag == "--jax":
        if len(args) < 2 or args[1].startswith("-"):
            sys.exit("dev.py: --jax needs a release after it, such as --jax 0.11.2")
        name, pins, rest = args[1], (f"jax=={args[1]}", f"jaxlib=={args[1]}"), args[2:]
    else:
        return None
    if sys.version_info[:2] != (3, 12):
        sys.exit(f"dev.py: test {flag} needs Python 3.12 (this is {sys.version.split()[0]}, "
                 f"which keeps jax 0.10.2); run it with python3.12")
    return ROOT / f".venv-jax-{name}", pins, [*NEWEST_JAX_TESTS, *rest]


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
    subset = _jax_subset(argv[1:]) if argv[0] == "test" else None
    if subset:
        venv_dir, pins, pytest_args = subset
        python = str(ensure_environment(venv_dir, "test-core", pins))
        argv = ["test", *pytest_args]
    else:
        python = str(ensure_environment())
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if argv[0] == "run":
        command = [python, MAIN_EXPERIMENT, *argv[1:]]
    elif argv[0] == "marin":
        command = [python, "-m", "marin.cli", *argv[1:]]
    elif argv[0] == "python":
        command = [python, *argv[1:]]
    elif argv[1:2] == ["--fast"]:
        command = [python, "-m", "pytest", *FAST, *argv[2:]]
    else:
        command = [python, "-m", "pytest", *argv[1:]]
    return subprocess.run(command, cwd=ROOT, env=env).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
