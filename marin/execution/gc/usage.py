"""What a prefix holds and what ``marin gc`` would free: ``marin du`` and the dashboard's
storage page.

    usage = prefix_usage("gs://bucket/prefix")
    for row in usage.rows:                 # one per step output, the newest first
        print(row.experiment, row.step, row.version, row.bytes, row.gc_frees)
    usage.by_experiment                    # {"isoflop-tiny": 12_345_678, ...}
    usage.unreachable                      # the gc candidates, with their reasons

Only reads: nothing here deletes.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass

from marin.execution.gc.collector import Candidate, collect
from marin.execution.gc.reach import prefix_of
from marin.execution.gc.scan import Scan, read_records, scan_prefix
from marin.execution.status import STATUS_FILE
from marin.storage import get_storage

__all__ = ["Usage", "UsageRow", "prefix_usage"]

NO_EXPERIMENT = "(none)"


@dataclass(frozen=True)
class UsageRow:
    experiment: str
    """The experiment of the latest invocation naming the output (``(none)``: none does)."""
    step: str
    key: str
    """The output's path under the prefix, ``name-hash``."""
    bytes: int
    modified: float
    gc_frees: int
    """Bytes ``marin gc --older-than 0`` (no ``--keep``) would delete from this output (by
    default gc waits until they are 24 hours old)."""
    status: str | None

    @property
    def version(self) -> str:
        return self.key.rsplit("-", 1)[-1]

    def to_json(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class Usage:
    prefix: str
    rows: list[UsageRow]
    unreachable: list[Candidate]
    nested: tuple[str, ...] = ()
    """Prefixes of their own inside this one (``reach.nested_prefixes``): left out."""
    unreadable: tuple[str, ...] = ()
    """Invocation records and pins that cannot be read: while any is there gc frees
    nothing (``Scan.unreadable``)."""

    @property
    def bytes(self) -> int:
        return sum(r.bytes for r in self.rows)

    @property
    def gc_frees(self) -> int:
        return sum(c.bytes for c in self.unreachable)

    @property
    def by_experiment(self) -> dict[str, int]:
        return _totals((r.experiment, r.bytes) for r in self.rows)

    @property
    def by_step(self) -> dict[str, int]:
        return _totals((r.step, r.bytes) for r in self.rows)


def _totals(pairs) -> dict[str, int]:
    totals: Counter[str] = Counter()
    for name, size in pairs:
        totals[name] += size
    return dict(totals.most_common())


def prefix_usage(prefix: str, scan: Scan | None = None) -> Usage:
    prefix = prefix_of(prefix)
    scan = scan or scan_prefix(prefix)
    read_records(get_storage(prefix), prefix, list(scan.outputs.values()), (STATUS_FILE,))
    unreachable = collect(scan, [], older_than=None)  # whatever its age: gc's grace aside
    frees: Counter[str] = Counter()
    for c in unreachable:
        frees[c.output] += c.bytes
    experiment: dict[str, str] = {}
    for inv in sorted(scan.invocations, key=lambda i: i.started):
        for key in inv.keys:  # the latest invocation naming a step says whose it is
            experiment[key] = inv.experiment
    rows = [UsageRow(experiment.get(o.key, NO_EXPERIMENT), o.name, o.key, o.bytes, o.newest,
                     frees[o.key], o.status.status.stored if o.status is not None else None)
            for o in scan.outputs.values()]
    rows.sort(key=lambda r: (-r.modified, r.key))
    return Usage(prefix, rows, unreachable, tuple(scan.nested), tuple(scan.unreadable))
