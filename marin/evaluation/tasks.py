"""Tasks as files: ``TaskConfig``, the ``TaskItem`` of each line, its reader, its fingerprint.

    task = TaskConfig(name="plays-cloze", path="data/plays-cloze.jsonl")
    items = read_task(task.path)     # [TaskItem(context="...", choices=("a", "b"), gold=1)]
    task_fingerprint(task.path)      # 16 hex digits; changes when the file's content does

One JSON object per line: ``{"context": str, "choices": [str, ...], "gold": int}`` (blank
lines are skipped; other keys are ignored). Any fsspec URL reads (``gs://``, ``s3://``,
local paths). A bad line fails in one line naming the file, the line and the field: a line
that is not JSON, an empty context, no choices (or an empty one), a gold index out of
range. The fingerprint is a corpus's (``marin.processing.tokenize.inputs``): the file's
name, size and content (the store's checksum, or a SHA-256 of a local file).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from marin.processing.tokenize.inputs import InputError, fingerprint_inputs
from marin.storage.files import open_url

__all__ = ["AVERAGES", "QUANTITIES", "TaskConfig", "TaskError", "TaskItem", "metric_name",
           "read_task", "task_fingerprint"]

#: the figures of each task, recorded as ``lm_eval/<task>/<quantity>``
QUANTITIES = ("acc", "acc_norm", "bpb")
#: the label of the means over a run's tasks: ``lm_eval/averages/<quantity>``
AVERAGES = "averages"


def metric_name(task: str, quantity: str) -> str:
    """``lm_eval/<task>/<quantity>`` (Levanter's names); task ``averages``: the means."""
    return f"lm_eval/{task}/{quantity}"


class TaskError(ValueError):
    """A task file cannot be read or holds a bad item; the message names file, line, field."""


@dataclass(frozen=True)
class TaskConfig:
    """One downstream task of a run.

    Attributes:
        name: the task's label in metric names (``lm_eval/<name>/acc``); not ``averages``.
        path: the task's JSON-lines file (any fsspec URL).
    """

    name: str
    path: str


@dataclass(frozen=True)
class TaskItem:
    """One multiple-choice item: the ``context``, its candidate continuations and the
    index of the right one."""

    context: str
    choices: tuple[str, ...]
    gold: int

    def encode(self) -> str:
        return json.dumps({"context": self.context, "choices": list(self.choices),
                           "gold": self.gold})

    @staticmethod
    def decode(line: str, where: str = "item") -> TaskItem:
        """The item of one JSON line; ``where`` (``file:line``) opens any error."""
        try:
            data: Any = json.loads(line)
        except ValueError as e:
            data = e
        if not isinstance(data, dict):
            problem = f"not a JSON line ({data.msg})" if isinstance(data, ValueError) else \
                f"a JSON {type(data).__name__}, not an object"
            raise TaskError(f"{where}: {problem}: write one JSON object per line, "
                            '{"context": ..., "choices": [...], "gold": ...}')
        return TaskItem(_context(data, where), _choices(data, where), _gold(data, where))


def _context(data: dict[str, Any], where: str) -> str:
    context = data.get("context")
    if not isinstance(context, str) or not context.strip():
        raise TaskError(f"{where}: field 'context' must be a non-empty string, got "
                        f"{context!r}")
    return context


def _choices(data: dict[str, Any], where: str) -> tuple[str, ...]:
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        raise TaskError(f"{where}: field 'choices' must be a non-empty list of strings, got "
                        f"{choices!r}")
    for i, choice in enumerate(choices):
        if not isinstance(choice, str) or not choice:
            raise TaskError(f"{where}: field 'choices'[{i}] must be a non-empty string, got "
                            f"{choice!r}")
    return tuple(choices)


def _gold(data: dict[str, Any], where: str) -> int:
    gold, count = data.get("gold"), len(data["choices"])
    if isinstance(gold, bool) or not isinstance(gold, int) or not 0 <= gold < count:
        raise TaskError(f"{where}: field 'gold' must be an index of 'choices' (0 to "
                        f"{count - 1}), got {gold!r}")
    return gold


def read_task(path: str) -> list[TaskItem]:
    """Every item of the task file at ``path``, in order."""
    try:
        with open_url(path, "r", encoding="utf-8") as f:
            lines = list(f)
    except FileNotFoundError:
        raise TaskError(f"task file {path} does not exist: give the path of a JSON-lines "
                        "task file") from None
    except UnicodeDecodeError as e:
        raise TaskError(f"task file {path} is not UTF-8 text ({e.reason})") from None
    items = [TaskItem.decode(line, f"{path}:{number}")
             for number, line in enumerate(lines, 1) if line.strip()]
    if not items:
        raise TaskError(f"task file {path} holds no items: write one JSON object per line")
    return items


def task_fingerprint(path: str) -> str:
    """A hash of the task file's name, size and content."""
    try:
        return fingerprint_inputs([path])
    except InputError as e:
        raise TaskError(f"task file {path}: {e}") from None
