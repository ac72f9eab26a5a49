"""What a step left in its output folder: files, logs, training metrics, study reports, token
caches and profiles, found by name.

    index = OutputIndex(reader)
    index.files("train/tiny-1a2b3c4d")            # ["metrics.jsonl", "summary.json", ...]
    [key for key, kind in index.kinds(keys).items() if "run" in kind]
    text, cut = read_text_tail(reader, "train/tiny-1a2b3c4d", "train.log")   # its end

A step is a *training run* when its output holds ``metrics.jsonl``, a *study* when it holds
``report.md`` or ``fit.json``, a *token cache* when it holds the cache ledger, and has
*traces* when a ``profile/`` folder holds ``*.xplane.pb`` or ``*.trace.json.gz`` files.
Listings of finished steps never change and are cached; others are listed again after a few
seconds. Folders and files that a link leads out of (``PrefixReader.confine``) are not
listed, and files are read within a byte limit (``marin.dashboard.bounded``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

from marin.dashboard.bounded import read_head, read_tail
from marin.dashboard.reader import DashboardError, PrefixReader, StepView, list_many
from marin.dashboard.records import ViewState, loads
from marin.execution.status import attempt_path

LOG_NAMES = (".executor_log",)
LOG_SUFFIXES = (".log", ".log.txt")
TEXT_SUFFIXES = (".json", ".jsonl", ".txt", ".md", ".csv", ".log", ".yaml", ".yml", ".py",
                 ".tsv", ".executor_info", ".executor_status", ".executor_lease",
                 ".executor_log")
IMAGE_TYPES = {".png": "image/png", ".svg": "image/svg+xml", ".jpg": "image/jpeg",
               ".jpeg": "image/jpeg", ".gif": "image/gif"}
_TRACE_SUFFIXES = (".xplane.pb", ".trace.json.gz", ".trace.json")
_MAX_FILES = 400
_LIST_TTL = 5.0
_CACHE_LEDGER = "ledger.json"
_JSON_LIMIT = 4 << 20  # bytes of a summary.json or fit.json worth parsing


class OutputIndex:
    """Listings of step outputs, cached while the step's status stays SUCCESS."""

    def __init__(self, reader: PrefixReader):
        self.reader = reader
        self._lock = threading.Lock()
        self._top: dict[str, tuple[float, bool, list[str]]] = {}

    def top_level(self, states: Sequence[StepView]) -> dict[str, list[str]]:
        """Names directly under each step's output, listed in parallel."""
        now = time.monotonic()
        todo = [s for s in states if s.key not in self._top or (not self._top[s.key][1]
                and now - self._top[s.key][0] > _LIST_TTL)]
        inside = [s for s in todo if self.reader.confine.folder(live_folder(s))]
        listings = list_many(self.reader.storage, [live_folder(s) for s in inside])
        listings += [[] for _ in range(len(todo) - len(inside))]
        todo = inside + [s for s in todo if s not in inside]
        with self._lock:
            for state, names in zip(todo, listings, strict=True):
                self._top[state.key] = (now, state.state is ViewState.SUCCEEDED, sorted(names))
        return {s.key: self._top[s.key][2] for s in states}

    def kinds(self, states: Sequence[StepView]) -> dict[str, set[str]]:
        """For each step, which of run, study, cache and traces its output holds."""
        out: dict[str, set[str]] = {}
        for key, names in self.top_level(states).items():
            found = set()
            if "metrics.jsonl" in names:
                found.add("run")
            if "report.md" in names or "fit.json" in names:
                found.add("study")
            if _CACHE_LEDGER in names:
                found.add("cache")
            if "profile" in names:
                found.add("traces")
            out[key] = found
        return out

    def files(self, key: str, limit: int = _MAX_FILES) -> list[str]:
        """Relative paths of the files under a step's output (breadth first, at most
        ``limit``), folders listed again so that nested outputs show."""
        root = self.reader.output_path(key)
        confine = self.reader.confine
        files: list[str] = []
        frontier = [""] if confine.folder(root) else []
        while frontier and len(files) < limit:
            listings = list_many(self.reader.storage,
                                 [f"{root}/{rel}" if rel else root for rel in frontier])
            next_frontier = []
            for rel, names in zip(frontier, listings, strict=True):
                for name in sorted(names):
                    child = f"{rel}/{name}" if rel else name
                    if name.startswith(".") and name not in _VISIBLE_DOTFILES:
                        continue
                    if "." in name.lstrip(".") or name in _VISIBLE_DOTFILES:
                        files.append(child)
                    elif confine.inside(root, child):
                        next_frontier.append(child)
            # A name without a dot may still be a file: it is a file when it lists as empty.
            if next_frontier:
                sub = list_many(self.reader.storage, [f"{root}/{rel}" for rel in next_frontier])
                files.extend(rel for rel, names in zip(next_frontier, sub, strict=True)
                             if not names)
                frontier = [rel for rel, names in zip(next_frontier, sub, strict=True) if names]
            else:
                frontier = []
        return sorted(files[:limit])

    def traces(self, key: str) -> list[str]:
        """Profiles under ``profile/``: one file per capture, XPlane where JAX wrote both."""
        found = [f for f in self.files(key) if f.startswith("profile/")
                 and f.endswith(_TRACE_SUFFIXES)]
        xplanes = {f[: -len(".xplane.pb")] for f in found if f.endswith(".xplane.pb")}
        return [f for f in found if f.endswith(".xplane.pb")
                or f.split(".trace.json")[0] not in xplanes]


