"""Which checkpoints a checkpoints folder holds, from its listing alone (no JAX, no orbax).

    complete_checkpoints("out/checkpoints")   # [(10, "out/checkpoints/step_00000010"), ...]
    latest_checkpoint("out/checkpoints")      # the newest complete one's folder, or None
    step_folder("out/checkpoints", 10)        # "out/checkpoints/step_00000010"

A checkpoint counts once it is complete: on a local disk its folder has its final name, on
GCS it holds orbax's commit marker, on s3:// ``COMPLETE``; a step published to a shared
folder (``step_N.ref``, ``marin.execution.shared``) counts once the folder it names does.
"""

from __future__ import annotations

import json
import re

from marin.execution.shared import MARKER_SUFFIX, RUNS
from marin.storage.files import join_url, normalize_url, url_to_fs

__all__ = ["COMPLETE", "PREFIX", "complete_checkpoints", "latest_checkpoint", "step_folder"]

PREFIX = "step"
COMPLETE = "COMPLETE"  # the commit marker of an s3:// checkpoint
_STEP = re.compile(rf"^{PREFIX}_(\d+)$")
_MARKER = re.compile(rf"^{PREFIX}_(\d+){re.escape(MARKER_SUFFIX)}$")


def step_folder(root: str, step: int) -> str:
    return join_url(root, f"{PREFIX}_{step:08d}")


def complete_checkpoints(root: str) -> list[tuple[int, str]]:
    """(step, folder) of every complete checkpoint under ``root``, oldest first. Reads the
    folder listing only: a temporary (unfinished) folder never matches."""
    root = normalize_url(root)
    fs, path = url_to_fs(root)
    try:
        entries = fs.ls(path, detail=False, refresh=True)  # never a cached listing
    except FileNotFoundError:
        return []
    found = {}
    for entry in entries:
        name = entry.rstrip("/").rsplit("/", 1)[-1]
        match = _STEP.match(name)
        if match and _committed(fs, join_url(path, name), root):
            found[int(match.group(1))] = join_url(root, name)
        match = _MARKER.match(name)
        run = _published_run(fs, join_url(path, name)) if match else None
        if run is not None:  # a step published to a shared folder (marin.execution.shared)
            folder = join_url(RUNS, run, name[:-len(MARKER_SUFFIX)])
            if _committed(fs, join_url(path, folder), root):
                found[int(match.group(1))] = join_url(root, folder)
    return sorted(found.items())


def _published_run(fs, marker: str) -> str | None:
    try:
        run = json.loads(fs.cat(marker)).get("run")
    except (FileNotFoundError, ValueError, AttributeError):
        return None  # unpublished while listed, or not a marker
    return run if isinstance(run, str) and run and "/" not in run else None


def _committed(fs, path: str, root: str) -> bool:
    if root.startswith("s3://"):
        marker = COMPLETE
    elif root.startswith("gs://"):  # no atomic rename on GCS: orbax writes a marker last
        marker = "commit_success.txt"
    else:
        return True  # a local folder gets its final name only once complete
    # The filesystem is shared with the rest of the process (marin.storage.files) and may
    # hold a listing of this folder from before another process changed it.
    fs.invalidate_cache(path)
    return fs.exists(join_url(path, marker))


def latest_checkpoint(root: str) -> str | None:
    found = complete_checkpoints(root)
    return found[-1][1] if found else None
