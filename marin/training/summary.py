"""A training run's ``summary.json``: what the scaling fits, the dashboard and a study read.

    summary = read_summary("local_store/train/tiny-1a2b3c4d")   # a RunSummary
    summary.eval_bpb, summary.evals["plays"].bpb, summary.tokens_by_component
    summary.metric("macro_bpb"), summary.metric("plays/loss")
    summary.tasks["plays-cloze"].acc, summary.metric("lm_eval/averages/acc")
    write_summary(out, summary)                                  # atomically

The file is versioned (``format``, ``version``); a summary written before it was (the same
figures, no ``format``) still reads. Besides the fields, the file carries the same figures
in Levanter's names (``parameter_count``, ``train/loss``, ``eval/loss``,
``eval/<set>/bpb`` ...), as Marin's analysis reads a summary; those keys are written, never
read back. This module imports no JAX.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from marin.storage.files import atomic_write, join_url, open_url
from marin.training import metric_names as names

__all__ = ["SUMMARY", "EvalFigures", "RunSummary", "SummaryError", "TaskFigures",
           "read_summary", "task_figures", "write_summary"]

SUMMARY = "summary.json"


class SummaryError(ValueError):
    """A summary.json cannot be read; the message names the file and the problem."""


@dataclass(frozen=True)
class EvalFigures:
    """One validation set's final figures: mean next-token loss (nats) and bits per byte."""

    loss: float
    bpb: float


@dataclass(frozen=True)
class TaskFigures:
    """One downstream task's final figures (``marin.evaluation``): the means over its
    items of acc, acc_norm and the gold choice's bits per byte; and the fingerprint of the
    task file that was scored (None: not recorded)."""

    acc: float
    acc_norm: float
    bpb: float
    fingerprint: str | None = None


def task_figures(record: Mapping[str, Any], fingerprints: Mapping[str, str | None]
                 ) -> dict[str, TaskFigures]:
    """Each task's figures in a metrics record (``lm_eval/<task>/acc``, ...), with its
    file's fingerprint from ``fingerprints``."""
    labels = [k.split("/")[1] for k in record if k.startswith("lm_eval/") and k.count("/") == 2
              and k.endswith("/acc") and k.split("/")[1] != names.TASK_AVERAGES]
    return {label: TaskFigures(*(float(record[names.task_name(label, q)])
                                 for q in names.TASK_QUANTITIES), fingerprints.get(label))
            for label in labels}


