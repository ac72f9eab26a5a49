"""What a prefix holds, for ``marin gc`` and ``marin du``: step outputs, the invocations
that reference them, pins, and what each step's lease and status say now.

    scan = scan_prefix("gs://bucket/prefix")
    scan.outputs["train/tiny-3f9c01ab"].bytes      # every file of that output
    scan.kept_keys(kept)          # outputs that the kept invocations (retention) name

One listing of the whole prefix (``Storage.list_files``) and batched reads of the small
records that the listing shows: a prefix of 10,000 outputs costs one read per output and
the listing's pages, not one request per file.

What counts as a step output, a nested prefix (left out of the scan) and a pinned key is
``marin.execution.gc.reach``'s.

Which invocations are kept, and which belong to one experiment, is
``marin.execution.gc.retention``'s to say.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field

from marin.execution.gc.reach import (
    info_of,
    inside,
    is_output,
    nested_prefixes,
    prefix_of,
    resumes,
    step_key,
)
from marin.execution.invocation_record import InvocationRecord
from marin.execution.invocations import INVOCATIONS_DIR
from marin.execution.lease import LeaseRecord
from marin.execution.shared import MARKER_SUFFIX, RUNS
from marin.execution.status import (
    ATTEMPTS_FOLDER,
    INFO_FILE,
    LEASE_FILE,
    STATUS_FILE,
    StatusRecord,
)
from marin.storage import FileEntry, Storage, StorageError, get_storage
from marin.storage.files import resolve_under

__all__ = ["Invocation", "Output", "Scan", "confined", "read_records", "record_file",
           "scan_prefix"]

PINS_DIR = ".marin/pins"
_RECORDS = {STATUS_FILE, INFO_FILE, LEASE_FILE, ATTEMPTS_FOLDER}


def sum_sizes(files: list[FileEntry] | tuple[FileEntry, ...]) -> int:
    return sum(f.size for f in files)


def newest_time(files: list[FileEntry] | tuple[FileEntry, ...]) -> float:
    """The newest modification time among ``files`` (0 for none)."""
    return max((f.mtime for f in files), default=0.0)


@dataclass
class Output:
    key: str
    """The output's path under the prefix (the step's key, ``name-hash``)."""
    path: str
    files: list[FileEntry] = field(default_factory=list)
    status: StatusRecord | None = None
    lease: LeaseRecord | None = None
    resumes: bool | None = True
    """Whether a rerun of the step adopts an earlier attempt (``reach.resumes``); None:
    its info record is not read yet."""

    @property
    def bytes(self) -> int:
        return sum_sizes(self.files)

    @property
    def newest(self) -> float:
        return newest_time(self.files)

    @property
    def name(self) -> str:
        return self.key.rsplit("-", 1)[0]

    @property
    def live(self) -> bool:
        """Its lease is not stale (a killed holder's is): never to be touched."""
        return self.lease is not None and not self.lease.is_stale()


@dataclass(frozen=True)
class Invocation:
    """An invocation record as gc sees it: the outputs it names under this prefix (every
    step of its plan, nonblocking dependencies included) and the names of their steps."""

    record: InvocationRecord
    keys: frozenset[str]
    names: frozenset[str]

    @classmethod
    def of(cls, record: InvocationRecord, prefix: str) -> Invocation:
        keys = {(_relative(prefix, prefix_of(s.output_path)) if s.output_path else None)
                or s.key for s in record.steps}
        return cls(record, frozenset(keys), frozenset(s.name for s in record.steps))

    @property
    def id(self) -> str:
        return self.record.id

    @property
    def experiment(self) -> str:
        return self.record.experiment

    @property
    def started(self) -> float:
        """The start time (0 for a record without one: the oldest)."""
        return self.record.started or 0.0

    @property
    def may_be_running(self) -> bool:
        record = self.record
        if record.ended is not None:
            return False
        if record.host != socket.gethostname() or not record.pid:
            return True  # cannot tell: kept
        try:
            os.kill(record.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


@dataclass
class Scan:
    prefix: str
    outputs: dict[str, Output]
    invocations: list[Invocation]
    pins: set[str]
    markers: dict[str, str]
    """Path of each published checkpoint folder -> the marker publishing it."""
    nested: list[str] = field(default_factory=list)
    """Nested prefixes (``nested_prefixes``), left alone with all they hold."""
    unreadable: list[str] = field(default_factory=list)
    """Invocation records and pins that cannot be read: while any is there, every output is
    kept (it may name any)."""
    copies: frozenset[str] = frozenset()
    """Folders holding executor-named entries that are no output (``is_output``): parts of
    the output around them, kept with it and never cleaned as its leftovers."""

    def kept_keys(self, kept: Iterable[Invocation]) -> set[str]:
        """The outputs kept: those a ``kept`` invocation or a pin names, those holding a
        nested prefix, and those inside a kept one. Every output while an invocation record
        is unreadable (it may name any)."""
        if self.unreadable:
            return set(self.outputs)
        named = {k for inv in kept for k in inv.keys} | self.pins
        named |= {"/".join(p[:i]) for n in self.nested  # outputs holding a nested prefix
                  for p in [n[len(self.prefix) + 1:].split("/")]
                  for i in range(1, len(p))} & self.outputs.keys()
        return {k for k in self.outputs if k in named or inside(k, named)}


def _relative(prefix: str, path: str) -> str | None:
    base = prefix.rstrip("/") + "/"
    return path[len(base):] if path.startswith(base) else None


def scan_prefix(prefix: str, storage: Storage | None = None, read: bool = True) -> Scan:
    """What ``prefix`` holds: the outputs with their leases (statuses are read on demand,
    ``read_records``), invocations, pins and markers, and the nested prefixes it leaves
    alone. ``read=False``: the listing alone (no record is read: every folder holding an
    ``.executor_info`` counts as an output, and the scan names no invocation, pin or
    marker)."""
    prefix = prefix_of(prefix)
    storage = storage or get_storage(prefix)
    listed = [(rel, entry) for entry in storage.list_files(prefix)
              if (rel := _relative(prefix, entry.path)) is not None]
    nested = nested_prefixes([rel for rel, _ in listed])
    rest: list[tuple[list[str], FileEntry]] = []
    invocation_files, pin_files, marker_files = [], [], []
    holders: set[str] = set()  # folders holding executor-named entries at their top
    for rel, entry in listed:
        parts = rel.split("/")
        if parts[0] == ".marin":
            if rel.startswith(INVOCATIONS_DIR + "/") and rel.endswith(".json"):
                invocation_files.append(entry.path)
            elif rel.startswith(PINS_DIR + "/"):
                pin_files.append(entry.path)
            continue
        if inside(rel, nested):
            continue
        if entry.path.endswith(MARKER_SUFFIX):
            marker_files.append(entry.path)
        holders.update("/".join(parts[:i]) for i in range(1, len(parts))
                       if parts[i] in _RECORDS)
        rest.append((parts, entry))
    invocations, unreadable = ([], []) if not read else _read_invocations(
        storage, prefix, confined(prefix, invocation_files))
    named = None if not read else {k for inv in invocations for k in inv.keys}
    outputs = _outputs(storage, prefix, sorted(holders), {"/".join(p) for p, _ in rest}, named)
    for parts, entry in rest:
        for j in range(len(parts) - 1, 0, -1):
            found = outputs.get("/".join(parts[:j]))
            if found is not None:
                found.files.append(entry)
                break
    left_alone = sorted(f"{prefix}/{n}" for n in nested)
    copies = frozenset(holders - outputs.keys())
    if not read:
        return Scan(prefix, outputs, [], set(), {}, left_alone, copies=copies)
    read_records(storage, prefix, list(outputs.values()), (LEASE_FILE,))
    pins, damaged = read_pins(storage, confined(prefix, pin_files))
    return Scan(prefix, outputs, invocations, pins,
                _read_markers(storage, confined(prefix, marker_files)), left_alone,
                unreadable + damaged, copies)


def read_pins(storage: Storage, paths: list[str]) -> tuple[set[str], list[str]]:
    """The keys the pin files ``paths`` name, and the path of each that names none (not
    text, or no key): such a pin may have protected any output."""
    keys, damaged = set(), []
    for path, blob in zip(paths, storage.read_many(paths), strict=True):
        if blob is None:
            continue  # removed since the listing: unpinned
        try:
            key = step_key(blob.data.decode().strip())
        except UnicodeDecodeError:
            key = None
        if key is None:
            damaged.append(path)
        else:
            keys.add(key)
    return keys, damaged


def _outputs(storage: Storage, prefix: str, holders: list[str], files: set[str],
             named: set[str] | None) -> dict[str, Output]:
    """The step outputs among ``holders`` (folders holding executor-named entries), by
    ``is_output``: those the invocation records name (``named``), and of the others those
    whose own info record names them (one read each). ``named=None``: no record read, every
    holder with an info record in the listing."""
    if named is None:
        return {k: Output(k, f"{prefix}/{k}") for k in holders
                if f"{k}/{INFO_FILE}" in files}
    found = {k: Output(k, f"{prefix}/{k}", resumes=None) for k in holders if k in named}
    others = confined(prefix, [f"{prefix}/{k}/{INFO_FILE}" for k in holders
                               if k not in named and f"{k}/{INFO_FILE}" in files])
    for path, blob in zip(others, storage.read_many(others), strict=True):
        key, info = path[len(prefix) + 1:-len(INFO_FILE) - 1], info_of(blob)
        if is_output(key, (), info):
            found[key] = Output(key, f"{prefix}/{key}", resumes=resumes(info))
    return found


def record_file(out: Output, name: str) -> FileEntry | None:
    """The listing's entry for the record ``name`` at the top of ``out`` (None: absent)."""
    path = f"{out.path}/{name}"
    return next((f for f in out.files if f.path == path), None)


def confined(prefix: str, paths: list[str]) -> list[str]:
    """The ``paths`` that lie under ``prefix`` once links are followed: gc and du read
    nothing through a link that leads out of the prefix (``resolve_under``)."""
    found = []
    for path in paths:
        try:
            resolve_under(prefix, path)
        except StorageError:
            continue
        found.append(path)
    return found


def read_records(storage: Storage, prefix: str, outputs: list[Output],
                 names: tuple[str, ...] = (STATUS_FILE, LEASE_FILE)) -> None:
    """Read the records ``names`` (status, lease) of each output, only those its listing
    shows: a prefix of 10,000 outputs holds few leases, and a read of an absent object costs
    a request too."""
    allowed = set(confined(prefix, [f"{o.path}/{n}" for o in outputs for n in names
                                    if record_file(o, n) is not None]))
    wanted = [(out, name) for out in outputs for name in names
              if f"{out.path}/{name}" in allowed]
    blobs = storage.read_many([f"{out.path}/{name}" for out, name in wanted])
    for out in outputs:
        if STATUS_FILE in names:
            out.status = None
        if LEASE_FILE in names:
            out.lease = None
    for (out, name), blob in zip(wanted, blobs, strict=True):
        if blob is None:
            continue
        if name == LEASE_FILE:
            out.lease = LeaseRecord.decode(blob.data)
            continue
        try:
            out.status = StatusRecord.decode(blob.data)
        except ValueError:
            out.status = None


def _read_invocations(storage: Storage, prefix: str,
                      paths: list[str]) -> tuple[list[Invocation], list[str]]:
    """The readable invocation records in ``paths``, and the path of each unreadable one
    (one a crash cut short, say): gc cannot tell what such a record names."""
    found, unreadable = [], []
    for path, blob in zip(paths, storage.read_many(paths), strict=True):
        if blob is None:
            continue  # deleted since the listing: it names nothing now
        record = InvocationRecord.decode(path.rpartition("/")[2], blob.data)
        if record.error is None:
            found.append(Invocation.of(record, prefix))
        else:
            unreadable.append(path)
    return found, unreadable


def _read_markers(storage: Storage, paths: list[str]) -> dict[str, str]:
    published = {}
    for path, blob in zip(paths, storage.read_many(paths), strict=True):
        try:
            run = json.loads(blob.data)["run"] if blob is not None else None
        except (ValueError, KeyError, TypeError):
            continue
        if isinstance(run, str):
            folder, name = path.rsplit("/", 1)
            published[f"{folder}/{RUNS}/{run}/{name[:-len(MARKER_SUFFIX)]}"] = path
    return published


