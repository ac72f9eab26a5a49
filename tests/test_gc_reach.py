"""What ``marin gc`` takes for a step output and which roots it reads, on prefixes built by
the real executor and collected by the real command line: a step's snapshot of its input,
a nested prefix, pins spelled oddly, an unreadable invocation record, a resumable step's
attempt and a ``file://`` prefix."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from marin.execution import (
    Executor,
    ExecutorStep,
    output_path_of,
    this_output_path,
    unversioned,
)
from marin.execution.ids import time_ordered_id
from marin.storage.files import local_path
from tests.conftest import ROOT


@dataclass(frozen=True)
class Cfg:
    output_path: str
    version: int = 0
    source: str | None = None
    fail_after: int = 0


def _write(cfg: Cfg) -> None:
    out = Path(local_path(cfg.output_path))  # a step under a file:// prefix gets a URL
    out.mkdir(parents=True, exist_ok=True)
    (out / "out.txt").write_text(f"v{cfg.version}")
    if cfg.source is not None:  # a snapshot of the input, executor records and all
        shutil.copytree(cfg.source, out / "snapshot")


def _units(cfg: Cfg) -> None:
    """Appends units to ``units.txt`` after those an adopted attempt left; fails once
    ``fail_after`` units are done in all (when set)."""
    out = Path(cfg.output_path)
    out.mkdir(parents=True, exist_ok=True)
    done = (out / "units.txt").read_text().split() if (out / "units.txt").exists() else []
    for unit in range(len(done) + 1, len(done) + 4):
        with open(out / "units.txt", "a") as f:
            f.write(f"{unit}\n")
        if unit == cfg.fail_after:
            raise RuntimeError(f"stopped after unit {unit} on purpose")


def _run(prefix: str, steps: list[ExecutorStep], experiment: str = "exp.py"):
    return Executor(prefix, max_concurrent=1).run(steps, experiment=experiment)


def _marin(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), *sys.path]))
    return subprocess.run([sys.executable, "-m", "marin.cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300, env=env)


def _gc(prefix: str, *extra: str) -> dict:
    done = _marin("gc", "--prefix", prefix, "--older-than", "0", "--json", *extra)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*")
            if p.is_file()}


def _versions(prefix: Path, name: str = "exp/a") -> tuple[Path, Path]:
    """Two versions of one step under ``prefix``: the older one unreachable."""
    assert _run(str(prefix), [ExecutorStep(name, _write, Cfg(this_output_path(), 1))]).ok
    (old,) = prefix.glob(f"{name}-*")
    assert _run(str(prefix), [ExecutorStep(name, _write, Cfg(this_output_path(), 2))]).ok
    (new,) = set(prefix.glob(f"{name}-*")) - {old}
    return old, new


def test_a_snapshot_inside_an_output_is_kept_with_it(tmp_path: Path):
    prefix = tmp_path / "p"
    a = ExecutorStep("a", _write, Cfg(this_output_path()))
    snap = ExecutorStep("snap", _write, Cfg(this_output_path(), source=output_path_of(a)))
    assert _run(str(prefix), [a, snap]).ok
    (a_out,), (snap_out,) = prefix.glob("a-*"), prefix.glob("snap-*")
    backup = prefix / "backup" / a_out.name  # a copy of an output that no executor made
    shutil.copytree(a_out, backup)
    before = _files(prefix)
    assert any(p.startswith(f"{snap_out.name}/snapshot/.executor_") for p in before)
    dry = _gc(str(prefix))
    assert dry["candidates"] == []
    _gc(str(prefix), "--yes")
    assert _files(prefix) == before  # the snapshot, and the copy elsewhere, whole
    du = json.loads(_marin("du", "--prefix", str(prefix), "--json").stdout)
    assert {r["key"] for r in du["steps"]} == {a_out.name, snap_out.name}
    wrong = _marin("pin", f"{snap_out.name}/snapshot", "--prefix", str(prefix))
    assert wrong.returncode == 2 and "no step output" in wrong.stderr
    assert len(wrong.stderr.strip().splitlines()) == 1


def test_an_output_inside_a_kept_output_is_kept(tmp_path: Path):
    prefix = tmp_path / "p"
    a = ExecutorStep("a", _write, Cfg(this_output_path()))
    assert _run(str(prefix), [a]).ok
    (a_out,) = prefix.glob("a-*")
    versions = [ExecutorStep(f"{a_out.name}/inner", _write, Cfg(this_output_path(), v))
                for v in (1, 2)]
    assert _run(str(prefix), [a, versions[0]]).ok
    (inner,) = a_out.glob("inner-*")  # a step output inside another one
    assert _run(str(prefix), [a, versions[1]]).ok  # the first inner version: unreachable
    assert (inner / ".executor_status").exists()
    assert _gc(str(prefix), "--yes")["candidates"] == []
    assert (inner / "out.txt").read_text() == "v1"


def test_gc_at_a_parent_prefix_leaves_a_nested_prefix_alone(tmp_path: Path):
    top = tmp_path / "np"
    old, new = _versions(top)
    team = top / "teamx"
    assert _run(str(team), [ExecutorStep("b", _write, Cfg(this_output_path()))],
                experiment="team.py").ok
    (b_out,) = team.glob("b-*")
    team_files = _files(team)
    dry = _marin("gc", "--prefix", str(top), "--older-than", "0")
    assert dry.returncode == 0, dry.stderr
    assert [line for line in dry.stdout.splitlines() if "left alone" in line] == [
        f"left alone {team}: a prefix of its own (it holds .marin/); run marin gc "
        f"--prefix {team} for it"]
    done = _gc(str(top), "--yes")
    assert [c["path"] for c in done["candidates"]] == [str(old)]
    assert not old.exists() and (new / ".executor_status").exists()
    assert _files(team) == team_files  # nothing of the nested prefix went
    assert _gc(str(team))["candidates"] == []  # its own gc keeps its own step, too
    assert b_out.exists()


def test_an_output_holding_a_nested_prefix_is_kept_with_it(tmp_path: Path):
    top = tmp_path / "np"
    old, _ = _versions(top)
    inner = old / "inner"  # a prefix of its own inside an output nothing names any more
    assert _run(str(inner), [ExecutorStep("b", _write, Cfg(this_output_path()))]).ok
    before = _files(old)
    done = _gc(str(top), "--yes")
    assert done["candidates"] == [] and _files(old) == before
    assert done["notes"] == [f"left alone {inner}: a prefix of its own (it holds .marin/); "
                             f"run marin gc --prefix {inner} for it"]
    du = _marin("du", "--prefix", str(top))
    assert f"left out {inner}: a prefix of its own" in du.stdout


def test_nested_prefixes_are_the_outermost_folders_holding_dot_marin():
    from marin.execution.gc.reach import nested_prefixes

    paths = [".marin/invocations/1.json", "a-1/.executor_info", "t/.marin/pins/x",
             "t/u/.marin/invocations/2.json", "v/w/.marin/gc.lease", "x/.marin"]
    assert nested_prefixes(paths) == {"t", "v/w"}


@pytest.mark.parametrize("spelling", ["./{key}", "{dir}//{base}", "{key}/", "{prefix}/{key}"])
def test_a_pin_spelled_oddly_protects_the_output_it_lists(tmp_path: Path, spelling: str):
    prefix = tmp_path / "p"
    old, _ = _versions(prefix)
    key = str(old.relative_to(prefix))
    typed = spelling.format(key=key, dir="exp", base=old.name, prefix=prefix)
    pinned = _marin("pin", typed, "--prefix", str(prefix))
    assert pinned.returncode == 0, pinned.stderr
    assert _marin("pin", "--list", "--prefix", str(prefix)).stdout.split() == [key]
    assert _gc(str(prefix), "--yes")["candidates"] == []
    assert (old / ".executor_status").exists()
    assert _marin("unpin", typed, "--prefix", str(prefix)).returncode == 0
    assert [c["step"] for c in _gc(str(prefix))["candidates"]] == [key]


def test_step_keys_are_spelled_one_way():
    from marin.execution.gc.reach import step_key

    assert step_key("./exp//a-1/") == step_key("exp/./a-1") == "exp/a-1"
    assert step_key("exp/../a-1") is None and step_key("/./") is None


def test_an_unreadable_invocation_record_keeps_everything(tmp_path: Path):
    prefix = tmp_path / "p"
    _, new = _versions(prefix)
    records = sorted((prefix / ".marin" / "invocations").glob("*.json"))
    (latest,) = [r for r in records if new.name in r.read_text()]
    latest.write_text('{"format": 2, "steps": [')  # cut short, as a crash can leave it
    before = _files(prefix)
    dry = _marin("gc", "--prefix", str(prefix), "--older-than", "0")
    assert dry.returncode == 0, dry.stderr
    assert "would delete 0 item(s)" in dry.stdout
    assert [line for line in dry.stdout.splitlines() if "unreadable" in line] == [
        f"kept every step output: the record {latest} is unreadable, so gc "
        "cannot tell what it names; delete or repair it"]
    refused = _marin("gc", "--prefix", str(prefix), "--older-than", "0", "--yes")
    assert refused.returncode == 2
    assert len(refused.stderr.strip().splitlines()) == 1
    assert str(latest) in refused.stderr and "delete or repair it" in refused.stderr
    assert _files(prefix) == before
    du = json.loads(_marin("du", "--prefix", str(prefix), "--json").stdout)
    assert du["gc_frees"] == 0 and du["unreadable"] == [str(latest)]
    table = _marin("du", "--prefix", str(prefix)).stdout
    assert f"the record {latest} is unreadable, so gc cannot tell what it names" in table


def test_a_pin_file_that_names_no_key_keeps_everything(tmp_path: Path):
    prefix = tmp_path / "p"
    old, _ = _versions(prefix)
    damaged = prefix / ".marin" / "pins" / "damaged"
    damaged.parent.mkdir(parents=True, exist_ok=True)
    damaged.write_bytes(b"\xff\xfe")  # it may have pinned the old version: gc cannot tell
    before = _files(prefix)
    dry = _marin("gc", "--prefix", str(prefix), "--older-than", "0")
    assert dry.returncode == 0 and "would delete 0 item(s)" in dry.stdout, dry.stdout
    assert f"the record {damaged} is unreadable" in dry.stdout
    refused = _marin("gc", "--prefix", str(prefix), "--older-than", "0", "--yes")
    assert refused.returncode == 2 and str(damaged) in refused.stderr, refused.stderr
    assert _files(prefix) == before and old.exists()
    # the listing names it as gc reads it, not as its bytes
    listed = _marin("pin", "--list", "--prefix", str(prefix))
    assert listed.returncode == 0 and listed.stdout == "", listed.stdout
    assert listed.stderr.strip() == (f"warning: {damaged} names no step key, so gc keeps "
                                     "every output while it is there; delete it, or pin "
                                     "the output again")


def test_a_pin_and_its_prefix_spelled_differently_name_one_output(tmp_path: Path):
    prefix = tmp_path / "p"
    old, _ = _versions(prefix)
    key = str(old.relative_to(prefix))
    absolute = f"{prefix}/{key.replace('/', '//')}/"  # the key as a path, the prefix relative
    pinned = _marin("pin", absolute, "--prefix", "./p/", cwd=tmp_path)
    assert pinned.returncode == 0, pinned.stderr
    assert _marin("pin", "--list", "--prefix", str(prefix)).stdout.split() == [key]
    assert _gc(str(prefix), "--yes")["candidates"] == [] and old.exists()
    assert _marin("unpin", f"p/{key}", "--prefix", str(prefix), cwd=tmp_path).returncode == 0
    assert [c["step"] for c in _gc(str(prefix))["candidates"]] == [key]


def test_keep_names_a_script_however_its_path_is_typed(tmp_path: Path):
    prefix, script = tmp_path / "p", tmp_path / "exp.py"
    script.write_text("# an experiment file\n")
    for version in (1, 2):
        step = ExecutorStep("exp/a", _write, Cfg(this_output_path(), version))
        assert _run(str(prefix), [step], experiment=str(script)).ok
    other = ExecutorStep("other/b", _write, Cfg(this_output_path()))
    assert _run(str(prefix), [other], experiment="other.py").ok
    for typed in ("./exp.py", "exp.py", str(script)):
        done = _marin("gc", "--prefix", str(prefix), "--older-than", "0", "--json", "--keep",
                      typed, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        steps = {c["step"].split("-")[0] for c in json.loads(done.stdout)["candidates"]}
        assert steps == {"exp/a", "other/b"}, (typed, steps)  # the old a, and all of other


def _attempts(output: Path) -> list[str]:
    return sorted(p.name for p in (output / ".attempts").iterdir())


@pytest.mark.parametrize("failed_runs", [1, 2])
def test_gc_keeps_the_attempt_a_resume_continues_from(tmp_path: Path, failed_runs: int):
    prefix = str(tmp_path / "p")
    for run in range(1, failed_runs + 1):  # each run fails after 3 more units
        fails = ExecutorStep("units", _units, Cfg(this_output_path(),
                                                  fail_after=unversioned(3 * run)),
                             resumable=True)
        assert not _run(prefix, [fails]).ok
    (output,) = Path(prefix).glob("units-*")
    attempts = _attempts(output)
    assert len(attempts) == failed_runs
    _gc(prefix, "--yes")
    (kept,) = _attempts(output)
    left = (output / ".attempts" / kept / "units.txt").read_text().split()
    assert left, "the attempt kept holds the work done"
    ok = ExecutorStep("units", _units, Cfg(this_output_path(), fail_after=unversioned(0)),
                      resumable=True)
    assert _run(prefix, [ok]).ok
    units = (output / "units.txt").read_text().split()
    assert units == [str(u) for u in range(1, len(left) + 4)]  # continued after the kept work
    assert kept == attempts[-1]  # none published: the newest run id (ids sort by start)


def test_a_file_url_prefix_is_the_prefix_it_names(tmp_path: Path):
    prefix = tmp_path / "p"
    url = f"file://{prefix}"
    assert _run(url, [ExecutorStep("exp/a", _write, Cfg(this_output_path(), 1))]).ok
    (old,) = prefix.glob("exp/a-*")
    assert _run(url, [ExecutorStep("exp/a", _write, Cfg(this_output_path(), 2))]).ok
    assert (old / "out.txt").read_text() == "v1"
    plain = _gc(str(prefix))
    assert [c["path"] for c in plain["candidates"]] == [str(old)]
    assert _gc(url)["candidates"] == plain["candidates"]
    du = {a: json.loads(_marin("du", "--prefix", a, "--json").stdout)["steps"]
          for a in (url, str(prefix))}
    assert len(du[url]) == 2 and du[url] == du[str(prefix)]
    key = str(old.relative_to(prefix))
    assert _marin("pin", key, "--prefix", url).returncode == 0
    assert _marin("pin", "--list", "--prefix", str(prefix)).stdout.split() == [key]
    assert _gc(url, "--yes")["candidates"] == []
    assert old.exists()


def test_ids_made_one_after_another_sort_in_the_order_made():
    # attempts made within one second must sort as made, or a resume (and gc) takes the older
    ids = [time_ordered_id() for _ in range(2000)]
    assert sorted(ids) == ids and len(set(ids)) == len(ids)