@dataclass(frozen=True)
class RunSummary:
    """The figures of a finished run.

    ``eval_loss``/``eval_bpb`` are over all validation tokens together; ``macro_loss``/
    ``macro_bpb`` the means over the named sets (with no named set, the one validation
    split's figures); ``evals`` the named sets' own figures; ``tasks`` the downstream
    tasks' (``lm_eval/<task>/*``, none when the run scored no task). The eval figures are None
    when the run had no validation data. ``tokens`` are every token the model was trained
    on; ``flops`` those of this run's own steps: a branch (``parent_run`` and
    ``branch_step`` set, ``marin.training.branching``) counts only its steps
    ``branch_step..steps``, the parent's prefix being the parent's.
    """

    FORMAT = "marin.run_summary"
    VERSION = 1

    params: int
    tokens: int
    flops: float
    steps: int
    batch_size: int
    seq_len: int
    train_loss: float
    final_step_loss: float
    eval_loss: float | None = None
    eval_bpb: float | None = None
    macro_loss: float | None = None
    macro_bpb: float | None = None
    evals: dict[str, EvalFigures] = field(default_factory=dict)
    tokens_by_component: dict[str, int] = field(default_factory=dict)
    tasks: dict[str, TaskFigures] = field(default_factory=dict)
    parent_run: str | None = None
    branch_step: int | None = None

    @property
    def trained_flops(self) -> float:
        """The FLOPs of every step the model was trained with: ``flops``, and for a branch
        its parent's prefix ``0..branch_step`` too (every step costs the same)."""
        if self.branch_step is None or self.steps <= self.branch_step:
            return self.flops
        return self.flops * self.steps / (self.steps - self.branch_step)

    def metric(self, name: str) -> float | None:
        """The figure a study's metric names: ``macro_bpb``, ``macro_loss``, ``loss``,
        ``bpb`` (all validation tokens), ``<set>/loss``, ``<set>/bpb``, or a task's
        ``lm_eval/<task>/<acc|acc_norm|bpb>`` (task ``averages``: the means over tasks);
        None when the run did not record it (no validation data, or no such set)."""
        if name.startswith("lm_eval/"):
            return self._task_metric(name)
        plain = {"macro_bpb": self.macro_bpb, "macro_loss": self.macro_loss,
                 "loss": self.eval_loss, "bpb": self.eval_bpb}
        if name in plain:
            return plain[name]
        label, _, quantity = name.rpartition("/")
        if not label or quantity not in ("loss", "bpb"):
            raise ValueError(f"unknown metric {name!r}: use macro_bpb, macro_loss, loss, bpb, "
                             "<set>/loss or <set>/bpb")
        figures = self.evals.get(label)
        return None if figures is None else getattr(figures, quantity)

    def _task_metric(self, name: str) -> float | None:
        _, label, quantity = [*name.split("/"), "", ""][:3]
        if name.count("/") != 2 or quantity not in names.TASK_QUANTITIES:
            raise ValueError(f"unknown metric {name!r}: use lm_eval/<task>/acc, acc_norm or "
                             "bpb")
        if label == names.TASK_AVERAGES:
            found = [getattr(f, quantity) for f in self.tasks.values()]
            return sum(found) / len(found) if found else None
        figures = self.tasks.get(label)
        return None if figures is None else getattr(figures, quantity)

    def to_json(self) -> dict[str, Any]:
        evals = {k: {"loss": v.loss, "bpb": v.bpb} for k, v in self.evals.items()}
        data: dict[str, Any] = {
            "format": self.FORMAT, "version": self.VERSION, "params": self.params,
            "tokens": self.tokens, "flops": self.flops, "steps": self.steps,
            "batch_size": self.batch_size, "seq_len": self.seq_len,
            "train_loss": self.train_loss, "final_step_loss": self.final_step_loss,
            "eval_loss": self.eval_loss, "eval_bpb": self.eval_bpb,
            "macro_loss": self.macro_loss, "macro_bpb": self.macro_bpb, "evals": evals,
            "tokens_by_component": dict(self.tokens_by_component)}
        if self.tasks:
            data["tasks"] = {k: {**{q: getattr(v, q) for q in names.TASK_QUANTITIES},
                                 "fingerprint": v.fingerprint} for k, v in self.tasks.items()}
        if self.parent_run is not None:
            data.update(parent_run=self.parent_run, branch_step=self.branch_step)
        return {**data, **self._levanter_names()}

    def _levanter_names(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            names.PARAMETER_COUNT: self.params, names.TOTAL_TOKENS: self.tokens,
            names.TOTAL_GFLOPS: self.flops / 1e9, names.TRAIN_LOSS: self.train_loss,
            names.EVAL_LOSS: self.eval_loss, names.EVAL_BPB: self.eval_bpb}
        if self.evals:
            out[names.EVAL_MACRO_LOSS], out[names.EVAL_MACRO_BPB] = (self.macro_loss,
                                                                     self.macro_bpb)
        for label, figures in self.evals.items():
            out[names.eval_name(label, "loss")] = figures.loss
            out[names.eval_name(label, "bpb")] = figures.bpb
        for label in [*self.tasks, names.TASK_AVERAGES] if self.tasks else []:
            for quantity in names.TASK_QUANTITIES:
                out[names.task_name(label, quantity)] = self._task_metric(
                    names.task_name(label, quantity))
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunSummary:
        """A summary from ``to_json``'s data, or from an unversioned summary.json."""
        if not isinstance(data, Mapping):
            raise SummaryError(f"a run summary is a JSON object, got {type(data).__name__}")
        version = data.get("version")
        if "format" in data and (data["format"] != cls.FORMAT or version != cls.VERSION):
            raise SummaryError(f"a run summary of format {data['format']!r} version "
                               f"{version!r}; this marin reads {cls.FORMAT!r} version "
                               f"{cls.VERSION} (and unversioned files): upgrade marin")
        missing = [k for k in ("params", "tokens", "flops") if data.get(k) is None]
        if missing:
            raise SummaryError(f"a run summary without {', '.join(missing)}: not a "
                               "summary.json of marin's trainer")
        train_loss = _number(data.get("train_loss"), math.nan)
        eval_loss, eval_bpb = _number(data.get("eval_loss")), _number(data.get("eval_bpb"))
        evals = {str(k): EvalFigures(float(v["loss"]), float(v["bpb"]))
                 for k, v in (data.get("evals") or {}).items()}
        unversioned = "format" not in data  # before macro figures: those of the one split
        return cls(
            params=int(data["params"]), tokens=int(data["tokens"]), flops=float(data["flops"]),
            steps=int(data.get("steps") or 0), batch_size=int(data.get("batch_size") or 0),
            seq_len=int(data.get("seq_len") or 0), train_loss=train_loss,
            final_step_loss=_number(data.get("final_step_loss"), train_loss),
            eval_loss=eval_loss, eval_bpb=eval_bpb,
            macro_loss=eval_loss if unversioned else _number(data.get("macro_loss")),
            macro_bpb=eval_bpb if unversioned else _number(data.get("macro_bpb")),
            evals=evals,
            tokens_by_component={str(k): int(v) for k, v in
                                 (data.get("tokens_by_component") or {}).items()},
            tasks={str(k): TaskFigures(*(float(v[q]) for q in names.TASK_QUANTITIES),
                                       v.get("fingerprint"))
                   for k, v in (data.get("tasks") or {}).items()},
            parent_run=None if data.get("parent_run") is None else str(data["parent_run"]),
            branch_step=None if data.get("branch_step") is None else int(data["branch_step"]))


def _number(value: Any, default: float | None = None) -> float | None:
    return default if value is None else float(value)


def write_summary(run_path: str, summary: RunSummary) -> None:
    """``<run_path>/summary.json``, written whole or not at all."""
    with atomic_write(join_url(run_path, SUMMARY), "w") as f:
        json.dump(summary.to_json(), f, indent=1)


def read_summary(run_path: str) -> RunSummary:
    """``<run_path>/summary.json``; FileNotFoundError when the run wrote none, and
    ``SummaryError`` naming the file when it cannot be read."""
    url = join_url(run_path, SUMMARY)
    with open_url(url, "r") as f:
        text = f.read()
    try:
        return RunSummary.from_json(json.loads(text))
    except (ValueError, KeyError, TypeError) as e:
        raise SummaryError(f"{url}: {str(e).splitlines()[0] if str(e) else repr(e)}") from None
