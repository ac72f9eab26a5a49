"""Folders that a step's attempts share inside its output, so that neither a resume nor the
commit copies what they hold (a training run's checkpoints).

    shared = SharedFolder.of(f"{output}/.attempts/{run_id}/checkpoints")
    shared.folder          # f"{output}/checkpoints": what readers of the output see
    shared.own             # f"{output}/checkpoints/runs/{run_id}": where this attempt writes
    if shared.publish("step_00000100", {"run": run_id}):   # only while it holds the lease
        ...
    shared.prune("step_00000010")                          # the holder's deletes only

An attempt writes only under its own ``runs/<run id>`` folder, each entry complete before
it counts (orbax's step folders), then publishes it with a small marker
``<name>.ref`` beside ``runs/``, written only once the attempt has read the step's lease and
found it its own. Deletes go through ``prune``, under the same check. Everything else
of the attempt (metrics, summaries) commits as before, by the move of its attempt folder.
``.published_by`` names the attempt that published last: a resume adopts that attempt's
other files, so that its metrics go with its checkpoints.

See docs/design.md ("Shared folders") for why a paused or killed attempt still cannot
corrupt what a later attempt or a reader sees.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from marin.execution._faults import fault_point
from marin.execution.lease import LeaseRecord
from marin.execution.status import ATTEMPTS_FOLDER, lease_path
from marin.execution.step import join_path
from marin.storage import Storage, get_storage

__all__ = ["PUBLISHED_BY", "RUNS", "SharedFolder", "adopted_attempt", "published_by",
           "shared_names"]

RUNS = "runs"
PUBLISHED_BY = ".published_by"
MARKER_SUFFIX = ".ref"


@dataclass(frozen=True)
class SharedFolder:
    output: str
    """The step's output folder."""
    name: str
    """The shared folder's name at the top of the output (``checkpoints``)."""
    run_id: str

    @classmethod
    def of(cls, path: str) -> SharedFolder | None:
        """The shared folder for ``path`` when it is ``<output>/.attempts/<run id>/<name>``
        (where the executor points a step), else None: a step run on its own keeps its
        folder as it is."""
        parts = path.rstrip("/").split("/")
        if len(parts) < 4 or parts[-3] != ATTEMPTS_FOLDER or not parts[-2] or not parts[-1]:
            return None
        return cls("/".join(parts[:-3]), parts[-1], parts[-2])

    @property
    def folder(self) -> str:
        return join_path(self.output, self.name)

    @property
    def own(self) -> str:
        return join_path(self.folder, f"{RUNS}/{self.run_id}")

    @property
    def storage(self) -> Storage:
        return get_storage(self.output)

    def holds_lease(self) -> bool:
        """This attempt's run holds the step's lease and it is live."""
        blob = self.storage.read(lease_path(self.output))
        record = None if blob is None else LeaseRecord.decode(blob.data)
        return (record is not None and record.owner == self.run_id
                and record.takeover_reason() is None)

    def marker(self, entry: str) -> str:
        return join_path(self.folder, entry + MARKER_SUFFIX)

    def publish(self, entry: str, record: dict[str, object]) -> bool:
        """Publish the complete entry ``runs/<run id>/<entry>``; False (nothing written)
        when this attempt no longer holds the lease."""
        fault_point("publish")
        if not self.holds_lease():
            return False
        storage = self.storage
        storage.write(self.marker(entry), json.dumps({**record, "run": self.run_id}).encode())
        storage.write(join_path(self.folder, PUBLISHED_BY), self.run_id.encode())
        return True

    def published(self) -> dict[str, str]:
        """Entry name -> the run whose folder holds it, for every published entry."""
        storage = self.storage
        names = [n[:-len(MARKER_SUFFIX)] for n in storage.list_dir(self.folder)
                 if n.endswith(MARKER_SUFFIX)]
        found = {}
        for name, blob in zip(names, storage.read_many([self.marker(n) for n in names]),
                              strict=True):
            run = _run_of(blob.data) if blob is not None else None
            if run is not None:
                found[name] = run
        return found

    def entry_path(self, entry: str, run: str) -> str:
        return join_path(self.folder, f"{RUNS}/{run}/{entry}")

    def prune(self, entry: str) -> bool:
        """Unpublish ``entry`` and delete its folder; False (nothing deleted) unless this
        attempt holds the lease. The marker goes first: a reader never finds a marker whose
        folder is being deleted by this call."""
        run = self.published().get(entry)
        if run is None or not self.holds_lease():
            return False
        storage = self.storage
        blob = storage.read(self.marker(entry))
        if blob is None or not storage.delete_if_unchanged(self.marker(entry), blob.token):
            return False
        storage.delete_tree(self.entry_path(entry, run))
        return True


def _run_of(raw: bytes) -> str | None:
    try:
        run = json.loads(raw).get("run")
    except (ValueError, AttributeError):
        return None
    return run if isinstance(run, str) and run and "/" not in run else None


def shared_names(storage: Storage, output: str) -> list[str]:
    """The names at the top of ``output`` that are shared folders (published to)."""
    names = [n for n in storage.list_dir(output) if not n.startswith(".")]
    found = storage.exists_many([join_path(output, f"{n}/{PUBLISHED_BY}") for n in names])
    return sorted(n for n, yes in zip(names, found, strict=True) if yes)


def published_by(storage: Storage, output: str, names: list[str] | None = None) -> str | None:
    """The attempt that last published to a shared folder of ``output``, if any (``names``:
    the shared folders, when the caller's listing shows them already)."""
    for name in sorted(names) if names is not None else shared_names(storage, output):
        blob = storage.read(join_path(output, f"{name}/{PUBLISHED_BY}"))
        if blob is not None and blob.data.strip():
            return blob.data.decode().strip()
    return None


def adopted_attempt(attempts: list[str], publisher: str | None) -> str | None:
    """The attempt a resume adopts, of the earlier ``attempts`` (their run ids) of a step:
    the one that published last to a shared folder (``publisher``, ``published_by``), its
    metrics going with its checkpoints, else the newest (run ids sort by their start). The
    one rule the worker resumes by and gc keeps by."""
    earlier = sorted(attempts)
    return publisher if publisher in earlier else (earlier[-1] if earlier else None)
