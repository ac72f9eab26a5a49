"""Everything the dashboard knows, read from a prefix through ``marin.storage``.

    reader = PrefixReader("gs://bucket/experiments")
    for inv in reader.invocations():            # executor invocations, newest first
        print(inv["experiment"], inv["started"])
    steps = reader.step_states(reader.discover_steps())   # a StepView per output folder

Reads are batched (``read_many``) and never write. Records that do not change once written
(an ended invocation, the info of a step whose status did not move) are cached in memory;
statuses and leases are read fresh on every call, which is what live updates poll.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from marin.execution.invocations import invocations_folder
from marin.execution.lease import LeaseRecord
from marin.execution.states import STORED_STATUSES, StepState
from marin.execution.status import (
    CorruptRecordError,
    StatusRecord,
    decode_info,
    info_path,
    lease_path,
    status_path,
)
from marin.storage import Storage, get_storage

_RAN = frozenset(state.value for state in StepState if state.ran)  # outcomes of an attempt
_STEP_FOLDER = re.compile(r"^(?P<base>.+)-(?P<hash>[0-9a-f]{8})$")
_MAX_DEPTH = 8
# Names that are surely files, so discovery does not list them as folders.
_FILE_SUFFIXES = (".json", ".jsonl", ".txt", ".log", ".md", ".csv", ".html", ".png", ".pb",
                  ".gz", ".parquet", ".zst", ".py", ".yaml", ".npz", ".bin", ".tmp")


class DashboardError(Exception):
    """Something about the prefix the page must explain (not a bug): the message says what
    is wrong and what to do; ``status`` is the HTTP status of the page."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


@dataclass
class StepView:
    """One step as the pages show it, read from its status, lease and info records (the
    executor's own states are ``marin.execution.states.StepState``).

    ``state`` is one of SUCCESS, FAILED, RUNNING, STOPPED (RUNNING with a stale or missing
    lease: its executor died), CANCELLED, PENDING (no status yet) and CORRUPT (an unreadable
    status file, explained in ``error``).
    """

    key: str
    output_path: str
    state: str = "PENDING"
    error: str | None = None
    started: float | None = None
    updated: float | None = None
    host: str = ""
    run_id: str = ""
    owner: str | None = None
    dependencies: list[str] = field(default_factory=list)
    reason: str | None = None
    action: str | None = None
    description: str | None = None
    info_error: str | None = None
    recorded_seconds: float | None = None

    @property
    def name(self) -> str:
        return self.key[:-9]

    @property
    def family(self) -> str:
        return self.name.rpartition("/")[0] or "(top level)"

    def duration(self, now: float | None = None) -> float | None:
        if self.recorded_seconds is not None:
            return self.recorded_seconds
        if self.started is None:
            return None
        if self.state in ("RUNNING",):
            return max(0.0, (now or time.time()) - self.started)
        if self.updated is not None and self.updated >= self.started:
            return self.updated - self.started
        return None

    def to_json(self) -> dict[str, Any]:
        duration = self.duration()
        return {"key": self.key, "state": self.state, "error": self.error,
                "started": self.started, "updated": self.updated,
                "duration": None if duration is None else round(duration, 1),
                "host": self.host, "owner": self.owner}


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
    if not _STEP_FOLDER.match(parts[-1]) or any(p in ("", ".", "..") for p in parts) \
            or key.startswith("."):
        raise DashboardError(f"{key!r} is not a step: step keys look like "
                             "'train/tiny-1a2b3c4d'", status=404)
    return key


def safe_subpath(sub: str) -> str:
    """A relative path inside a step's output, or a DashboardError (no '..', no root)."""
    parts = [p for p in sub.split("/") if p]
    if not parts or any(p in (".", "..") for p in parts) or "\\" in sub:
        raise DashboardError(f"{sub!r} is not a file inside a step's output", status=404)
    return "/".join(parts)


