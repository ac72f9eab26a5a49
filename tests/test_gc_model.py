"""A reference model of what ``marin gc`` must keep, checked on random prefixes (Hypothesis).

Each example builds a prefix on local disk, as executors leave one: experiments run in
several versions (complete, failed, killed or still running invocations; records of
format 2 and 3; one script typed three ways), outputs named by none, a nested prefix, a
step output holding a snapshot of another (executor-named files inside), pins spelled
oddly, an unreadable invocation record, truncated statuses, live and stale leases,
attempts a resume would adopt, outputs two days old and outputs just written. The model
below, written from the documented rule (docs/storage.md) and nothing of gc's code, says
which files are reachable; ``gc --yes`` (its 24-hour grace period included) must delete
none of them, and every step output that nothing keeps, each deletion listed in its log.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from marin.execution import StepState
from marin.execution.gc import run_gc
from marin.execution.gc.log import GcLogEntry
from marin.execution.gc.pins import pin
from marin.execution.gc.retention import Retention
from marin.execution.invocation_record import InvocationRecord, InvocationStep
from marin.execution.lease import LeaseRecord, boot_id
from marin.execution.prefix_guard import GcRefused
from marin.execution.status import StatusRecord

STEP_NAMES = ("exp/data", "exp/train", "eval")
DEAD_PID = 4_194_311  # above Linux's largest pid_max: no process has it
ENDS = ("complete", "failed", "killed", "running")


@dataclass(frozen=True)
class Run:
    """One invocation: its experiment, a version per step, how it ended."""

    experiment: int
    versions: tuple[int, ...]
    end: str
    legacy: bool  # its record is of format 2: no script, no name


@dataclass(frozen=True)
class Disk:
    """What an output folder holds besides its info record and data."""

    status: str  # SUCCESS, FAILED, RUNNING, truncated, none
    lease: str  # none, live, stale
    attempts: int
    published: bool  # a shared folder names the older attempt as its publisher
    snapshot_of: int | None  # index of another output copied into this one
    resumes: bool | None  # the info's "resumes" (None: a record written before it)
    old: bool  # every file of it was modified two days ago (else: just now)


@dataclass(frozen=True)
class World:
    experiments: tuple[tuple[str, ...], ...]  # the step names of each experiment
    runs: tuple[Run, ...]
    orphans: int  # outputs no invocation names
    disks: tuple[Disk, ...]  # drawn for every output, in order
    pins: tuple[tuple[int, str], ...]  # (output index, spelling)
    keep_last: int
    unreadable: bool
    nested: int | None  # a nested prefix: None, -1 (at the top), or inside that output


#: How a user may type a step key to ``marin pin``: as ``du`` lists it, or oddly.
SPELLINGS = ("{k}", "./{k}", "{k}/", "/{k}", "{k}//", "{d}", "./{dot}")


def _spelled(key: str, spelling: str) -> str:
    return spelling.format(k=key, d=key.replace("/", "//"), dot=key.replace("/", "/./"))


@st.composite
def worlds(draw) -> World:
    experiments = tuple(
        tuple(draw(st.lists(st.sampled_from(STEP_NAMES), min_size=1, max_size=3, unique=True)))
        for _ in range(draw(st.integers(1, 3))))
    runs = []
    for _ in range(draw(st.integers(0, 6))):
        e = draw(st.integers(0, len(experiments) - 1))
        versions = tuple(draw(st.integers(0, 2)) for _ in experiments[e])
        runs.append(Run(e, versions, draw(st.sampled_from(ENDS)),
                        draw(st.integers(0, 4)) == 0))
    orphans = draw(st.integers(0, 2))
    n = len({key for r in runs for key in _keys(experiments, r)}) + orphans
    disks = tuple(Disk(draw(st.sampled_from(("SUCCESS", "SUCCESS", "FAILED", "RUNNING",
                                              "truncated", "none"))),
                       draw(st.sampled_from(("none", "none", "live", "stale"))),
                       draw(st.integers(0, 2)), draw(st.booleans()),
                       draw(st.none() | st.integers(0, max(n - 1, 0))),
                       draw(st.sampled_from((None, True, False))),
                       draw(st.integers(0, 3)) > 0)
                  for _ in range(n))
    pins = tuple(draw(st.lists(st.tuples(st.integers(0, max(n - 1, 0)),
                                         st.sampled_from(SPELLINGS)), max_size=2))) if n else ()
    return World(experiments, tuple(runs), orphans, disks, pins, draw(st.integers(1, 3)),
                 draw(st.integers(0, 5)) == 0,
                 draw(st.none() | st.just(-1) | st.integers(0, n - 1) if n else
                      st.none() | st.just(-1)))


def _keys(experiments: tuple[tuple[str, ...], ...], run: Run) -> list[str]:
    return [f"{name}-{v:08x}" for name, v in zip(experiments[run.experiment], run.versions,
                                                  strict=True)]


# -- the model: which invocations, outputs and files are kept ------------------------------

def _label(i: int, experiment: int) -> str:
    """The experiment as run ``i`` typed it: one script, three spellings."""
    return ("exp{e}.py", "./exp{e}.py", "/work/exp{e}.py")[i % 3].format(e=experiment)


def _experiment(world: World, i: int) -> tuple:
    """Which experiment run ``i`` belongs to: its script and name, with its step names; for
    a record of format 2, the experiment as typed with its step names."""
    run = world.runs[i]
    named = _label(i, run.experiment) if run.legacy else f"exp{run.experiment}"
    return run.legacy, named, world.experiments[run.experiment]


def kept_invocations(world: World) -> set[int]:
    """Per experiment, the newest ``keep_last`` runs and the newest complete one; every run
    that may still be running."""
    kept = set()
    for experiment in {_experiment(world, i) for i in range(len(world.runs))}:
        mine = [i for i in range(len(world.runs))
                if _experiment(world, i) == experiment][::-1]  # the newest first
        kept |= set(mine[:world.keep_last])
        kept |= set([i for i in mine if world.runs[i].end == "complete"][:1])
    return kept | {i for i, r in enumerate(world.runs) if r.end == "running"}


@dataclass
class Built:
    prefix: Path
    outputs: list[str] = field(default_factory=list)  # the keys, in the disks' order
    nested: str | None = None  # the nested prefix's folder, ending with "/"
    attempts: dict[str, list[str]] = field(default_factory=dict)  # key -> run ids, in order
    files: set[str] = field(default_factory=set)


def reachable(world: World, built: Built) -> tuple[set[str], set[str]]:
    """The files gc must keep, and the outputs gc must delete whole."""
    named_by_kept = {k for i in kept_invocations(world)
                     for k in _keys(world.experiments, world.runs[i])}
    pinned = {built.outputs[i] for i, _ in world.pins}
    keep_all = world.unreadable  # an unreadable record might name any output
    nested = {f for f in built.files if built.nested and f.startswith(built.nested)}
    kept, doomed = set(), set()
    for key, disk in zip(built.outputs, world.disks, strict=True):
        folder = f"{built.prefix}/{key}/"
        mine = {f for f in built.files if f.startswith(folder)} - nested
        holds_nested = bool(built.nested) and built.nested.startswith(folder)
        if disk.lease == "live" or not disk.old:  # running, or in the grace period: untouched
            kept |= mine
        elif keep_all or key in named_by_kept or key in pinned or holds_nested:
            runs = built.attempts.get(key, [])
            adopted = runs[0] if disk.published and runs else (runs[-1] if runs else None)
            for f in mine:
                attempt = f[len(folder):].split("/")
                if attempt[0] != ".attempts":
                    kept.add(f)
                elif disk.status != "SUCCESS" and disk.resumes is not False \
                        and attempt[1] == adopted:
                    kept.add(f)  # a resume continues from it
        else:
            doomed.add(key)
    in_outputs = {f for f in built.files
                  if any(f.startswith(f"{built.prefix}/{k}/") for k in built.outputs)}
    # .marin, the nested prefix (another prefix's gc judges it), the rest
    return kept | nested | (built.files - in_outputs), doomed


# -- building the prefix as executors leave it ---------------------------------------------

def _write(path: Path, data: bytes | str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)


def _output(prefix: Path, key: str, disk: Disk, runs: list[str]) -> None:
    out = prefix / key
    info = {"key": key, "name": key.rsplit("-", 1)[0], "version": {"config": key}}
    _write(out / ".executor_info", json.dumps(
        info if disk.resumes is None else {**info, "resumes": disk.resumes}))
    _write(out / "data.bin", key * 3)
    if disk.status == "truncated":
        _write(out / ".executor_status", b'{"status": "SUCC')
    elif disk.status != "none":
        _write(out / ".executor_status",
               StatusRecord(StepState.from_stored(disk.status), runs[-1] if runs else "r",
                            time.time()).encode())
    now = time.time()
    if disk.lease != "none":
        live = disk.lease == "live"
        _write(out / ".executor_lease", LeaseRecord(
            "owner", socket.gethostname(), os.getpid() if live else DEAD_PID,
            now if live else now - 10_000, 3600.0 if live else 30.0, 1, boot_id()).encode())
    for run in runs:
        _write(out / ".attempts" / run / "part-0", run)
    if disk.published and runs:
        _write(out / "checkpoints" / ".published_by", runs[0])


def build(world: World, root: Path) -> Built:
    prefix = Path(tempfile.mkdtemp(dir=root)) / "p"
    built = Built(prefix)
    keys = list(dict.fromkeys(k for r in world.runs for k in _keys(world.experiments, r)))
    built.outputs = keys + [f"exp/orphan-{i:08x}" for i in range(world.orphans)]
    for n, (key, disk) in enumerate(zip(built.outputs, world.disks, strict=True)):
        built.attempts[key] = [f"2025010{n % 10}-12000{a}-{n:04x}{a:04x}"
                               for a in range(disk.attempts)]
        _output(prefix, key, disk, built.attempts[key])
    for key, disk in zip(built.outputs, world.disks, strict=True):
        if disk.snapshot_of is not None and built.outputs[disk.snapshot_of] != key:
            source = prefix / built.outputs[disk.snapshot_of]
            shutil.copytree(source, prefix / key / "snapshot",
                            ignore=shutil.ignore_patterns(".executor_lease", ".attempts"))
    for key, disk in zip(built.outputs, world.disks, strict=True):
        if disk.old:
            then = time.time() - 2 * 86400
            for path in (prefix / key).rglob("*"):
                os.utime(path, (then, then))
    folder = prefix / ".marin" / "invocations"
    for i, run in enumerate(world.runs):
        _write(folder / f"2025010{i}-120000-{i:08x}.json", json.dumps(_record(world, run, i,
                                                                              prefix)))
    if world.unreadable:
        _write(folder / "20250109-120000-ffffffff.json", b'{"id": "x", "steps": [{"ke')
    if world.nested is not None:  # a prefix of its own inside: another team's executor wrote it
        inner = prefix / (built.outputs[world.nested] if world.nested >= 0 else "") / "team"
        built.nested = f"{inner}/"
        _output(inner, "train-000000ff", Disk("SUCCESS", "none", 1, False, None, None, True),
                ["r1"])
        _write(inner / ".marin" / "invocations" / "20250101-120000-00000000.json", "{}")
    for index, spelling in world.pins:
        pin(str(prefix), _spelled(built.outputs[index], spelling))
    built.files = {str(p) for p in prefix.rglob("*") if p.is_file()}
    return built


def _record(world: World, run: Run, i: int, prefix: Path) -> dict:
    names = world.experiments[run.experiment]
    keys = _keys(world.experiments, run)
    ended = None if run.end in ("killed", "running") else 1_735_732_800.0 + i + 0.5
    outcomes = ["succeeded"] * len(keys)
    if run.end == "failed":
        outcomes[-1] = "failed"
    steps = tuple(InvocationStep(k, n, f"{prefix}/{k}", action="run",
                                 outcome=o if ended else None)
                  for k, n, o in zip(keys, names, outcomes, strict=True))
    record = InvocationRecord(
        f"2025010{i}-120000-{i:08x}", prefix=str(prefix), experiment=_label(i, run.experiment),
        script=f"/work/exp{run.experiment}.py", name=f"exp{run.experiment}",
        host=socket.gethostname(), pid=os.getpid() if run.end == "running" else DEAD_PID,
        started=1_735_732_800.0 + i, ended=ended, steps=steps).to_json()
    if run.legacy:  # as the code before format 3 wrote it
        del record["script"], record["name"]
        record["format"] = 2
    return record


@settings(max_examples=500, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(world=worlds())
@example(world=World(  # a nested prefix in one output kept every output beside it
    experiments=(("exp/data",),), runs=(Run(0, (0,), "complete", False),), orphans=1,
    disks=(Disk("SUCCESS", "none", 0, False, None, None, False),
           Disk("SUCCESS", "none", 0, False, None, None, True)),
    pins=(), keep_last=1, unreadable=False, nested=0))
@example(world=World(  # a snapshot's status outlived the deleted output holding it
    experiments=(("exp/data",),), runs=(), orphans=2,
    disks=(Disk("SUCCESS", "none", 0, False, 1, None, True),
           Disk("SUCCESS", "none", 0, False, None, None, False)),
    pins=(), keep_last=1, unreadable=False, nested=None))
def test_gc_deletes_nothing_reachable_and_every_output_nothing_keeps(world: World,
                                                                     tmp_path: Path):
    built = build(world, tmp_path)
    kept, doomed = reachable(world, built)
    try:
        run_gc(str(built.prefix), Retention(keep_last=world.keep_last), yes=True)  # 24 h grace
    except GcRefused as e:  # an unreadable record: refused, naming it
        assert world.unreadable and "ffffffff.json is unreadable" in str(e), e
    else:
        assert not world.unreadable
    left = {str(p) for p in built.prefix.rglob("*") if p.is_file()}
    deleted = built.files - left
    assert not deleted & kept, sorted(deleted & kept)
    survivors = {k for k in doomed
                 if any(f.startswith(f"{built.prefix}/{k}/") for f in left)}
    assert not survivors, sorted(survivors)
    logs = list((built.prefix / ".marin" / "gc").glob("*.jsonl"))
    assert left <= built.files | {str(p) for p in logs}
    logged = [e.path + "/" for log in logs for e in GcLogEntry.decode_lines(log.read_bytes())]
    assert all(any(f.startswith(p) for p in logged) for f in deleted)  # each one in the log
