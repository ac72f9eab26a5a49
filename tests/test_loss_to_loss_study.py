"""Loss-to-loss on real runs: the README's main job, reduced (``tests/helpers/readme_study.py``,
run once per session by the ``readme_study`` fixture), read back as a reader would and fitted
train-to-train.

What the law then predicts for the held-out run depends on the training's numerics (one JAX
release's runs put ``E_x`` inside the fitted range, another's at its end, where the law
refuses to extrapolate), so this test checks what holds for any runs: the pairing, that the
fit is the least-squares optimum of the pairs it made, and the bootstrap's intervals."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import least_squares

from experiments import isoflop_tiny
from marin.scaling_laws.loss_to_loss import fit_train_to_train
from marin.scaling_laws.run_status import RunStatus
from marin.scaling_laws.study import load_study

pytestmark = pytest.mark.slow


def test_train_to_train_on_a_studys_runs_pairs_by_budget_and_shape_and_fits_the_optimum(
        readme_study):
    """Each run of the mixture is paired with the run of the plays of its budget and shape
    (pairs rebuilt here from the rows); no choice of the law's four parameters within their
    ranges (scipy's least squares from a grid of starts) fits those pairs better; inside the
    fitted range a prediction's interval holds its point and has width."""
    root, _ = readme_study
    study = load_study(str(root / "local_store" / isoflop_tiny.NAME))
    law = fit_train_to_train(study.runs, "plays", "mix")

    def first_runs(label: str) -> dict:
        return {(r.budget, r.hidden_dim, r.num_layers): r.loss for r in study.runs
                if r.label == label and r.status is RunStatus.OK and r.replicate_of is None}

    plays, mix = first_runs("plays"), first_runs("mix")
    keys = sorted(mix)
    assert law.runs == len(keys) == len(study.runs_of("mix")) == 9
    assert law.x_name == "plays" and law.y_name == "mix"
    x, y = np.array([plays[k] for k in keys]), np.array([mix[k] for k in keys])
    assert law.loss_x_range == (pytest.approx(x.min()), pytest.approx(x.max()))

    def residuals(p: np.ndarray) -> np.ndarray:
        return p[0] * np.maximum(x - p[2], 0.0) ** p[1] + p[3] - y

    best = min((least_squares(residuals, [K, kappa, fraction * x.min(), 0.5 * y.min()],
                              bounds=([0, 0.05, 0, 0], [np.inf, 10, x.min(), np.inf]))
                for K in (0.5, 1.0, 2.0) for kappa in (0.5, 1.0, 2.0)
                for fraction in (0.5, 0.9, 0.99)), key=lambda r: r.cost)
    ours = float(np.sum((law.loss_y(x) - y) ** 2))
    assert ours <= 2 * best.cost * (1 + 1e-4) + 1e-12
    assert len(law.bootstrap_samples) >= 900 and set(law.standard_errors) == set(
        law.parameters)

    middle = float(np.median(x))
    p = law.predict(middle)
    assert p.predicted == pytest.approx(law.loss_y(middle))
    assert p.interval[0] < p.predicted < p.interval[1]
