"""Dry-run output for large plans: a summary with counts per action and per name family,
the steps that will run or failed listed, skipped steps folded; ``--all`` prints every row."""

from __future__ import annotations

import io
import re
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

from rich.console import Console

from marin.execution import Executor, ExecutorStep
from marin.execution.frontend.render import SUMMARY_ABOVE, family_of, print_plan, summarize
from tests.conftest import ROOT
from tests.helpers.steps import step

# A sweep: 40 done "sweep/lr*" steps, 20 new "eval/*" steps, one failed top-level step.
DONE, NEW = 40, 20


def _sweep() -> list[ExecutorStep]:
    done = [step(f"sweep/lr{i}") for i in range(DONE)]
    new = [step(f"eval/e{i}", done[i]) for i in range(NEW)]
    return [*done, *new, step("report", fail=True)]


def _plan(tmp_path: Path, *, retry: bool = True):
    ex = Executor(str(tmp_path / "prefix"))
    steps = _sweep()
    assert ex.run([*steps[:DONE], steps[-1]]).failed  # the sweep done, the report failed
    return ex.plan(steps, force_run_failed=retry)


def _render(plan, **kwargs) -> str:
    buffer = io.StringIO()
    print_plan(plan, Console(file=buffer, width=200, color_system=None), **kwargs)
    return buffer.getvalue()


def _family_rows(text: str) -> dict[str, list[int]]:
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip("│┃ ").split("│")]
        if len(cells) == 6 and cells[1].isdigit():
            rows[cells[0]] = [int(c) for c in cells[1:]]
    return rows


def test_family_is_the_name_up_to_its_last_slash():
    assert family_of("train/tiny/lr3e-3") == "train/tiny"
    assert family_of("eval/e1") == "eval"
    assert family_of("report") == "(top level)"


def test_a_large_plan_prints_counts_per_family_and_folds_skipped_rows(tmp_path: Path):
    plan = _plan(tmp_path, retry=False)
    assert len(plan.entries) > SUMMARY_ABOVE
    text = _render(plan)
    expected: dict[str, Counter] = {}
    for e in plan.entries:
        counts = expected.setdefault(family_of(e.name), Counter())
        counts["steps"] += 1
        counts[e.action] += 1
        counts["failed"] += e.status is not None and e.status.stored == "FAILED"
    assert _family_rows(text) == {
        family: [c["steps"], c["run"], c["skip"], c["wait"], c["failed"]]
        for family, c in expected.items()}
    assert _family_rows(text)["(top level)"] == [1, 0, 1, 0, 1]
    # Listed: the steps that will run, and the refused failure; skipped ones only counted.
    listed = {e.name for e in plan.entries if e.action != "skip" or e.refused_failure}
    assert listed == {f"eval/e{i}" for i in range(NEW)} | {"report"}
    for name in listed:
        assert re.search(rf"│ {re.escape(name)} +│", text), name
    assert "sweep/lr0 " not in text and "sweep/lr39 " not in text
    assert f"{DONE} skipped steps folded" in text
    assert f"totals: {DONE + NEW + 1} steps, {NEW} to run, {DONE + 1} skipped" in text


def test_rows_beyond_the_limit_are_counted_not_listed(tmp_path: Path):
    plan = _plan(tmp_path)
    summary = summarize(plan, rows=5)
    assert [e.name for e in summary.listed] == [f"eval/e{i}" for i in range(5)]
    assert summary.unlisted == NEW + 1 - 5  # the other new steps and the retried failure
    assert summary.folded == DONE
    buffer = io.StringIO()
    from marin.execution.frontend.render import print_summary

    print_summary(plan, Console(file=buffer, width=200), rows=5, max_families=2)
    text = buffer.getvalue()
    assert f"... and {NEW + 1 - 5} more steps that will run, wait or failed" in text
    # Two family rows at most: the first family, then the others merged with their sums.
    rows = _family_rows(text)
    assert rows == {"sweep": [DONE, 0, DONE, 0, 0], "(2 more families)": [NEW + 1, NEW + 1, 0,
                                                                           0, 1]}


def test_show_all_and_small_plans_print_every_row(tmp_path: Path):
    plan = _plan(tmp_path)
    text = _render(plan, show_all=True)
    for e in plan.entries:
        assert re.search(rf"│ {re.escape(e.name)} +│", text), e.name
    assert "folded" not in text and "by name family" not in text
    small = Executor(str(tmp_path / "prefix")).plan(_sweep()[:3])
    assert "by name family" not in _render(small) and "sweep/lr2" in _render(small)


def _experiment(tmp_path: Path) -> Path:
    path = tmp_path / "sweep_experiment.py"
    path.write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        from tests.test_render import _sweep
        steps = _sweep()
    """))
    return path


def test_cli_prints_a_summary_and_all_rows_with_all(tmp_path: Path):
    experiment = _experiment(tmp_path)
    prefix = tmp_path / "prefix"
    base = [sys.executable, "-m", "marin.cli", "executor", "--prefix", str(prefix)]
    run = subprocess.run([*base, "--run-only", "sweep/.*", str(experiment)],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert run.returncode == 0, run.stderr
    summary = subprocess.run([*base, "--dry-run", str(experiment)], capture_output=True,
                             text=True, cwd=ROOT, timeout=120)
    assert summary.returncode == 0, summary.stderr
    assert _family_rows(summary.stdout)["sweep"] == [DONE, 0, DONE, 0, 0]
    assert f"{DONE} skipped steps folded" in summary.stdout
    assert "sweep/lr7 " not in summary.stdout and "eval/e7 " in summary.stdout
    full = subprocess.run([*base, "--dry-run", "--all", str(experiment)], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)
    assert full.returncode == 0, full.stderr
    assert "folded" not in full.stdout
    assert all(f"sweep/lr{i} " in full.stdout for i in range(DONE))


def test_executor_main_takes_all_as_a_draccus_flag(tmp_path: Path, capsys):
    from marin.execution import executor_main

    args = ["--prefix", str(tmp_path / "p"), "--dry_run", "true"]
    executor_main(_sweep(), args=args)
    assert "by name family" in capsys.readouterr().out
    executor_main(_sweep(), args=[*args, "--all", "true"])
    text = capsys.readouterr().out
    assert "by name family" not in text and "sweep/lr39 " in text
