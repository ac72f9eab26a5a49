"""lm-eval-harness on marin's tasks: task YAMLs, an offline run, its typed report; a step.

    from marin.evaluation import TaskConfig
    from marin.evaluation.harness import lm_eval_step
    step = lm_eval_step("eval/tiny", output_path_of(train), [TaskConfig("plays", PATH)])
    # marin eval lm-eval local_store/train/tiny-1a2b3c4d --tasks tasks/plays.jsonl

Modules: ``task_yaml`` (the YAMLs marin writes for its task files), ``run`` (export, run
lm-eval, write the outputs; ``lm_eval_step``), ``results`` (``LmEvalReport``). lm-eval is
the optional extra ``marin[lm-eval]``; names are imported on first use, so importing the
package loads neither lm-eval nor torch.
"""

from __future__ import annotations

from marin._lazy import lazy_exports

_EXPORTS = {
    "LmEvalConfig": "marin.evaluation.harness.run",
    "LmEvalError": "marin.evaluation.harness.run",
    "LmEvalReport": "marin.evaluation.harness.results",
    "LmEvalRun": "marin.evaluation.harness.run",
    "evaluate_lm": "marin.evaluation.harness.run",
    "lm_eval_step": "marin.evaluation.harness.run",
    "run_lm_eval": "marin.evaluation.harness.run",
    "write_outputs": "marin.evaluation.harness.run",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
