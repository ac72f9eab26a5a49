"""Scaling laws: FLOP budgets, candidate runs, IsoFLOP and parametric fits, plots.

    from marin.scaling_laws.isoflop_analysis import DEFAULT_BUDGETS, fit_isoflops
    from marin.scaling_laws.scaling_heuristics import CompletedAdamhHeuristic
    from marin.scaling_laws.parametric import fit_parametric_loss
"""
