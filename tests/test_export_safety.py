"""``marin export hf`` never touches what the executor keeps, and never exports a step the
user did not ask for: an OUT that is, lies inside or holds a step output, an attempt or a
prefix's ``.marin`` is refused (also with ``--force``), an OUT under a file is one line, and
a damaged newest ``step_N.ref`` is refused unless ``--step`` names the step to export.

The runs are real: each test has its own copy of the prefix holding the 3-step run of the
``trained`` fixture (``tests/helpers/export.py``), trained by the executor (its checkpoints
published to the output's shared folder as ``step_N.ref``), and runs the ``marin`` command
line in a subprocess.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from safetensors import safe_open

from tests.conftest import snapshot
from tests.helpers.export import Trained, marin_cli, one_line_error


@pytest.fixture
def run(trained: Trained, tmp_path) -> Path:
    """This test's copy of the trained run, in a copy of its prefix (with ``.marin``)."""
    prefix = trained.run.parent.parent
    shutil.copytree(prefix, tmp_path / "prefix", symlinks=True)
    copied = tmp_path / "prefix" / trained.run.relative_to(prefix)
    assert (tmp_path / "prefix" / ".marin").is_dir() and (copied / ".executor_info").is_file()
    return copied


def test_export_onto_its_own_run_is_refused_and_the_run_kept(run: Path):
    before = snapshot(run)
    line = one_line_error(marin_cli("export", "hf", str(run), str(run), "--force"))
    assert f"OUT {run} is a step output" in line and "exports/NAME" in line
    assert snapshot(run) == before


def test_export_onto_the_prefix_is_refused_and_every_output_kept(run: Path):
    prefix = run.parent.parent  # PREFIX/train/export-tiny-HASH
    before = snapshot(prefix)
    line = one_line_error(marin_cli("export", "hf", str(run), str(prefix), "--force"))
    assert f"OUT {prefix} contains" in line and "which replacing OUT would delete" in line
    assert snapshot(prefix) == before


@pytest.mark.parametrize("inside", ["hf", "checkpoints/hf", ".attempts/new/hf"])
def test_export_inside_a_step_output_is_refused(run: Path, inside: str):
    before = snapshot(run)
    out = run / inside
    line = one_line_error(marin_cli("export", "hf", str(run), str(out), "--force"))
    assert f"OUT {out} lies inside {run}, a step output" in line
    assert snapshot(run) == before and not out.exists()


def test_export_inside_a_prefixs_records_or_an_attempt_is_refused(run: Path, tmp_path):
    prefix = run.parent.parent
    before = snapshot(prefix)
    out = prefix / ".marin" / "hf"
    line = one_line_error(marin_cli("export", "hf", str(run), str(out)))
    assert f"lies inside {prefix / '.marin'}, a prefix's .marin records" in line
    attempt = tmp_path / "copied" / ".attempts" / "r1"  # no records of its own beside it
    attempt.mkdir(parents=True)
    line = one_line_error(marin_cli("export", "hf", str(run), str(attempt / "hf")))
    assert f"lies inside {attempt}, an attempt folder" in line
    assert snapshot(prefix) == before and not out.exists()
    assert list(attempt.iterdir()) == []


def test_an_out_under_a_file_is_one_line(run: Path, tmp_path):
    (tmp_path / "afile").write_text("kept")
    line = one_line_error(marin_cli("export", "hf", str(run), str(tmp_path / "afile" / "sub")))
    assert f"{tmp_path / 'afile'} is a file, not a folder" in line and "another OUT" in line
    assert (tmp_path / "afile").read_text() == "kept"


@pytest.mark.slow  # real `marin` processes
@pytest.mark.parametrize("damage", [b'{"run": "r', b'{"step": 3}', b""])
def test_a_damaged_newest_ref_is_refused_unless_step_is_given(run: Path, tmp_path,
                                                              damage: bytes):
    refs = sorted(p.name for p in (run / "checkpoints").glob("step_*.ref"))
    assert refs == ["step_00000002.ref", "step_00000003.ref"]
    ref = run / "checkpoints" / "step_00000003.ref"
    assert json.loads(ref.read_text())["run"]  # it names the attempt that wrote step 3
    ref.write_bytes(damage)  # cut short, naming no attempt, empty
    line = one_line_error(marin_cli("export", "hf", str(run), str(tmp_path / "out")))
    assert f"{ref} is damaged" in line and "step 3" in line and "--step 2" in line
    assert not (tmp_path / "out").exists()

    done = marin_cli("export", "hf", str(run), str(tmp_path / "out"), "--step", "2")
    assert done.returncode == 0, done.stderr
    with safe_open(str(tmp_path / "out" / "model.safetensors"), "np") as f:
        assert f.metadata()["marin_step"] == "2"

    line = one_line_error(marin_cli("export", "hf", str(run), str(tmp_path / "out3"),
                                    "--step", "3"))
    assert "no committed checkpoint at step 3 (" in line and "is damaged" in line
