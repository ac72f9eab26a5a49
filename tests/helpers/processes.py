"""The ``marin`` command for tests that signal it, started as a terminal's foreground job.

    proc = subprocess.Popen([*marin_command(), "executor", "--prefix", p, EXPERIMENT])
    proc.send_signal(signal.SIGINT)                        # handled as Ctrl-C
    nohup = marin_command(ignoring=(signal.SIGHUP,))       # started as ``nohup marin`` is
    wait_stopped(proc)                                     # until it stopped itself (SIGSTOP)
    line = one_line_error(subprocess.run([...], capture_output=True, text=True), "--flag")

A process inherits the signals its parent ignores, and Python installs its Ctrl-C handler
only when SIGINT is not ignored at start. A test suite run in the background (``cmd &`` in a
script, ``nohup``) would otherwise start every executor with SIGINT or SIGHUP ignored, and a
test of Ctrl-C would wait forever. ``marin_command`` gives INT, TERM and HUP their default
handling first, then ignores the signals in ``ignoring``.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

_PROGRAM = """
import signal
signal.signal(signal.SIGINT, signal.default_int_handler)
for number in (signal.SIGTERM, signal.SIGHUP):
    signal.signal(number, signal.SIG_DFL)
for number in ({ignored}):
    signal.signal(number, signal.SIG_IGN)
from marin.cli import run
run()
"""


def marin_command(ignoring: Iterable[int] = ()) -> list[str]:
    """``python -c PROGRAM``, which runs the ``marin`` console script with the arguments that
    follow it."""
    ignored = "".join(f"{int(s)}, " for s in ignoring)
    return [sys.executable, "-c", _PROGRAM.format(ignored=ignored)]


def wait_stopped(proc: subprocess.Popen, timeout: float = 60) -> None:
    """Until ``proc`` is stopped (SIGSTOP): state ``T`` in /proc."""
    deadline = time.monotonic() + timeout
    while Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "T":
        assert proc.poll() is None, f"the executor exited early: {proc.communicate()}"
        assert time.monotonic() < deadline, "the executor never stopped"
        time.sleep(0.02)


def one_line_error(out: subprocess.CompletedProcess, *words: str) -> str:
    """The one line of a refusal with exit status 2 (nothing else on stderr), which names
    each of ``words``."""
    assert out.returncode == 2, out.stdout + out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]