class PrefixReader:
    """Reads executor state under one prefix. Thread-safe; never writes."""

    def __init__(self, prefix: str, storage: Storage | None = None,
                 discover_ttl: float = 2.0):
        self.prefix = normalize_prefix(prefix)
        self.storage = storage or get_storage(self.prefix)
        self.discover_ttl = discover_ttl
        self._lock = threading.Lock()
        self._ended: dict[str, dict[str, Any]] = {}
        self._infos: dict[str, tuple[str, dict[str, Any] | None, str | None]] = {}
        self._statuses: dict[str, tuple[bytes | None, dict[str, Any]]] = {}
        self._discovered: tuple[float, list[str]] | None = None

    # -- paths -------------------------------------------------------------------------

    def output_path(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix != "/" else f"/{key}"

    # -- invocations -------------------------------------------------------------------

    def invocations(self) -> list[dict[str, Any]]:
        """Every recorded invocation (newest first); unreadable records are listed with
        their ``error``."""
        folder = invocations_folder(self.prefix)
        names = sorted((n for n in self.storage.list_dir(folder) if n.endswith(".json")),
                       reverse=True)
        todo = [n for n in names if n not in self._ended]
        blobs = self.storage.read_many([f"{folder}/{n}" for n in todo])
        fresh: dict[str, dict[str, Any]] = {}
        for name, blob in zip(todo, blobs, strict=True):
            record = _decode_invocation(name, None if blob is None else blob.data)
            if record.get("ended") or (record.get("error") and blob is not None):
                with self._lock:
                    self._ended[name] = record
            else:
                fresh[name] = record
        return [self._ended.get(n) or fresh[n] for n in names
                if n in self._ended or n in fresh]

    def invocation(self, invocation_id: str) -> dict[str, Any]:
        if not re.fullmatch(r"[0-9A-Za-z_.-]+", invocation_id):
            raise DashboardError(f"no invocation {invocation_id!r}", status=404)
        name = f"{invocation_id}.json"
        record = self._ended.get(name)
        if record is None:
            blob = self.storage.read(f"{invocations_folder(self.prefix)}/{name}")
            if blob is None:
                raise DashboardError(f"no invocation {invocation_id!r} under {self.prefix} "
                                     "(see the experiments page for those recorded)",
                                     status=404)
            record = _decode_invocation(name, blob.data)
        if record.get("error"):
            raise DashboardError(record["error"], status=422)
        if record.get("ended"):
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

    def step_states(self, keys: Sequence[str], planned: dict[str, dict[str, Any]] | None = None,
                    with_info: bool = True) -> list[StepView]:
        """The current state of each step: statuses and leases read now (a status whose
        bytes did not change is not parsed again), infos read once per run of the step.

        With ``planned`` (the steps of an invocation record), dependencies, reasons and the
        recorded durations come from the record, and infos are read only for steps that
        ran in it without a recorded duration yet (their start time is in the info)."""
        paths = [self.output_path(k) for k in keys]
        statuses = self.storage.read_many([status_path(p) for p in paths])
        states: list[StepView] = []
        running: list[StepView] = []
        for key, path, blob in zip(keys, paths, statuses, strict=True):
            state = StepView(key, path, **self._status_fields(key, path, blob))
            states.append(state)
            if state.state == "RUNNING":
                running.append(state)
        leases = self.storage.read_many([lease_path(s.output_path) for s in running])
        for state, blob in zip(running, leases, strict=True):
            record = None if blob is None or not blob.data else LeaseRecord.decode(blob.data)
            if record is None or record.is_stale():
                state.state = "STOPPED"
                state.error = state.error or ("its executor stopped without finishing (no live "
                                              "lease); the next run takes it over")
            else:
                state.owner = record.describe()
        planned = planned or {}
        for state in states:
            plan = planned.get(state.key)
            if plan:
                state.reason, state.action = plan.get("reason"), plan.get("action")
                state.description = plan.get("description")
                state.dependencies = list(plan.get("dependencies", []))
                seconds = plan.get("seconds")
                if isinstance(seconds, int | float) and state.state not in ("RUNNING",
                                                                             "PENDING") \
                        and plan.get("outcome") in _RAN:
                    state.recorded_seconds = float(seconds)
        if with_info:
            self._attach_infos([s for s in states if s.state != "PENDING" and (
                not planned or (s.recorded_seconds is None and s.action != "skip"))],
                from_plan=bool(planned))
        return states

    def _status_fields(self, key: str, path: str, blob: Any) -> dict[str, Any]:
        raw = None if blob is None else blob.data
        cached = self._statuses.get(key)
        if cached is not None and cached[0] == raw:
            return cached[1]
        fields = _status_fields(path, raw)
        with self._lock:
            self._statuses[key] = (raw, fields)
        return fields

    def _attach_infos(self, states: list[StepView], from_plan: bool) -> None:
        stale = [s for s in states
                 if s.key not in self._infos or self._infos[s.key][0] != s.run_id]
        blobs = self.storage.read_many([info_path(s.output_path) for s in stale])
        for state, blob in zip(stale, blobs, strict=True):
            info, error = None, None
            if blob is not None:
                try:
                    info = decode_info(blob.data)
                except CorruptRecordError as e:
                    error = f"{info_path(state.output_path)} is unreadable ({e})"
            with self._lock:
                self._infos[state.key] = (state.run_id, _info_summary(info), error)
        for state in states:
            _, summary, state.info_error = self._infos[state.key]
            if summary:
                state.started = summary.get("created")
                if not from_plan:
                    state.description = summary.get("description")
                    state.dependencies = [self.key_of(p)
                                          for p in summary.get("dependencies", [])]

    def key_of(self, output_path: str) -> str:
        base = self.prefix + "/"
        if output_path.startswith(base):
            return output_path[len(base):]
        return output_path.rstrip("/").rpartition("/")[2]

    def info(self, key: str) -> tuple[dict[str, Any] | None, str | None]:
        """A step's full ``.executor_info`` (never cached: the step page shows it whole)."""
        path = info_path(self.output_path(key))
        blob = self.storage.read(path)
        if blob is None:
            return None, None
        try:
            return decode_info(blob.data), None
        except CorruptRecordError as e:
            return None, f"{path} is unreadable ({e})"

    def status_record(self, key: str) -> tuple[StatusRecord | None, str | None]:
        path = status_path(self.output_path(key))
        blob = self.storage.read(path)
        if blob is None:
            return None, None
        try:
            return StatusRecord.decode(blob.data), None
        except CorruptRecordError as e:
            return None, f"{path} is unreadable ({e})"

    def lease(self, key: str) -> LeaseRecord | None:
        blob = self.storage.read(lease_path(self.output_path(key)))
        return None if blob is None or not blob.data else LeaseRecord.decode(blob.data)

    def history(self, key: str) -> list[dict[str, Any]]:
        """What each recorded invocation planned for the step and how it ended there."""
        out = []
        for inv in self.invocations():
            for step in inv.get("steps", []):
                if step.get("key") == key:
                    out.append({"invocation": inv.get("id"), "started": inv.get("started"),
                                "ended": inv.get("ended"), "user": inv.get("user"),
                                "host": inv.get("host"), "action": step.get("action"),
                                "reason": step.get("reason"), "outcome": step.get("outcome"),
                                "seconds": step.get("seconds"), "error": step.get("error")})
        return out

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


def _status_fields(output_path: str, raw: bytes | None) -> dict[str, Any]:
    """The fields of a StepView from a status file's bytes (``StatusRecord``'s format,
    read without building the record: this runs for every step on every poll)."""
    if raw is None:
        return {"state": "PENDING"}
    try:
        data = json.loads(raw)
        state = data["status"]
        if state not in STORED_STATUSES:
            raise ValueError(f"unknown status {state!r}")
        updated = float(data.get("time") or 0.0) or None
    except (ValueError, KeyError, TypeError) as e:
        return {"state": "CORRUPT",
                "error": f"{status_path(output_path)} is unreadable (not a valid status "
                         f"record: {e})"}
    error = data.get("error") if state in ("FAILED", "CANCELLED") else None
    return {"state": state, "error": None if error is None else str(error),
            "updated": updated, "host": str(data.get("host", "")),
            "run_id": str(data.get("run_id", ""))}


def _info_summary(info: dict[str, Any] | None) -> dict[str, Any] | None:
    if info is None:
        return None
    return {"created": info.get("created"), "description": info.get("description"),
            "dependencies": [d for d in info.get("dependencies", []) if isinstance(d, str)]}


def _decode_invocation(name: str, raw: bytes | None) -> dict[str, Any]:
    invocation_id = name[: -len(".json")]
    if raw is None:
        return {"id": invocation_id, "error": f"invocation record {name} vanished"}
    try:
        record = json.loads(raw)
        if not isinstance(record, dict) or not isinstance(record.get("steps"), list):
            raise ValueError("no 'steps' list")
    except ValueError as e:
        return {"id": invocation_id, "steps": [],
                "error": f"invocation record {name} is unreadable ({e})"}
    record.setdefault("id", invocation_id)
    return record
