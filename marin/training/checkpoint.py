"""Checkpoints on any fsspec URL: complete or absent.

    save_checkpoint(f"{out}/checkpoints", step, (model, opt_state), {"data_step": step})
    latest = latest_checkpoint(f"{out}/checkpoints")   # None, or the newest complete one
    (model, opt_state), meta = load_checkpoint(latest, like=(model, opt_state))

A checkpoint is a folder ``step-00000100`` holding ``state.eqx`` (equinox's leaf
serialisation of the whole training state), ``meta.json`` (step, data position, RNG, time)
and, written last, ``COMPLETE``. A folder without ``COMPLETE`` (a run killed mid-write) is
ignored, and older complete checkpoints beyond ``keep`` are deleted.
"""

from __future__ import annotations

import io
import json
import time
from typing import Any

import equinox as eqx
import fsspec

COMPLETE = "COMPLETE"


def _fs(path: str):
    return fsspec.core.url_to_fs(path)


def _name(step: int) -> str:
    return f"step-{step:08d}"


def save_checkpoint(root: str, step: int, state: Any, meta: dict[str, Any],
                    keep: int = 2) -> str:
    folder = f"{root.rstrip('/')}/{_name(step)}"
    fs, path = _fs(folder)
    fs.makedirs(path, exist_ok=True)
    buffer = io.BytesIO()
    eqx.tree_serialise_leaves(buffer, state)
    with fs.open(f"{path}/state.eqx", "wb") as f:
        f.write(buffer.getvalue())
    with fs.open(f"{path}/meta.json", "w") as f:
        json.dump({**meta, "step": step, "saved_at": time.time()}, f)
    with fs.open(f"{path}/{COMPLETE}", "w") as f:
        f.write("ok")
    _prune(root, keep)
    return folder


def complete_checkpoints(root: str) -> list[tuple[int, str]]:
    fs, path = _fs(root)
    try:
        names = fs.ls(path, detail=False)
    except FileNotFoundError:
        return []
    out = []
    for name in names:
        base = name.rstrip("/").rsplit("/", 1)[-1]
        if base.startswith("step-") and fs.exists(f"{name}/{COMPLETE}"):
            out.append((int(base[5:]), f"{root.rstrip('/')}/{base}"))
    return sorted(out)


def latest_checkpoint(root: str) -> str | None:
    found = complete_checkpoints(root)
    return found[-1][1] if found else None


def load_checkpoint(folder: str, like: Any) -> tuple[Any, dict[str, Any]]:
    fs, path = _fs(folder)
    with fs.open(f"{path}/state.eqx", "rb") as f:
        state = eqx.tree_deserialise_leaves(io.BytesIO(f.read()), like)
    with fs.open(f"{path}/meta.json") as f:
        meta = json.load(f)
    return state, meta


def _prune(root: str, keep: int) -> None:
    found = complete_checkpoints(root)
    for _, folder in found[:-keep] if keep > 0 else []:
        fs, path = _fs(folder)
        fs.rm(path, recursive=True)
