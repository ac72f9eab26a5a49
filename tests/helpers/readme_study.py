"""The README's main job, reduced: the graph of ``experiments/isoflop_tiny.py`` (its schedule
and two held-out budgets, 2x and 8x past the fit) on five plays and a fifth of the Python
documentation's topics, a smaller vocabulary, three budgets about twenty times smaller, run
the way the main job runs (a script whose ``Experiment`` prints the study's summary after
``executor_main``), in a subprocess.

    root, printed = run_reduced_study(tmp_path)   # local_store/ under root; printed lines
    steps = reduced_study()                       # its graph (run it with root as cwd)

The ``readme_study`` fixture in ``tests/conftest.py`` runs it once per session, for the
README's tests and the tests of a comparative study (``tests/test_study_comparison.py``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from experiments import isoflop_tiny
from marin.scaling_laws.study import IsoFlopStudy, StudyCorpus, isoflop_study
from tests.conftest import ROOT
from tests.helpers.corpus import plays

__all__ = ["BUDGETS", "HELD_OUT", "HEURISTIC", "SCRIPT", "VOCAB", "reduced_study",
           "run_reduced_study", "write_corpora"]

VOCAB = 300
BUDGETS = (1.25e9, 2.5e9, 5e9)  # three candidates each (hidden 4, 8, 12), all bracketing
HELD_OUT = (1e10, 4e10)  # 2x and 8x past the largest budget, as the main job's
# the main job's heuristic on shorter sequences and larger batches, with smaller models
HEURISTIC = isoflop_tiny.HEURISTIC.with_overrides(
    vocab_size=VOCAB, seq_len=32, min_hidden=4, max_hidden=12, min_batch_size=32,
    max_batch_size=32, min_train_steps=20, reference_batch_size=32, reference_tokens=1e5)

SCRIPT = """
from marin.execution import Experiment, executor_main
from marin.scaling_laws.study import print_study_summary
from tests.helpers.readme_study import reduced_study

experiment = Experiment(reduced_study(), description="the main job, reduced",
                        after=print_study_summary)
if __name__ == "__main__":
    executor_main(experiment)
"""


def reduced_study() -> IsoFlopStudy:
    """The reduced study, on the texts in ``./plays`` and ``./docs`` (see
    ``write_corpora``)."""
    corpora = {label: StudyCorpus(train=(f"{label}/train",), validation=(f"{label}/validation",))
               for label in ("plays", "docs")}
    return isoflop_study(isoflop_tiny.NAME, {**corpora, "mix": isoflop_tiny.CORPORA["mix"]},
                         BUDGETS, HEURISTIC, tokenizer_vocab_size=VOCAB, predict_budget=HELD_OUT,
                         bootstrap=20, replicates=isoflop_tiny.REPLICATES,
                         schedule=isoflop_tiny.SCHEDULE,
                         train_options={"compute_dtype": "float32", "eval_batches": 2,
                                        "log_every": 1000})


def write_corpora(root: Path, count: int = 5) -> None:
    """The reduced study's texts: ``count`` plays under ``plays/``, a fifth of the help
    topics under ``docs/``, each as ``train/`` and ``validation/``."""
    from pydoc_data.topics import topics

    texts = plays(count)
    for label in ("plays", "docs"):
        for folder in ("train", "validation"):
            (root / label / folder).mkdir(parents=True)
    for play in texts[:-1]:
        shutil.copy(play, root / "plays" / "train" / f"{play.stem}.txt")
    shutil.copy(texts[-1], root / "plays" / "validation" / f"{texts[-1].stem}.txt")
    names = sorted(topics)[::5]
    for i, name in enumerate(names):
        folder = "validation" if i % 4 == 3 else "train"
        (root / "docs" / folder / f"{name}.txt").write_text(topics[name])


def run_reduced_study(root: Path) -> tuple[Path, list[str]]:
    """A folder where the reduced study has run, and the lines its run printed from the
    executor's summary on."""
    write_corpora(root)
    (root / "study.py").write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if k != "MARIN_PREFIX"}  # ./local_store
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    out = subprocess.run([sys.executable, "study.py"], cwd=root, env=env, capture_output=True,
                         text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    lines = out.stdout.splitlines()
    start = max(i for i, line in enumerate(lines) if line.startswith("executor: "))
    return root, lines[start:]
