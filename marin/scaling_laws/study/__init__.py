"""IsoFLOP studies: one executor graph from raw text to fitted laws, compared labels and
checked predictions, and the typed reader of what a study found.

    from marin.scaling_laws.study import Mixture, StudyCorpus, isoflop_study, load_study
    plays = StudyCorpus(train=("plays/train",), validation=("plays/valid",))
    docs = StudyCorpus(train=("docs/train",), validation=("docs/valid",))
    corpora = {"plays": plays, "docs": docs, "mix": Mixture({"plays": 0.7, "docs": 0.3})}
    study = isoflop_study("isoflop/compare", corpora,
                          budgets=(1e11, 3e11, 1e12), heuristic=heuristic,
                          tokenizer_vocab_size=1024, predict_budget=3e12, metric="macro_bpb")
    found = load_study(executor_main(study))      # or load_study(study, prefix)
    found.fits["docs"].approach2.params.exponent, found.predictions["mix"].within_interval
    found.comparisons[0].compute_multiplier

The modules: ``graph`` builds the steps (``labels`` checks the corpora, mixtures,
validation sets and metric; ``configs`` holds the steps' configs and names; ``ladder``
plans ``schedule="cooldown"``: stable runs and their cooldown branches); ``steps`` holds
the step bodies; ``artifacts`` the typed files (``codec``, ``laws``, ``legacy`` under it);
``fitting`` the one fitting pipeline; ``analysis`` the noise, backtest and comparison;
``reading`` ``load_study`` and the closing summary; ``report`` the report and its plots.
"""

from __future__ import annotations

from marin.scaling_laws.study.artifacts import (
    LabelComparison,
    Prediction,
    RunOutcome,
    StudyFit,
    StudyResult,
)
from marin.scaling_laws.study.configs import (
    CandidateRunConfig,
    PredictionConfig,
    RunFolder,
    StudyFitConfig,
    StudyReportConfig,
    StudyRun,
    budget_tag,
    next_tiers,
    run_name,
    study_candidates,
)
from marin.scaling_laws.study.graph import IsoFlopStudy, isoflop_study
from marin.scaling_laws.study.labels import Mixture, StudyCorpus, StudyInputError
from marin.scaling_laws.study.ladder import LadderPoint, ShapeLadder, ladder_flops
from marin.scaling_laws.study.reading import (
    StudyOutputs,
    load_study,
    print_study_summary,
    study_outputs,
)
from marin.scaling_laws.study.steps import (
    eval_curves,
    fit_study,
    run_candidate,
    run_prediction,
    write_study_report,
)
from marin.scaling_laws.train_options import TrainOptions

__all__ = ["CandidateRunConfig", "IsoFlopStudy", "LabelComparison", "LadderPoint", "Mixture",
           "Prediction", "PredictionConfig", "RunFolder", "RunOutcome", "ShapeLadder",
           "StudyCorpus", "StudyFit",
           "StudyFitConfig", "StudyInputError", "StudyOutputs", "StudyReportConfig",
           "StudyResult", "StudyRun", "TrainOptions",
           "budget_tag", "eval_curves", "fit_study", "isoflop_study", "ladder_flops",
           "load_study",
           "next_tiers", "print_study_summary", "run_candidate", "run_name",
           "run_prediction", "study_candidates", "study_outputs", "write_study_report"]


def _eval_losses(run_path: str) -> list[float]:
    """A run's eval loss at each evaluation (the name older callers import)."""
    return list(eval_curves(run_path).get("loss", ()))
