"""Validating XLA flags against the installed jaxlib.

    known, unknown = validate_xla_flags(("--xla_gpu_enable_latency_hiding_scheduler=true",
                                         "--xla_gpu_enable_async_all_gather=true"))
    # unknown == ("--xla_gpu_enable_async_all_gather=true",): removed upstream

XLA aborts the whole process on a flag it does not know, and lists every unknown flag in
that message. So one subprocess that starts JAX with the flags finds them all; the answer is
cached per jaxlib version in ``~/.cache/marin/xla_flags.json``.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

from marin._cache_dir import cache_dir

_UNKNOWN = re.compile(r"Unknown flags? in XLA_FLAGS: (.*)")
_PROBE = "import jax; jax.devices()"


class FlagProbeError(RuntimeError):
    """The probe could not tell which flags are known (jax missing, or another crash)."""


def cache_file() -> Path:
    return cache_dir() / "xla_flags.json"


def jaxlib_version() -> str | None:
    try:
        return metadata.version("jaxlib")
    except metadata.PackageNotFoundError:
        return None


def validate_xla_flags(flags: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Split ``flags`` into those the installed jaxlib knows and those it does not."""
    if not flags:
        return (), ()
    unknown = set(_unknown_flags(tuple(sorted(set(flags)))))
    return (tuple(f for f in flags if f not in unknown),
            tuple(f for f in flags if f in unknown))


@functools.lru_cache(maxsize=64)
def _unknown_flags(flags: tuple[str, ...]) -> tuple[str, ...]:
    version = jaxlib_version()
    if version is None:
        raise FlagProbeError("jaxlib is not installed, so XLA flags cannot be validated")
    path = cache_file()
    cache = _read_cache(path)
    key = f"{version}|{' '.join(flags)}"
    if key in cache:
        return tuple(cache[key])
    unknown = _probe(flags)
    cache[key] = list(unknown)
    _write_cache(path, cache)
    return unknown


def _probe(flags: tuple[str, ...]) -> tuple[str, ...]:
    env = dict(os.environ, XLA_FLAGS=" ".join(flags), JAX_PLATFORMS="cpu")
    env.pop("LIBTPU_INIT_ARGS", None)
    out = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True,
                         text=True, timeout=120, check=False)
    if out.returncode == 0:
        return ()
    match = _UNKNOWN.search(out.stderr)
    if match is None:
        tail = out.stderr.strip().splitlines()[-1:] or ["no output"]
        raise FlagProbeError(f"probing XLA flags failed (exit {out.returncode}): {tail[0]}")
    named = match.group(1).split()
    return tuple(f for f in flags if any(f == n or f.split("=")[0] == n.split("=")[0]
                                         for n in named))


def _read_cache(path: Path) -> dict[str, list[str]]:
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _write_cache(path: Path, cache: dict[str, list[str]]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(cache, indent=1))
        os.replace(tmp, path)
    except OSError:
        pass  # a cache that cannot be written only costs a probe next time
