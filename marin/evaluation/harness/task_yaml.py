"""lm-eval task YAMLs for marin's task files, meaning what marin's in-run scoring means.

    check_task_names(tasks)                          # unique names, each fit for a file
    names = write_task_folder({"plays": read_task("tasks/plays.jsonl")}, Path("work/tasks"))
    # work/tasks/plays.yaml and work/tasks/plays.jsonl; names == ("plays",)
    TaskManager(include_path="work/tasks", include_defaults=False)   # lm-eval reads them

Each task's items (read and checked by ``marin.evaluation.read_task``) are written as a
local JSON-lines copy beside its YAML, which loads it with the ``datasets`` ``json`` builder
(its cache in the folder, so nothing is written elsewhere or downloaded). The YAML's
``multiple_choice`` task takes the item's ``context`` as the text, its ``choices`` and the
index ``gold``, with ``target_delimiter: ""``: lm-eval then scores each choice exactly as
written after the context, as ``marin.evaluation.scoring`` does (lm-eval's default, ``" "``,
would put a space before every choice). Its metrics are ``acc``, ``acc_norm`` (lm-eval
0.4 normalises by the choice's length in characters) and ``acc_bytes`` (by UTF-8 bytes:
marin's ``acc_norm``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from marin.evaluation.tasks import TaskConfig, TaskError, TaskItem

__all__ = ["METRICS", "check_task_names", "task_yaml", "write_task_folder"]

#: lm-eval's metrics of each task; ``acc_bytes`` is marin's ``acc_norm``
METRICS = ("acc", "acc_norm", "acc_bytes")
_SPLIT = "test"


def task_yaml(name: str, data_file: Path, cache_dir: Path) -> str:
    """The YAML of lm-eval task ``name`` over the JSON-lines file ``data_file``. Every value
    is written as JSON, which YAML reads as it is (names and paths need no quoting rules)."""
    value = json.dumps
    lines = [
        f"task: {value(name)}",
        "dataset_path: json",
        "dataset_kwargs:",
        f"  data_files: {{{_SPLIT}: {value(str(data_file))}}}",
        f"  cache_dir: {value(str(cache_dir))}",
        f"test_split: {_SPLIT}",
        "output_type: multiple_choice",
        "doc_to_text: context",
        "doc_to_choice: choices",
        "doc_to_target: gold",
        'target_delimiter: ""',
        "num_fewshot: 0",
        "metric_list:",
        *(f"  - metric: {metric}\n    aggregation: mean\n    higher_is_better: true"
          for metric in METRICS),
        "metadata:",
        "  version: 1",
    ]
    return "\n".join(lines) + "\n"


def check_task_names(tasks: Sequence[TaskConfig]) -> None:
    """Each task's name names a file of its own: no two alike, no path."""
    names = [task.name for task in tasks]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise TaskError(f"task {twice[0]!r} is named twice: give each task its own name")
    for name in names:
        if not name or "/" in name or name.startswith("."):
            raise TaskError(f"task name {name!r} cannot name a file: use letters, digits, "
                            "'-' and '_'")


def write_task_folder(tasks: Mapping[str, Sequence[TaskItem]], folder: Path) -> tuple[str, ...]:
    """Each task's items (by name, names checked by ``check_task_names``) and YAML in
    ``folder`` (created); the lm-eval task names, in order."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, items in tasks.items():
        data = folder / f"{name}.jsonl"
        data.write_text("".join(item.encode() + "\n" for item in items), encoding="utf-8")
        (folder / f"{name}.yaml").write_text(
            task_yaml(name, data.resolve(), (folder / "datasets-cache").resolve()),
            encoding="utf-8")
    return tuple(tasks)
