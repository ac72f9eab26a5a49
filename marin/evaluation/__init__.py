"""Downstream tasks: multiple-choice items scored by a language model, lm-eval's way.

    from marin.evaluation import TaskConfig, read_task
    task = TaskConfig(name="hellaswag", path="gs://bucket/tasks/hellaswag.jsonl")
    items = read_task(task.path)          # TaskItems; a bad line fails naming file and line
    TrainLmConfig(..., tasks=[task])      # scored at every evaluation point of the run

A task is a file of JSON lines, one item each: ``{"context": str, "choices": [str, ...],
"gold": int}``; a cloze is a task whose choices are the candidate fillers. The scores
(``marin.evaluation.scoring``: acc, acc_norm, bits per byte of the gold choice) need JAX;
this package's ``__init__`` and ``marin.evaluation.tasks`` import none, so a config naming
tasks can be built and hashed without it. ``marin.evaluation.harness`` runs lm-eval-harness on
the same files (``marin eval lm-eval``; the extra ``marin[lm-eval]``).
"""

from __future__ import annotations

from marin.evaluation.tasks import TaskConfig, TaskError, TaskItem, read_task, task_fingerprint

__all__ = ["TaskConfig", "TaskError", "TaskItem", "read_task", "task_fingerprint"]
