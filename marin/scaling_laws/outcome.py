"""How a study's candidate run ended, ``outcome.json`` in the run's folder: ``RunOutcome``.

    outcome = read_outcome(run_path)          # RunOutcome | None (no file yet)
    row = outcome.row("macro_bpb")            # the run as the fits read it, a RunRow

The study writes these (``marin.scaling_laws.study``); the readers of run folders
(``marin.scaling_laws.run_readers``) read them as the ``marin-study`` layout, so this sits
below the study. A file of the previous, unversioned format reads as the single label
``"default"`` fitted on eval loss.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

from marin.scaling_laws.codec import Artifact, decode_fields, read_json
from marin.scaling_laws.run_status import RunStatus
from marin.scaling_laws.values import RunRow
from marin.storage.files import join_url
from marin.training.summary import RunSummary

__all__ = ["LABEL", "METRIC", "OUTCOME", "RunOutcome", "legacy_outcome", "legacy_summary",
           "read_outcome"]

OUTCOME = "outcome.json"  # a candidate run's folder
LABEL = "default"  # the label of every run before labels
METRIC = "loss"  # eval loss in nats (train loss when a run had no validation text)


@dataclass(frozen=True)
class RunOutcome(Artifact):
    """How a candidate run ended: ``status`` ok, diverged, out_of_memory or invalid_config;
    ``curves`` maps each eval metric (``macro_bpb``, ``plays/loss``, ``loss`` ...) to its
    values at every evaluation."""

    FORMAT: ClassVar[str] = "marin.study.run_outcome"
    VERSION: ClassVar[int] = 2

    run_name: str
    group: str
    label: str
    budget: float
    status: RunStatus
    reason: str | None
    hidden_dim: int
    num_layers: int
    summary: RunSummary | None
    seed: int = 0
    replicate_of: str | None = None
    curves: dict[str, tuple[float, ...]] = field(default_factory=dict)

    @classmethod
    def _previous(cls, data: dict[str, Any], where: str) -> RunOutcome:
        return decode_fields(cls, legacy_outcome(data), where)

    def row(self, metric: str, path: str = "") -> RunRow:
        """The run's row for a fit on ``metric``; a run that ended without it is marked
        ``no_loss``."""
        s = self.summary
        value = s.metric(metric) if s is not None else None
        curve = self.curves.get(metric, ())
        if not curve and s is not None and not s.evals:  # one split: its figures are the macro
            curve = self.curves.get(metric.removeprefix("macro_"), ())
        status, reason = self.status, self.reason
        if status == RunStatus.OK and (value is None or not math.isfinite(value)):
            status, reason = RunStatus.NO_LOSS, f"the run recorded no finite {metric} ({value})"
        nan = math.nan
        return RunRow(run=self.run_name, group=self.group, label=self.label, budget=self.budget,
                      seed=self.seed, replicate_of=self.replicate_of,
                      hidden_dim=self.hidden_dim, num_layers=self.num_layers,
                      params=float(s.params) if s else nan, tokens=float(s.tokens) if s else nan,
                      flops=float(s.trained_flops) if s else nan,
                      loss=float(value) if value is not None else nan,
                      train_loss=s.train_loss if s else None,
                      first_eval_loss=curve[0] if curve else None, status=status,
                      reason=reason, parent_run=s.parent_run if s else None,
                      branch_step=s.branch_step if s else None)


def read_outcome(run_path: str) -> RunOutcome | None:
    path = join_url(run_path, OUTCOME)
    data = read_json(path)
    return None if data is None else RunOutcome.from_json(data, where=path)


def legacy_outcome(d: dict[str, Any]) -> dict[str, Any]:
    """An ``outcome.json`` of the previous, unversioned format as today's fields."""
    return {"run_name": d.get("run_name", ""), "group": d.get("group", ""), "label": LABEL,
            "budget": d.get("budget"), "status": d.get("status", RunStatus.OK.value),
            "reason": d.get("reason"), "hidden_dim": d.get("hidden_dim", 0),
            "num_layers": d.get("num_layers", 0), "summary": legacy_summary(d.get("summary")),
            "curves": {METRIC: d.get("eval_losses") or []}}


def legacy_summary(s: Any) -> Any:
    """An old summary without eval loss was fitted on its train loss."""
    if isinstance(s, dict) and s.get("eval_loss") is None and s.get("train_loss") is not None:
        return {**s, "eval_loss": s["train_loss"]}
    return s
