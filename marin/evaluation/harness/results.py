"""What lm-eval found, per item and per task, under marin's names: ``LmEvalReport``.

    report = LmEvalReport.decode(open("out/report.json", "rb").read())
    task = report.task("plays")
    task.acc, task.acc_norm, task.bpb        # as lm_eval/plays/acc ... of a run's metrics
    task.items[0].logliks                     # each choice's log-likelihood, lm-eval's

Built (``marin.evaluation.harness.run``) from lm-eval's per-item samples (``log_samples``):
each choice's log-likelihood, and lm-eval's own verdicts ``acc`` and ``acc_bytes`` (marin's
``acc_norm``: by UTF-8 bytes); ``bpb`` is the gold choice's bits per byte,
``-loglik / ln 2 / bytes``, as marin records it.
``report.json`` is a versioned record (``version``); a newer version is refused.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["REPORT_VERSION", "ItemResult", "LmEvalReport", "ReportError", "TaskResult"]

REPORT_VERSION = 1


class ReportError(ValueError):
    """A report that cannot be read; the message says why."""


@dataclass(frozen=True)
class ItemResult:
    """One item as lm-eval scored it.

    Attributes:
        logliks: each choice's log-likelihood, in the item's order.
        gold: the index of the right choice.
        gold_bytes: the gold choice's length in UTF-8 bytes.
        acc: 1.0 when the gold choice has the highest log-likelihood (lm-eval's ``acc``).
        acc_norm: 1.0 when it has the highest per UTF-8 byte (lm-eval's ``acc_bytes``).
    """

    logliks: tuple[float, ...]
    gold: int
    gold_bytes: int
    acc: float
    acc_norm: float

    @property
    def bpb(self) -> float:
        return -self.logliks[self.gold] / math.log(2) / self.gold_bytes


@dataclass(frozen=True)
class TaskResult:
    """A task's items as lm-eval scored them; ``acc``, ``acc_norm`` and ``bpb`` are the
    means a run records as ``lm_eval/<name>/...``.

    Attributes:
        name: the task's name.
        fingerprint: the task file's (``marin.evaluation.task_fingerprint``).
        items: one result per item, in the file's order.
    """

    name: str
    fingerprint: str
    items: tuple[ItemResult, ...]

    def _mean(self, values: Sequence[float]) -> float:
        return sum(values) / len(values)

    @property
    def acc(self) -> float:
        return self._mean([i.acc for i in self.items])

    @property
    def acc_norm(self) -> float:
        return self._mean([i.acc_norm for i in self.items])

    @property
    def bpb(self) -> float:
        return self._mean([i.bpb for i in self.items])


@dataclass(frozen=True)
class LmEvalReport:
    """One lm-eval evaluation of one model.

    Attributes:
        model: what was evaluated: a training step's output or a Hugging Face folder.
        step: the checkpoint exported from a training run (None for a folder given).
        lm_eval_version: the installed lm-eval's version.
        tasks: one result per task, in the order asked.
        version: the record's format.
    """

    model: str
    step: int | None
    lm_eval_version: str
    tasks: tuple[TaskResult, ...]
    version: int = REPORT_VERSION

    def task(self, name: str) -> TaskResult:
        return next(t for t in self.tasks if t.name == name)

    def encode(self) -> bytes:
        return json.dumps({
            "version": self.version, "model": self.model, "step": self.step,
            "lm_eval_version": self.lm_eval_version,
            "tasks": [{"name": t.name, "fingerprint": t.fingerprint,
                       "acc": t.acc, "acc_norm": t.acc_norm, "bpb": t.bpb,
                       "items": [{"logliks": list(i.logliks), "gold": i.gold,
                                  "gold_bytes": i.gold_bytes, "acc": i.acc,
                                  "acc_norm": i.acc_norm} for i in t.items]}
                      for t in self.tasks]}, indent=1).encode()

    @classmethod
    def decode(cls, raw: bytes | str) -> LmEvalReport:
        try:
            data = json.loads(raw)
            if data["version"] > REPORT_VERSION:
                raise ReportError(f"report version {data['version']} is newer than this "
                                  f"marin reads ({REPORT_VERSION}): upgrade marin")
            tasks = tuple(TaskResult(str(t["name"]), str(t["fingerprint"]), tuple(
                ItemResult(tuple(float(x) for x in i["logliks"]), int(i["gold"]),
                           int(i["gold_bytes"]), float(i["acc"]), float(i["acc_norm"]))
                for i in t["items"])) for t in data["tasks"])
            step = data["step"]
            return cls(str(data["model"]), None if step is None else int(step),
                       str(data["lm_eval_version"]), tasks, int(data["version"]))
        except (ValueError, KeyError, TypeError) as e:
            if isinstance(e, ReportError):
                raise
            raise ReportError(f"not an lm-eval report ({e})") from None
