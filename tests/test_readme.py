"""The README's promises about the main job, checked on a real run of a reduced study: the
summary it prints has the shape of the README's sample, line by line, and the tour's
commands that read the main job's outputs work as written on what the study wrote.

The reduced study is the main job's graph (``isoflop_study`` named ``isoflop-tiny`` with the
labels ``plays``, ``docs`` and their mixture ``mix``, one trained BPE, three budgets, a held-out
budget, seed replicates), run the way the main job runs, as a script whose ``Experiment`` has
``print_study_summary`` run after ``executor_main``; it uses five plays and a fifth of the
Python documentation's topics, a smaller vocabulary and budgets about twenty times smaller
(``tests/helpers/readme_study.py``; the session's ``readme_study`` fixture runs it once, and
``tests/test_study_comparison.py`` reads the same run).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.doc_examples import ROOT, checked_block, sample_output

pytestmark = pytest.mark.slow

README = ROOT / "README.md"
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?")


def shape(line: str) -> str:
    """A summary line with its figures, hashes and checkout path left out."""
    line = re.sub(r"\S*/local_store/", "<checkout>/local_store/", line)
    line = re.sub(r"-(?:[0-9a-f]{8}|<hash>)(?=/)", "-<hash>", line)
    return _NUMBER.sub("<n>", line)


def kind(line: str) -> str:
    """What a summary line is about: its shape up to the colon after its subject
    (``plays: Approach <n>``, ``compute multiplier of docs against plays at <n> FLOPs (loss
    <n>)``). A reduced study's fits may fail where the main job's succeed (too few runs to
    bracket an optimum), so the figures after it are the run's own."""
    head, _, rest = line.partition(": ")
    if head in {"plays", "docs", "mix"}:
        return f"{head}: {shape(rest.partition(': ')[0].partition(' (')[0])}"
    return shape(head)


def _comparing(line: str) -> bool:
    """A line of the comparison: a compute multiplier, or why a label has none."""
    return line.startswith("compute multiplier of ") or " does not improve on " in line \
        or " cannot reach " in line or line.startswith("no compute multiplier against ")


def test_the_readme_sample_has_the_lines_of_what_the_run_prints(readme_study):
    _, printed = readme_study
    sample = sample_output(README, "tests/test_readme.py")
    # the lines before the comparison, kind by kind; then each label compared, or told why
    # not (a reduced study's label may not improve where the main job's does)
    assert [kind(line) for line in sample if not _comparing(line)] == \
        [kind(line) for line in printed if not _comparing(line)]
    compared = [line for line in printed if _comparing(line)]
    for label in ("docs", "mix"):
        assert any(line.startswith(f"compute multiplier of {label} ") or
                   line.startswith(f"{label} ") for line in compared), (label, compared)
    assert shape(sample[0]) == shape(printed[0]) and shape(sample[1]) == shape(printed[1])
    assert shape(sample[-1]) == shape(printed[-1])  # the report's path
    assert printed[0].endswith(" succeeded") and "failed" not in printed[0]


def test_a_second_run_skips_every_step_and_prints_the_same_summary(readme_study):
    root, printed = readme_study
    env = {k: v for k, v in os.environ.items() if k != "MARIN_PREFIX"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    out = subprocess.run([sys.executable, "study.py"], cwd=root, env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    lines = out.stdout.splitlines()
    again = lines[max(i for i, line in enumerate(lines) if line.startswith("executor: ")):]
    steps = printed[0].split()[1]  # "executor: 14 steps: 14 succeeded"
    assert again[0] == f"executor: {steps} steps: {steps} skipped"
    assert again[1:] == printed[1:] and len(again) > 1


def test_the_kind_of_a_line_is_its_subject():
    assert kind("plays: Approach 2: N_opt = 0.0149 * C^0.580 (exponent +/- 0.116)") == \
        kind("plays: Approach 2: not fitted (1 budget(s) could be fitted)")
    assert kind("plays: Approach 2: N_opt = 1") != kind("docs: Approach 2: N_opt = 1")
    assert kind("plays: held-out 2e+11 FLOPs: predicted optimum N") != \
        kind("plays: predicted loss 3.5280 (95% 3.48 - 3.58), achieved 3.5227")
    assert kind("compute multiplier of docs against plays at 3e+11 FLOPs (loss 3.453): 0.8x") \
        != kind("compute multiplier of mix against plays at 3e+11 FLOPs (loss 3.453): 0.8x")


def test_the_shape_keeps_the_words_and_drops_the_figures():
    assert shape("runs: 17 used, 0 excluded") == shape("runs: 9 used, 0 excluded")
    assert shape("runs: 17 used, 0 excluded") != shape("runs: 17 used; 0 excluded")
    assert shape("N = 4e+04 params (95% 1.72e+04 - 9.35e+04)") == "N = <n> params (<n>% <n> - <n>)"
    assert shape("report: /x/marin/local_store/isoflop-tiny/report-1a2b3c4d/report.md") == \
        shape("report: /path/to/marin/local_store/isoflop-tiny/report-<hash>/report.md")


def test_the_tour_commands_on_the_main_jobs_outputs_work_as_written(readme_study):
    root, _ = readme_study
    block = checked_block(README, "tests/test_readme.py")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "COLUMNS": "120"}
    out = subprocess.run(["bash", "-eo", "pipefail", "-c", block], cwd=root, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert (root / "plots" / "fit.json").exists()
    if (ROOT / ".git").exists():  # what it wrote in the checkout is not for committing
        check = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "--no-index", "-q",
                                "plots/"])
        assert check.returncode == 0, "plots/ is not in .gitignore"
    assert "token caches under local_store/isoflop-tiny" in out.stdout