_VISIBLE_DOTFILES = {".executor_info", ".executor_status", ".executor_lease", ".executor_log"}


def log_files(files: Sequence[str]) -> list[str]:
    return [f for f in files if f.rpartition("/")[2] in LOG_NAMES or f.endswith(LOG_SUFFIXES)]


def is_text(path: str) -> bool:
    return path.endswith(TEXT_SUFFIXES) or path.rpartition("/")[2] in _VISIBLE_DOTFILES


def read_text_tail(reader: PrefixReader, key: str, sub: str, limit: int = 64_000
                   ) -> tuple[str, bool]:
    """The last ``limit`` bytes of a text file in a step's output, decoded, and whether it
    was cut. A file that a link leads out of the step's output reads as a note saying so."""
    try:
        part = read_tail(reader.file_url(key, sub), limit)
    except DashboardError as e:
        return f"({e})", False
    if part is None:
        return "", False
    return part.data.decode("utf-8", errors="replace"), not part.whole


def live_folder(state: StepView) -> str:
    """Where a step's files are now: a running step writes into its attempt folder, which
    the executor commits into the output only when the step succeeds."""
    if state.state is ViewState.RUNNING and state.run_id:
        return attempt_path(state.output_path, state.run_id)
    return state.output_path


def read_json_files(reader: PrefixReader, keys: Sequence[str], name: str
                    ) -> dict[str, dict[str, Any] | None]:
    """``name`` parsed as JSON from each step's output (None where absent, unreadable, larger
    than 4 MB, or a link out of the step's output)."""
    inside = [k for k in keys if reader.confine.record(reader.output_path(k), name)]
    blobs = dict(zip(inside, reader.storage.read_many(
        [f"{reader.output_path(k)}/{name}" for k in inside]), strict=True))
    out: dict[str, dict[str, Any] | None] = {}
    for key in keys:
        blob = blobs.get(key)
        out[key] = None if blob is None or len(blob.data) > _JSON_LIMIT else _json_object(
            blob.data)
    return out


def read_json_file(reader: PrefixReader, key: str, name: str) -> dict[str, Any] | None:
    """``read_json_files`` for one file, reading no more than the limit."""
    part = read_head(reader.file_url(key, name), _JSON_LIMIT + 1)
    return None if part is None or not part.whole else _json_object(part.data)


def _json_object(raw: bytes) -> dict[str, Any] | None:
    try:
        value = loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
