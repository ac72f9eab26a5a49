"""Everything the dashboard knows, read from a prefix through ``marin.storage``.

    reader = PrefixReader("gs://bucket/experiments")
    for inv in reader.invocations():            # executor invocations, newest first
        print(inv.experiment, inv.started)      # typed records (marin.dashboard.records)
    steps = reader.step_states(reader.discover_steps())   # a StepView per output folder
    url = reader.file_url("train/tiny-1a2b3c4d", "train.log")   # a file inside a step

Reads are batched (``read_many``) and never write. Records that do not change once written
(an ended invocation, the info of a step whose status did not move) are cached in memory;
statuses and leases are read fresh on every call, which is what live updates poll. On a
local prefix nothing is read through a link that leads out of the prefix (a step folder)
or out of its step folder (a file): see ``marin.dashboard.confine``.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Sequence
from typing import Any

from marin.dashboard.confine import Confinement
from marin.dashboard.records import StepView, ViewState, info_view, status_fields
from marin.execution import StepState
from marin.execution.invocation_record import InvocationRecord, InvocationStep
from marin.execution.invocations import invocations_folder
from marin.execution.lease import LeaseRecord
from marin.execution.status import (
    INFO_FILE,
    LEASE_FILE,
    STATUS_FILE,
    CorruptRecordError,
    StatusRecord,
    decode_info,
    info_path,
    lease_path,
    status_path,
)
from marin.storage import Storage, get_storage

_RAN = frozenset(state.value for state in StepState if state.ran)  # outcomes of an attempt
_UNTIMED = frozenset({ViewState.RUNNING, ViewState.PENDING})  # no recorded duration shown
_STEP_FOLDER = re.compile(r"^(?P<base>.+)-(?P<hash>[0-9a-f]{8})$")
_MAX_DEPTH = 8
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_MAX_KEY, _MAX_NAME = 1024, 255  # what file systems allow in a path and in one name
# Names that are surely files, so discovery does not list them as folders.
_FILE_SUFFIXES = (".json", ".jsonl", ".txt", ".log", ".md", ".csv", ".html", ".png", ".pb",
                  ".gz", ".parquet", ".zst", ".py", ".yaml", ".npz", ".bin", ".tmp")


class DashboardError(Exception):
    """Something about the prefix the page must explain (not a bug): the message says what
    is wrong and what to do; ``status`` is the HTTP status of the page."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def normalize_prefix(prefix: str) -> str:
    """``prefix`` without a trailing slash and in its canonical scheme (``gcs://`` is
    ``gs://``); a local path made absolute."""
    import os

    from marin.storage.files import local_path, normalize_url

    text = (prefix or "").strip()
    if not text:
        raise DashboardError("the prefix is empty: pass --prefix with a folder or a gs:// or "
                             "s3:// URL that an executor wrote to")
    local = local_path(text)
    if local is not None:
        return os.path.abspath(os.path.expanduser(local)).rstrip("/") or "/"
    return normalize_url(text)


def step_key_of(key: str) -> str:
    """``key`` if it names a step output under the prefix, else a DashboardError (404)."""
    parts = key.split("/")
    if len(key) > _MAX_KEY or any(len(p) > _MAX_NAME for p in parts) \
            or not _STEP_FOLDER.match(parts[-1]) or any(p in ("", ".", "..") for p in parts) \
            or key.startswith(".") or "\\" in key or _CONTROL.search(key):
        raise DashboardError(f"{key!r} is not a step: step keys look like "
                             "'train/tiny-1a2b3c4d'", status=404)
    return key


def safe_subpath(sub: str) -> str:
    """A relative path inside a step's output, or a DashboardError (no '..', no root)."""
    parts = [p for p in sub.split("/") if p]
    if not parts or any(p in (".", "..") or len(p) > _MAX_NAME for p in parts) \
            or "\\" in sub or _CONTROL.search(sub) or len(sub) > _MAX_KEY:
        raise DashboardError(f"{sub!r} is not a file inside a step's output", status=404)
    return "/".join(parts)


