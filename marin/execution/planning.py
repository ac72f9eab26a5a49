"""The decision code shared by dry runs and real runs: what to do with each step, and why.

    graph = StepGraph.build(steps, prefix)
    plan = make_plan(graph, prefix, get_storage(prefix), PlanOptions(run_only=["train/.*"]))
    for entry in plan.entries:
        print(entry.name, entry.action, entry.reason)   # "train/tiny  run  no output yet"
    plan.totals()   # {"steps": 4, "run": 1, "skip": 3, "wait": 0, "estimated_flops": 0.0, ...}

Reading is batched: one ``read_many`` for all status files, one ``exists_many`` for the
outputs that SUCCESS statuses name, one ``read_many`` for the leases of steps that claim to
be running, one listing per output folder to find earlier versions of a step, and one
``read_many`` for their info files. Nothing is written.
"""

from __future__ import annotations

import functools
import logging
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from marin.execution.diff import FieldChange, diff_versions
from marin.execution.graph import StepGraph, StepNode, nonblocking_keys
from marin.execution.hashing import HASH_LENGTH
from marin.execution.lease import LeaseRecord
from marin.execution.states import StepState
from marin.execution.status import (
    CorruptRecordError,
    StatusRecord,
    code_fingerprint,
    decode_info,
    info_path,
    lease_path,
    status_path,
)
from marin.execution.step import ComputeEstimate
from marin.storage import Storage
from marin.storage.files import local_path, resolve_under

logger = logging.getLogger("marin.executor")

Action = Literal["run", "skip", "wait"]


@dataclass(frozen=True)
class PlanOptions:
    """What the user asked of the plan.

    Attributes:
        run_only: regular expressions; only matching steps and their dependencies run.
        force_run_failed: retry steps that failed in an earlier invocation.
        force_run: regular expressions; matching steps run even if they succeeded before.

    Messages name an option by its field in backquotes (`` `run_only` ``); a front end
    spells it as its command line does (``marin.execution.frontend.command_line.Style``).
    """

    run_only: Sequence[str] | None = None
    force_run_failed: bool = True
    force_run: Sequence[str] | None = None


@dataclass(eq=False)
class PlanEntry:
    node: StepNode
    action: Action
    reason: str
    status: StepState | None = None
    status_record: StatusRecord | None = None
    changed_fields: list[FieldChange] = field(default_factory=list)
    previous_output: str | None = None
    warnings: list[str] = field(default_factory=list)
    refused_failure: bool = False
    rerun: bool = False
    """The step runs although its status is SUCCESS (forced, or its output is missing)."""

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
            "nonblocking_dependencies": nonblocking_keys(self.node),
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


#: Statuses whose step, run again, resumes when it is resumable (ExecutorStep.resumes).
_UNFINISHED = frozenset({StepState.RUNNING, StepState.FAILED, StepState.CANCELLED})


def make_plan(graph: StepGraph, prefix: str, storage: Storage, options: PlanOptions) -> Plan:
    nodes = graph.nodes
    _check_folders(nodes, prefix)
    selected = _selected(graph, options.run_only, "`run_only`")
    forced = _matching(graph, options.force_run, "`force_run`")
    statuses = storage.read_many([status_path(n.output_path) for n in nodes])
    entries: list[PlanEntry] = []
    running: list[PlanEntry] = []
    fingerprints: dict[int, str] = {}  # id(fn): most steps share a few functions
    for node, blob in zip(nodes, statuses, strict=True):
        entry = _decide_from_status(node, None if blob is None else blob.data, options,
                                    fingerprints)
        if node not in selected and entry.status is not StepState.SUCCEEDED:
            entry = PlanEntry(node, "skip", "not selected by `run_only`",
                              entry.status, entry.status_record, warnings=entry.warnings)
        elif node in forced and entry.action == "skip":
            entry = PlanEntry(node, "run", "forced by `force_run`",
                              entry.status, entry.status_record, warnings=entry.warnings,
                              rerun=True)
        if entry.status is StepState.RUNNING and entry.action == "run":
            running.append(entry)
        entries.append(entry)
    _check_outputs([e for e in entries if e.action == "skip" and e.status_record is not None
                    and e.status_record.outputs], storage)
    _resolve_running(running, storage)
    for entry in entries:  # a new attempt of these starts from what the unfinished one left
        if entry.action == "run" and entry.status in _UNFINISHED and entry.node.step.resumes:
            entry.reason += "; resumes from what the unfinished attempt left"
    _explain_new_versions([e for e in entries if e.action == "run" and e.status is None],
                          storage)
    return Plan(prefix, graph, entries)


