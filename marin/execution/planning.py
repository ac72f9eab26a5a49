"""The decision code shared by dry runs and real runs: what to do with each step, and why.

    plan = make_plan(graph, storage, PlanOptions(run_only=["train/.*"]))
    for entry in plan.entries:
        print(entry.name, entry.action, entry.reason)   # "train/tiny  run  no output yet"
    plan.totals()                                       # {"run": 1, "skip": 3, "wait": 0}

Reading is batched: one ``read_many`` for all status files, one for the leases of steps
that claim to be running, one listing per output folder to find earlier versions of a
step, and one ``read_many`` for their info files. Nothing is written.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from marin.execution.diff import FieldChange, diff_versions
from marin.execution.graph import StepGraph, StepNode
from marin.execution.hashing import HASH_LENGTH
from marin.execution.lease import LeaseRecord
from marin.execution.status import (
    CorruptRecordError,
    StatusRecord,
    StepStatus,
    code_fingerprint,
    decode_info,
    info_path,
    lease_path,
    status_path,
)
from marin.execution.step import ComputeEstimate
from marin.storage import Storage

logger = logging.getLogger("marin.executor")

Action = Literal["run", "skip", "wait"]


@dataclass(frozen=True)
class PlanOptions:
    run_only: Sequence[str] | None = None
    force_run_failed: bool = True


@dataclass(eq=False)
class PlanEntry:
    node: StepNode
    action: Action
    reason: str
    status: StepStatus | None = None
    status_record: StatusRecord | None = None
    changed_fields: list[FieldChange] = field(default_factory=list)
    previous_output: str | None = None
    warnings: list[str] = field(default_factory=list)
    refused_failure: bool = False

    @property
    def name(self) -> str:
        return self.node.name

    @property
    def output_path(self) -> str:
        return self.node.output_path

    @property
    def estimate(self) -> ComputeEstimate | None:
        return self.node.step.estimate

    def to_json(self) -> dict[str, Any]:
        estimate = self.estimate
        return {
            "name": self.name,
            "key": self.node.key,
            "output_path": self.output_path,
            "action": self.action,
            "reason": self.reason,
            "status": self.status.value if self.status else None,
            "changed_fields": [c.to_json() for c in self.changed_fields],
            "previous_output": self.previous_output,
            "dependencies": [d.key for d in self.node.dependencies],
            "warnings": self.warnings,
            "estimate": None if estimate is None else {
                "flops": estimate.flops, "device_hours": estimate.device_hours},
        }


@dataclass
class Plan:
    prefix: str
    graph: StepGraph
    entries: list[PlanEntry]

    def entry_of(self, node: StepNode) -> PlanEntry:
        return self._by_node[node]

    @functools.cached_property
    def _by_node(self) -> dict[StepNode, PlanEntry]:
        return {e.node: e for e in self.entries}

    def totals(self) -> dict[str, Any]:
        counts = {"run": 0, "skip": 0, "wait": 0}
        flops = hours = 0.0
        for entry in self.entries:
            counts[entry.action] += 1
            if entry.action != "skip" and entry.estimate is not None:
                flops += entry.estimate.flops
                hours += entry.estimate.device_hours
        return {"steps": len(self.entries), **counts,
                "estimated_flops": flops, "estimated_device_hours": hours}

    @property
    def warnings(self) -> list[str]:
        return [f"{e.name}: {w}" for e in self.entries for w in e.warnings]

    def to_json(self) -> dict[str, Any]:
        return {"prefix": self.prefix, "steps": [e.to_json() for e in self.entries],
                "totals": self.totals()}


def make_plan(graph: StepGraph, prefix: str, storage: Storage, options: PlanOptions) -> Plan:
    nodes = graph.nodes
    selected = _selected(graph, options.run_only)
    statuses = storage.read_many([status_path(n.output_path) for n in nodes])
    entries: list[PlanEntry] = []
    running: list[PlanEntry] = []
    for node, blob in zip(nodes, statuses, strict=True):
        entry = _decide_from_status(node, None if blob is None else blob.data, options)
        if node not in selected and entry.status is not StepStatus.SUCCESS:
            entry = PlanEntry(node, "skip", "not selected by --run-only", entry.status,
                              entry.status_record, warnings=entry.warnings)
        if entry.status is StepStatus.RUNNING and entry.action == "run":
            running.append(entry)
        entries.append(entry)
    _resolve_running(running, storage)
    _explain_new_versions([e for e in entries if e.action == "run" and e.status is None],
                          storage)
    return Plan(prefix, graph, entries)


def _selected(graph: StepGraph, run_only: Sequence[str] | None) -> set[StepNode]:
    if not run_only:
        return set(graph.nodes)
    patterns = []
    for text in run_only:
        try:
            patterns.append(re.compile(text))
        except re.error as e:
            raise ValueError(f"--run_only {text!r} is not a valid regular expression: {e}") from e
    chosen = [n for n in graph.nodes if any(p.search(n.name) for p in patterns)]
    if not chosen:
        names = ", ".join(n.name for n in graph.nodes[:10])
        raise ValueError(f"--run_only {list(run_only)} matches no step; steps are: {names}")
    return graph.closure(chosen)


def _decide_from_status(node: StepNode, raw: bytes | None, options: PlanOptions) -> PlanEntry:
    if raw is None:
        return PlanEntry(node, "run", "no output yet")
    try:
        record = StatusRecord.decode(raw)
    except CorruptRecordError as e:
        warning = (f"{status_path(node.output_path)} is unreadable ({e}); treating the step as "
                   "not done (its output is kept)")
        logger.warning(warning)
        return PlanEntry(node, "run", "status file unreadable", warnings=[warning])
    status = record.status
    if status is StepStatus.SUCCESS:
        entry = PlanEntry(node, "skip", "already succeeded", status, record)
        fingerprint = code_fingerprint(node.step.fn)
        if record.code_fingerprint and record.code_fingerprint != fingerprint:
            entry.warnings.append(
                f"the code of {getattr(node.step.fn, '__qualname__', 'its function')} changed "
                f"since this output was made (fingerprint {record.code_fingerprint} -> "
                f"{fingerprint}); the output is reused. Change the config or the step's name "
                "to run it again."
            )
        return entry
    if status is StepStatus.FAILED:
        first_line = (record.error or "unknown error").strip().splitlines()[0]
        if not options.force_run_failed:
            return PlanEntry(node, "skip", f"failed before ({first_line}); not retried because "
                             "--force_run_failed is false", status, record, refused_failure=True)
        return PlanEntry(node, "run", f"failed before: {first_line}", status, record)
    if status is StepStatus.CANCELLED:
        return PlanEntry(node, "run", "cancelled before it finished", status, record)
    return PlanEntry(node, "run", "running (lease to be checked)", status, record)


def _resolve_running(entries: list[PlanEntry], storage: Storage) -> None:
    leases = storage.read_many([lease_path(e.output_path) for e in entries])
    for entry, blob in zip(entries, leases, strict=True):
        record = None if blob is None else LeaseRecord.decode(blob.data)
        if record is not None and not record.is_stale():
            entry.action = "wait"
            entry.reason = f"running in another executor: {record.describe()}"
        elif record is None:
            entry.reason = "a previous run stopped without finishing (no lease); taking over"
        else:
            entry.reason = (f"a previous run stopped without finishing (lease of {record.owner} "
                            "is stale); taking over")


def _explain_new_versions(entries: list[PlanEntry], storage: Storage) -> None:
    """For steps with no output yet, find an earlier version of the same step and diff it."""
    listings: dict[str, dict[str, list[str]]] = {}
    wanted: list[tuple[PlanEntry, list[str]]] = []
    for entry in entries:
        folder, _, base = entry.output_path.rpartition("/")
        by_name = listings.get(folder)
        if by_name is None:
            by_name = listings[folder] = _versions_by_name(storage.list_dir(folder))
        others = [f"{folder}/{n}" for n in by_name.get(base[: -HASH_LENGTH - 1], [])
                  if n != base]
        if others:
            wanted.append((entry, others))
    paths = [info_path(p) for _, others in wanted for p in others]
    blobs = iter(storage.read_many(paths))
    for entry, others in wanted:
        infos = []
        for path in others:
            blob = next(blobs)
            if blob is None:
                continue
            try:
                infos.append((path, decode_info(blob.data)))
            except CorruptRecordError as e:
                entry.warnings.append(f"{info_path(path)} is unreadable ({e}); ignored")
        if infos:
            previous_path, previous = max(infos, key=lambda pi: pi[1].get("created", 0.0))
            _describe_change(entry, previous_path, previous)


def _describe_change(entry: PlanEntry, previous_path: str, previous: dict[str, Any]) -> None:
    old_config = previous.get("version", {}).get("config")
    changes = diff_versions(old_config, entry.node.version["config"])
    entry.previous_output = previous_path
    entry.changed_fields = changes
    if changes:
        shown = "; ".join(str(c) for c in changes[:3])
        more = f" (+{len(changes) - 3} more)" if len(changes) > 3 else ""
        entry.reason = f"config changed since {previous_path.rpartition('/')[2]}: {shown}{more}"
    else:
        entry.reason = f"new version of {previous_path.rpartition('/')[2]}"


def _versions_by_name(names: list[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name in names:
        base, dash, digest = name.rpartition("-")
        if dash and len(digest) == HASH_LENGTH and _is_hex(digest):
            out.setdefault(base, []).append(name)
    return out


def _is_hex(text: str) -> bool:
    return all(c in "0123456789abcdef" for c in text)
