"""Marin's spellings of scaling-law names, and planning without the fits' imports."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import ROOT


def test_marin_names_plan_a_study_without_importing_scipy():
    code = """
import json, sys
from marin.scaling_laws import CandidateConfig, DEFAULT_BUDGETS, CompletedAdamHHeuristic
from marin.scaling_laws.scaling_heuristics import CompletedAdamhHeuristic
heuristic = CompletedAdamHHeuristic(vocab_size=50257)
candidates = list(heuristic.candidates_for_budget(DEFAULT_BUDGETS[3]))
planned = {"scipy": "scipy" in sys.modules, "alias": CompletedAdamHHeuristic is
           CompletedAdamhHeuristic, "budget": DEFAULT_BUDGETS[3], "count": len(candidates),
           "typed": all(isinstance(c, CandidateConfig) for c in candidates)}
from marin.scaling_laws import ScalingFit
from marin.scaling_laws.isoflop_analysis import ScalingFit as Fit, DEFAULT_BUDGETS as B
planned.update(fit=ScalingFit is Fit, same=B is DEFAULT_BUDGETS, after="scipy" in sys.modules)
print(json.dumps(planned))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    planned = json.loads(out.stdout.splitlines()[-1])
    assert planned == {"scipy": False, "alias": True, "budget": 3e19, "count": planned["count"],
                       "typed": True, "fit": True, "same": True, "after": True}
    assert planned["count"] > 0


def test_flops_buckets_round_to_one_significant_figure():
    from marin.scaling_laws.budgets import flops_bucket

    assert [flops_bucket(f) for f in (2.87e19, 3.1e19, 9.6e17, 1.04e18)] == \
        [3e19, 3e19, 1e18, 1e18]
