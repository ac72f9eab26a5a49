"""Loss-to-loss on real runs: the README's main job, reduced (``tests/helpers/readme_study.py``,
run once per session by the ``readme_study`` fixture), read back as a reader would, fitted
train-to-train and checked against the study's held-out runs."""

from __future__ import annotations

import pytest

from experiments import isoflop_tiny
from marin.scaling_laws.loss_to_loss import fit_train_to_train
from marin.scaling_laws.study import load_study

pytestmark = pytest.mark.slow


def test_train_to_train_predicts_the_mixtures_held_out_loss_from_the_plays(readme_study):
    """Each run of the mixture paired with the run of the plays of its budget and shape; the
    plays' held-out loss (the same budget, the shape each label's fit chose) mapped through
    the law lands within 1.5% of the mixture's and inside its interval."""
    root, _ = readme_study
    study = load_study(str(root / "local_store" / isoflop_tiny.NAME))
    law = fit_train_to_train(study.runs, "plays", "mix")
    assert law.runs == len(study.runs_of("mix")) == 9 and law.y_name == "mix"
    plays, mix = study.predictions["plays"], study.predictions["mix"]
    assert plays.budget == mix.budget
    p = law.predict(plays.achieved_loss)
    assert abs(p.predicted / mix.achieved_loss - 1) < 0.015 and p.within(mix.achieved_loss)

