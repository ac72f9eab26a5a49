"""The previous, unversioned study files, rewritten as the fields of today's artifacts.

    fields = legacy_fit(json.load(open("fit.json")), "fit.json")   # then StudyFit's fields

Before labels, a study had one corpus and fitted eval loss in nats: such files read as the
label ``"default"`` with the metric ``"loss"``. ``marin scaling fit``'s own ``fit.json`` of
that time had another shape; it is refused in one line (rerun the command).
Only ``marin.scaling_laws.study.artifacts`` calls these.
"""

from __future__ import annotations

from typing import Any

from marin.scaling_laws.codec import ArtifactError
from marin.scaling_laws.outcome import LABEL, legacy_summary

__all__ = ["legacy_fit", "legacy_prediction"]

METRIC = "loss"  # eval loss in nats (train loss when a run had no validation text)


def legacy_fit(d: dict[str, Any], where: str) -> dict[str, Any]:
    if "params_fit" in d or "parametric" in d:
        raise ArtifactError(f"{where} was written by `marin scaling fit` before fit files had "
                            "a format; rerun `marin scaling fit` to rewrite it")
    if "budgets" not in d or "used" not in d:
        raise ArtifactError(f"{where} is not a study's fit.json of any known format")
    a2, a3 = d.get("approach2") or {}, d.get("approach3") or {}
    return {
        "label": LABEL, "metric": METRIC, "runs": d.get("runs", 0), "used": d["used"],
        "excluded": [{**e, "reason": e.get("reason") or ""} for e in d.get("excluded", [])],
        "budgets": d["budgets"], "budgets_not_fitted": d.get("budgets_not_fitted", []),
        "approach2": a2 if "params" in a2 else None, "approach2_error": a2.get("error"),
        "approach3": _approach3(a3) if "E" in a3 else None, "approach3_error": a3.get("error"),
        "predictions": [_target(p) for p in d.get("predictions", [])],
        "holdout": _target(d["holdout"]) if d.get("holdout") else None}


def _approach3(a3: dict[str, Any]) -> dict[str, Any]:
    keys = ("E", "A", "B", "alpha", "beta", "objective", "standard_errors",
            "flops_coefficient", "flops_exponent", "bootstrap_samples")
    return {k: a3[k] for k in keys if k in a3 and a3[k] is not None}


def _target(p: dict[str, Any]) -> dict[str, Any]:
    return {"budget": p["budget"], "approach2": p.get("approach2"),
            "approach3": p.get("approach3")}


def legacy_prediction(d: dict[str, Any]) -> dict[str, Any]:
    out = {k: d.get(k) for k in ("budget", "run_name", "group", "status", "reason",
                                 "size_from", "candidate", "predicted_loss",
                                 "predicted_loss_interval", "loss_from", "achieved_loss",
                                 "error_percent", "within_interval")}
    out.update(label=LABEL, summary=legacy_summary(d.get("summary")),
               optimum=_target(d["predicted"]) if d.get("predicted") else None,
               fit_interval=d.get("predicted_loss_interval"),
               run_name=d.get("run_name", ""), group=d.get("group", ""))
    if out["candidate"] is not None:
        keys = ("hidden_dim", "num_layers", "params", "tokens", "flops", "batch_size",
                "train_steps")
        out["candidate"] = {k: out["candidate"][k] for k in keys}
    return {k: v for k, v in out.items() if v is not None or k in ("reason",)}