def _check_folders(nodes: Sequence[StepNode], prefix: str) -> None:
    """On a local prefix, refuse a step folder (or a folder above it) that a symbolic link
    leads out of the prefix: nothing is read or written through it. One listing per parent
    folder finds the links among the step folders."""
    if local_path(prefix) is None:
        return
    links: dict[str, frozenset[str]] = {}
    for node in nodes:
        folder, _, name = node.output_path.rpartition("/")
        found = links.get(folder)
        if found is None:
            resolve_under(prefix, folder)
            found = links[folder] = _links_in(local_path(folder) or folder)
        if name in found:
            resolve_under(prefix, node.output_path)


def _links_in(folder: str) -> frozenset[str]:
    try:
        with os.scandir(folder) as entries:
            return frozenset(e.name for e in entries if e.is_symlink())
    except (FileNotFoundError, NotADirectoryError):
        return frozenset()


def _compile(patterns: Sequence[str], flag: str) -> list[re.Pattern[str]]:
    out = []
    for text in patterns:
        try:
            out.append(re.compile(text))
        except re.error as e:
            raise ValueError(f"{flag} {text!r} is not a valid regular expression: {e}") from e
    return out


def _matching(graph: StepGraph, patterns: Sequence[str] | None, flag: str) -> set[StepNode]:
    if not patterns:
        return set()
    compiled = _compile(patterns, flag)
    chosen = {n for n in graph.nodes if any(p.search(n.name) for p in compiled)}
    if not chosen:
        names = ", ".join(n.name for n in graph.nodes[:10])
        raise ValueError(f"{flag} {list(patterns)} matches no step; steps are: {names}")
    return chosen


def _selected(graph: StepGraph, run_only: Sequence[str] | None, flag: str) -> set[StepNode]:
    if not run_only:
        return set(graph.nodes)
    return graph.closure(_matching(graph, run_only, flag))


def _check_outputs(entries: list[PlanEntry], storage: Storage) -> None:
    """A SUCCESS whose committed files are gone is not success: run the step again."""
    paths = [(e, f"{e.output_path}/{name}") for e in entries for name in e.status_record.outputs]
    found = storage.exists_many([p for _, p in paths])
    missing: dict[int, tuple[PlanEntry, list[str]]] = {}
    for (entry, path), exists in zip(paths, found, strict=True):
        if not exists:
            missing.setdefault(id(entry), (entry, []))[1].append(path.rpartition("/")[2])
    for entry, names in missing.values():
        entry.action, entry.rerun = "run", True
        entry.reason = (f"output missing: {', '.join(names[:3])}"
                        f"{' ...' if len(names) > 3 else ''} (status SUCCESS, files gone)")


def _decide_from_status(node: StepNode, raw: bytes | None, options: PlanOptions,
                        fingerprints: dict[int, str]) -> PlanEntry:
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
    if status is StepState.SUCCEEDED:
        entry = PlanEntry(node, "skip", "already succeeded", status, record)
        fn = node.step.fn
        fingerprint = fingerprints.get(id(fn))
        if fingerprint is None:
            fingerprint = fingerprints[id(fn)] = code_fingerprint(fn)
        if record.code_fingerprint and record.code_fingerprint != fingerprint:
            entry.warnings.append(
                f"the code of {getattr(node.step.fn, '__qualname__', 'its function')} changed "
                f"since this output was made (fingerprint {record.code_fingerprint} -> "
                f"{fingerprint}); the output is reused. Change the config or the step's name "
                "to run it again."
            )
        return entry
    if status is StepState.FAILED:
        first_line = (record.error or "unknown error").strip().splitlines()[0]
        if not options.force_run_failed:
            return PlanEntry(node, "skip", f"failed before ({first_line}); not retried because "
                             "`force_run_failed` is false", status, record,
                             refused_failure=True)
        return PlanEntry(node, "run", f"failed before: {first_line}", status, record)
    if status is StepState.CANCELLED:
        return PlanEntry(node, "run", "cancelled before it finished", status, record)
    return PlanEntry(node, "run", "running (lease to be checked)", status, record)


def _resolve_running(entries: list[PlanEntry], storage: Storage) -> None:
    leases = storage.read_many([lease_path(e.output_path) for e in entries])
    for entry, blob in zip(entries, leases, strict=True):
        record = None if blob is None else LeaseRecord.decode(blob.data)
        reason = None if record is None else record.takeover_reason()
        if record is None:
            entry.reason = "a previous invocation stopped without finishing (no lease); taking over"
        elif reason is None:
            entry.action = "wait"
            entry.reason = f"running in another executor: {record.describe()}"
        elif reason == "dead":
            entry.reason = (f"lease taken over from a dead pid: {record.describe()}; that "
                            "process is gone, taking over at once")
        elif reason == "future":
            warning = (f"the lease of {record.describe()} was renewed more than its ttl in "
                       "the future (clock skew or a hand edit); treated as stale")
            logger.warning(warning)
            entry.warnings.append(warning)
            entry.reason = "lease renewed in the future (clock skew); taking over"
        else:
            entry.reason = (f"a previous invocation stopped without finishing (lease of "
                            f"{record.owner} is stale); taking over")


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
