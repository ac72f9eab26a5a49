"""Plot labels name the budgets they show."""

from __future__ import annotations

import json
import re
from pathlib import Path

from marin.scaling_laws.isoflop_analysis import fit_isoflops
from marin.scaling_laws.plots import budget_label, write_isoflop_plots, write_scaling_plots
from tests.helpers.synthetic_runs import chinchilla_isoflop_runs

BUDGETS = (2.5e18, 5e18, 1e19)  # 2.5e18 rounds to "2e+18" at one digit
TARGET = 2.5e19


def _trace_names(page: Path) -> list[str]:
    """The names of the traces in a plotly page (its legend entries)."""
    names = re.findall(r'"name":("(?:[^"\\]|\\.)*")', page.read_text())
    return [json.loads(name) for name in names]


def test_every_legend_entry_names_its_budget_exactly(tmp_path: Path):
    runs = chinchilla_isoflop_runs(budgets=BUDGETS)
    analysis = fit_isoflops(runs)
    write_isoflop_plots(analysis, runs, tmp_path / "isoflops")
    write_scaling_plots(analysis, tmp_path / "scaling", target=TARGET)

    curves = [n for n in _trace_names(tmp_path / "isoflops.html") if n.endswith(" FLOPs")]
    assert sorted(float(n.split()[0]) for n in curves) == sorted(BUDGETS)
    targets = [n for n in _trace_names(tmp_path / "scaling.html") if " at " in n]
    assert [float(n.rpartition(" at ")[2]) for n in targets] == [TARGET, TARGET]


def test_a_budget_label_is_short_and_reads_back_as_the_budget():
    for budget in (2.5e10, 5e10, 1e11, 2e11, 3e19, 1.2345678e19, 1e21 / 3):
        assert float(budget_label(budget)) == budget
    assert [budget_label(b) for b in (2.5e10, 1e11, 3e19)] == ["2.5e+10", "1e+11", "3e+19"]
