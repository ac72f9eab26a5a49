"""Find the XPlane files behind a URL: a file, a profile folder, or a step's output.

    fs, files = resolve("gs://bucket/train/run-1234")
    # files: [".../profile/plugins/profile/<run>/host.xplane.pb"]

``jax.profiler`` writes ``<dir>/plugins/profile/<run>/<host>.xplane.pb``, one file per host
and one ``<run>`` folder (named by its start time) per capture. A folder resolves to the
newest run found under it (every host's file of that run); a trainer step's output folder
resolves through its ``profile/`` folder.
"""

from __future__ import annotations

import posixpath
from typing import Any

from marin.storage import StorageError
from marin.storage.files import url_to_fs

XPLANE_SUFFIXES = (".xplane.pb", ".xplane", ".pb")
# Where runs are looked for under a folder, nearest first.
_RUN_GLOBS = ("*.xplane.pb", "*/*.xplane.pb", "plugins/profile/*/*.xplane.pb",
              "profile/plugins/profile/*/*.xplane.pb")


class TraceError(ValueError):
    """A trace cannot be read; the message names the file or URL and what to pass instead."""


def resolve(url: str) -> tuple[Any, list[str]]:
    """The filesystem and the XPlane files (the newest run's, every host) behind ``url``."""
    try:
        fs, path = url_to_fs(url)
    except (ValueError, ImportError, StorageError) as e:
        raise TraceError(f"cannot open {url}: {e}") from None
    try:
        info = fs.info(path)
    except FileNotFoundError:
        raise TraceError(f"{url}: no such file or folder") from None
    except OSError as e:
        raise TraceError(f"cannot read {url}: {e}") from None
    if info.get("type") == "directory":
        return fs, _newest_run(fs, path, url)
    if not path.endswith(XPLANE_SUFFIXES):
        hint = " (a Chrome trace: pass the .xplane.pb beside it)" if ".json" in path else ""
        raise TraceError(f"{url}: not an XPlane trace{hint}; pass a .xplane.pb (or .xplane) "
                         "file, a profile folder, or a training step's output folder")
    return fs, [path]


def _newest_run(fs: Any, path: str, url: str) -> list[str]:
    for pattern in _RUN_GLOBS:
        found = sorted(fs.glob(posixpath.join(path, pattern)))
        if found:
            runs: dict[str, list[str]] = {}
            for file in found:
                runs.setdefault(posixpath.dirname(file), []).append(file)
            return runs[max(runs)]  # run folders are named by time, YYYY_MM_DD_HH_MM_SS
    raise TraceError(f"{url}: no XPlane trace in this folder (looked for *.xplane.pb, "
                     "plugins/profile/<run>/*.xplane.pb and profile/plugins/profile/...); "
                     "run the training step with profile_steps=(a, b), or pass the file")


def host_of(path: str) -> str:
    """The host name in a ``<host>.xplane.pb`` file name."""
    name = posixpath.basename(path)
    for suffix in XPLANE_SUFFIXES:
        if name.endswith(suffix):
            return name[:-len(suffix)] or name
    return name
