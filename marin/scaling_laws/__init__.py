"""Scaling laws: FLOP budgets, candidate runs, IsoFLOP and parametric fits, plots.

    from marin.scaling_laws import CandidateConfig, DEFAULT_BUDGETS, ScalingFit
    from marin.scaling_laws.scaling_heuristics import CompletedAdamhHeuristic
    from marin.scaling_laws.isoflop_analysis import fit_isoflops
    from marin.scaling_laws.parametric import fit_parametric_loss

Design note: names are loaded on first use (PEP 562), so planning a study
(``DEFAULT_BUDGETS``, ``CandidateConfig``, the heuristics) imports neither scipy nor the
fits; ``ScalingFit`` imports them when it is first used.
"""

from __future__ import annotations

from marin._lazy import lazy_exports

_EXPORTS = {
    "CandidateConfig": "marin.scaling_laws.candidates",
    "CompletedAdamHHeuristic": "marin.scaling_laws.scaling_heuristics",
    "CompletedAdamhHeuristic": "marin.scaling_laws.scaling_heuristics",
    "DEFAULT_BUDGETS": "marin.scaling_laws.budgets",
    "ScalingFit": "marin.scaling_laws.isoflop_analysis",
    "flops_bucket": "marin.scaling_laws.budgets",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
