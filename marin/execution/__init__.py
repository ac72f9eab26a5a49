"""Steps, their identities, and the executor that runs them.

    from marin.execution import ExecutorStep, executor_main, output_path_of, this_output_path

    raw = ExecutorStep("raw/words", extract_words, ExtractConfig(output=this_output_path()))
    counts = ExecutorStep("counts/words", count_words,
                          CountConfig(words=output_path_of(raw, "words.txt"),
                                      output=this_output_path()))
    if __name__ == "__main__":
        executor_main([counts])
"""

from marin.execution.compat import THIS_OUTPUT_PATH, InputName, OutputName, StepStatus
from marin.execution.executor import Executor, InvocationResult, RunResult
from marin.execution.experiments import Experiment
from marin.execution.frontend.executor_main import ExecutorMainConfig, executor_main
from marin.execution.graph import StepCollection, StepGraph, StepGraphError
from marin.execution.hashing import UnhashableConfigError
from marin.execution.outcome import StepOutcome
from marin.execution.planning import Plan, PlanEntry
from marin.execution.resuming import resumable
from marin.execution.states import StepState
from marin.execution.step import (
    ComputeEstimate,
    ExecutorStep,
    StepResources,
    added_field,
    external_path_field,
    output_path_of,
    this_output_path,
    unversioned,
    unversioned_field,
    versioned,
)

__all__ = [
    "THIS_OUTPUT_PATH",
    "ComputeEstimate",
    "Executor",
    "ExecutorMainConfig",
    "ExecutorStep",
    "Experiment",
    "InputName",
    "InvocationResult",
    "OutputName",
    "Plan",
    "PlanEntry",
    "RunResult",
    "StepCollection",
    "StepGraph",
    "StepGraphError",
    "StepOutcome",
    "StepResources",
    "StepState",
    "StepStatus",
    "UnhashableConfigError",
    "added_field",
    "executor_main",
    "external_path_field",
    "output_path_of",
    "resumable",
    "this_output_path",
    "unversioned",
    "unversioned_field",
    "versioned",
]