class PrefixReader:
    """Reads executor state under one prefix. Thread-safe; never writes."""

    def __init__(self, prefix: str, storage: Storage | None = None,
                 discover_ttl: float = 2.0):
        self.prefix = normalize_prefix(prefix)
        self.storage = storage or get_storage(self.prefix)
        self.discover_ttl = discover_ttl
        self.confine = Confinement(self.prefix)
        self._lock = threading.Lock()
        self._ended: dict[str, InvocationRecord] = {}
        self._infos: dict[str, tuple[str, Any, str | None]] = {}
        self._statuses: dict[str, tuple[bytes | None, dict[str, Any]]] = {}
        self._discovered: tuple[float, list[str]] | None = None

    # -- paths -------------------------------------------------------------------------

    def output_path(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix != "/" else f"/{key}"

    def file_url(self, key: str, sub: str) -> str:
        """The URL of file ``sub`` of step ``key``; a DashboardError (404) for a bad key or
        path, or one that leads out of the step's output through a link."""
        key, sub = step_key_of(key), safe_subpath(sub)
        folder = self.output_path(key)
        if not self.confine.inside(folder, sub):
            raise DashboardError(f"{key}/{sub} links outside the step's output; the "
                                 "dashboard does not follow it", status=404)
        return f"{folder}/{sub}"

    def _record_inside(self, key: str, name: str) -> bool:
        return self.confine.record(self.output_path(key), name)

    # -- invocations -------------------------------------------------------------------

    def invocations(self) -> list[InvocationRecord]:
        """Every recorded invocation (newest first); unreadable records are listed with
        their ``error``."""
        folder = invocations_folder(self.prefix)
        names = sorted((n for n in self.storage.list_dir(folder) if n.endswith(".json")),
                       reverse=True)
        todo = [n for n in names if n not in self._ended]
        blobs = self.storage.read_many([f"{folder}/{n}" for n in todo])
        fresh: dict[str, InvocationRecord] = {}
        for name, blob in zip(todo, blobs, strict=True):
            record = InvocationRecord.decode(name, None if blob is None else blob.data)
            if record.ended is not None or (record.error and blob is not None):
                with self._lock:
                    self._ended[name] = record
            else:
                fresh[name] = record
        return [self._ended.get(n) or fresh[n] for n in names
                if n in self._ended or n in fresh]

    def invocation(self, invocation_id: str) -> InvocationRecord:
        if not re.fullmatch(r"[0-9A-Za-z_.-]{1,200}", invocation_id):
            raise DashboardError(f"no invocation {invocation_id!r}", status=404)
        name = f"{invocation_id}.json"
        record = self._ended.get(name)
        if record is None:
            blob = self.storage.read(f"{invocations_folder(self.prefix)}/{name}")
            if blob is None:
                raise DashboardError(f"no invocation {invocation_id!r} under {self.prefix} "
                                     "(see the experiments page for those recorded)",
                                     status=404)
            record = InvocationRecord.decode(name, blob.data)
        if record.error:
            raise DashboardError(record.error, status=422)
        if record.ended is not None:
            with self._lock:
                self._ended[name] = record
        return record

    # -- steps -------------------------------------------------------------------------

    def discover_steps(self) -> list[str]:
        """Keys of every step output folder under the prefix (cached ``discover_ttl`` s)."""
        cached = self._discovered
        if cached is not None and time.monotonic() - cached[0] < self.discover_ttl:
            return cached[1]
        keys: list[str] = []
        frontier = [""]
        for _ in range(_MAX_DEPTH):
            if not frontier:
                break
            listings = list_many(self.storage, [self._join(rel) for rel in frontier])
            next_frontier = []
            for rel, names in zip(frontier, listings, strict=True):
                for name in names:
                    if name.startswith(".") or name.startswith("_"):
                        continue
                    child = f"{rel}/{name}" if rel else name
                    if not self.confine.folder(self._join(child)):
                        continue  # a link out of the prefix
                    if _STEP_FOLDER.match(name):
                        keys.append(child)
                    elif not name.endswith(_FILE_SUFFIXES):
                        next_frontier.append(child)  # a folder grouping steps (or a file)
            frontier = next_frontier
        keys.sort()
        self._discovered = (time.monotonic(), keys)
        return keys

    def _join(self, rel: str) -> str:
        return self.output_path(rel) if rel else self.prefix

    def step_states(self, keys: Sequence[str], planned: dict[str, InvocationStep] | None = None,
                    with_info: bool = True) -> list[StepView]:
        """The current state of each step: statuses and leases read now (a status whose
        bytes did not change is not parsed again), infos read once per run of the step.

        With ``planned`` (the steps of an invocation record), dependencies, reasons and the
        recorded durations come from the record, and infos are read only for steps that
        ran in it without a recorded duration yet (their start time is in the info)."""
        paths = [self.output_path(k) for k in keys]
        inside = [self._record_inside(k, STATUS_FILE) for k in keys]
        statuses = iter(self.storage.read_many(
            [status_path(p) for p, ok in zip(paths, inside, strict=True) if ok]))
        states: list[StepView] = []
        running: list[StepView] = []
        for key, path, ok in zip(keys, paths, inside, strict=True):
            if not ok:
                states.append(StepView(key, path, state=ViewState.CORRUPT, error=_OUTSIDE.format(
                    path=status_path(path))))
                continue
            state = StepView(key, path, **self._status_fields(key, path, next(statuses)))
            states.append(state)
            if state.state is ViewState.RUNNING:
                running.append(state)
        leases = self.storage.read_many([lease_path(s.output_path) for s in running
                                         if self._record_inside(s.key, LEASE_FILE)])
        for state, blob in zip([s for s in running if self._record_inside(s.key, LEASE_FILE)],
                               leases, strict=True):
            record = _lease(blob)
            if record is None or record.is_stale():
                state.state = ViewState.STOPPED
                state.error = state.error or ("its executor stopped without finishing (no live "
                                              "lease); the next invocation takes it over")
            else:
                state.owner = record.describe()
        planned = planned or {}
        for state in states:
            plan = planned.get(state.key)
            if plan:
                state.reason, state.action = plan.reason, plan.action
                state.description = plan.description
                state.dependencies = list(plan.dependencies)
                state.nonblocking = list(plan.nonblocking)
                if plan.seconds is not None and state.state not in _UNTIMED \
                        and plan.outcome in _RAN:
                    state.recorded_seconds = plan.seconds
        if with_info:
            self._attach_infos([s for s in states if s.state is not ViewState.PENDING and (
                not planned or (s.recorded_seconds is None and s.action != "skip"))],
                from_plan=bool(planned))
        return states

    def _status_fields(self, key: str, path: str, blob: Any) -> dict[str, Any]:
        raw = None if blob is None else blob.data
        cached = self._statuses.get(key)
        if cached is not None and cached[0] == raw:
            return cached[1]
        fields = status_fields(path, raw)
        with self._lock:
            self._statuses[key] = (raw, fields)
        return fields

    def _attach_infos(self, states: list[StepView], from_plan: bool) -> None:
        stale = [s for s in states
                 if s.key not in self._infos or self._infos[s.key][0] != s.run_id]
        readable = [s for s in stale if self._record_inside(s.key, INFO_FILE)]
        blobs = dict(zip((s.key for s in readable), self.storage.read_many(
            [info_path(s.output_path) for s in readable]), strict=True))
        for state in stale:
            view, error = None, None
            if state.key not in blobs:
                error = _OUTSIDE.format(path=info_path(state.output_path))
            elif blobs[state.key] is not None:
                info, error = _decode_info(info_path(state.output_path),
                                           blobs[state.key].data)
                view = info_view(info, info_path(state.output_path))
                if view is not None and view.problems:
                    error = "; ".join(view.problems)
            with self._lock:
                self._infos[state.key] = (state.run_id, view, error)
        for state in states:
            _, view, state.info_error = self._infos[state.key]
            if view is not None:
                state.started = view.created
                if not from_plan:
                    state.description = view.description
                    state.dependencies = [self.key_of(p) for p in view.dependencies]
                    state.nonblocking = [self.key_of(p) for p in view.nonblocking]

    def key_of(self, output_path: str) -> str:
        base = self.prefix + "/"
        if output_path.startswith(base):
            return output_path[len(base):]
        return output_path.rstrip("/").rpartition("/")[2]

    def info(self, key: str) -> tuple[dict[str, Any] | None, str | None]:
        """A step's full ``.executor_info`` (never cached: the step page shows it whole)."""
        path = info_path(self.output_path(key))
        if not self._record_inside(key, INFO_FILE):
            return None, _OUTSIDE.format(path=path)
        blob = self.storage.read(path)
        return (None, None) if blob is None else _decode_info(path, blob.data)

    def status_record(self, key: str) -> tuple[StatusRecord | None, str | None]:
        path = status_path(self.output_path(key))
        if not self._record_inside(key, STATUS_FILE):
            return None, _OUTSIDE.format(path=path)
        blob = self.storage.read(path)
        if blob is None:
            return None, None
        try:
            return StatusRecord.decode(blob.data), None
        except CorruptRecordError as e:
            return None, f"{path} is unreadable ({e})"

    def lease(self, key: str) -> LeaseRecord | None:
        if not self._record_inside(key, LEASE_FILE):
            return None
        return _lease(self.storage.read(lease_path(self.output_path(key))))

    def history(self, key: str) -> list[tuple[InvocationRecord, InvocationStep]]:
        """What each recorded invocation planned for the step and how it ended there."""
        return [(inv, step) for inv in self.invocations() for step in inv.steps
                if step.key == key]

    def exists(self) -> bool:
        return self.storage.exists(self.prefix)


def list_many(storage: Storage, paths: Sequence[str]) -> list[list[str]]:
    """``list_dir`` of many folders, a few at a time in threads (object stores answer each
    listing in one round trip)."""
    if len(paths) <= 1 or storage.__class__.__name__ == "LocalStorage":
        return [storage.list_dir(p) for p in paths]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(min(storage.read_concurrency, len(paths))) as pool:
        return list(pool.map(storage.list_dir, paths))


_OUTSIDE = "{path} links outside the prefix; the dashboard does not follow it"


def _lease(blob: Any) -> LeaseRecord | None:
    if blob is None or not blob.data:
        return None
    try:
        return LeaseRecord.decode(blob.data)
    except RecursionError:
        return None


def _decode_info(path: str, raw: bytes) -> tuple[dict[str, Any] | None, str | None]:
    try:
        return decode_info(raw), None
    except (CorruptRecordError, RecursionError) as e:
        return None, f"{path} is unreadable ({e or 'nested too deeply'})"
