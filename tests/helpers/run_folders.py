"""Runs drawn from a known law, written as run folders in each layout a fit reads: marin's
summary.json, Marin's tracker_metrics.jsonl, Levanter's JSON logger, W&B exports.

    for i, run in enumerate(law_runs()):
        WRITERS["marin"](tmp_path / f"r{i}", *run)       # (params, tokens, flops, loss)
    law_of(fit_of(read_run_folders([str(tmp_path / "*")])))   # close to E, A, ALPHA, ...
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

from marin.scaling_laws.study.analysis import fit_labels
from marin.training.summary import RunSummary, write_summary

# Hoffmann et al. (2022)'s fitted law, the truth the runs are drawn from
E, A, ALPHA, B, BETA = 1.69, 406.4, 0.34, 410.7, 0.28
BUDGETS = (1e18, 3e18, 1e19, 3e19)
C4 = "eval/paloma/c4_en/bpb"


def law_runs() -> list[tuple[float, float, float, float]]:
    """(params, tokens, flops, loss) at 7 sizes per budget, noise-free, C = 6ND."""
    runs = []
    for budget in BUDGETS:
        for params in np.geomspace(3e7, 3e9, 7):
            tokens = budget / (6 * params)
            runs.append((float(params), float(tokens), budget,
                         E + A / params**ALPHA + B / tokens**BETA))
    return runs


def levanter_summary(params, tokens, flops, loss, metric=C4) -> dict:
    return {"parameter_count": params, "throughput/total_tokens": tokens,
            "throughput/total_gflops": flops / 1e9, metric: loss, "train/loss": loss + 0.1}


def write_marin(folder: Path, params, tokens, flops, loss) -> None:
    """marin's trainer's own summary.json."""
    write_summary(str(folder), RunSummary(
        params=int(params), tokens=int(tokens), flops=flops, steps=10, batch_size=8,
        seq_len=64, train_loss=loss + 0.1, final_step_loss=loss + 0.1, eval_loss=loss,
        eval_bpb=loss / 2))


def write_marin_tracker(folder: Path, params, tokens, flops, loss, group=None) -> None:
    """Marin's copy of a W&B run: one line of config and summary."""
    folder.mkdir(parents=True)
    config = {"trainer": {"tracker": {"group": group}}} if group else {"model": {"d": 1}}
    record = {"config": config,
              "summary": levanter_summary(params, tokens, flops, loss, "eval/loss")}
    (folder / "tracker_metrics.jsonl").write_text(json.dumps(record) + "\n")


def write_levanter(folder: Path, params, tokens, flops, loss, name="tracker.jsonl") -> None:
    """Levanter's JSON logger: the figures logged per step, the eval loss in the summary."""
    folder.mkdir(parents=True)
    lines = [{"tracker": "json_logger", "event": "hparams", "hparams": {"lr": 0.01}}]
    for step in (1, 2):
        lines.append({"tracker": "json_logger", "event": "log", "step": step, "metrics": {
            "parameter_count": params, "throughput/total_tokens": tokens * step / 2,
            "throughput/total_gflops": flops / 1e9 * step / 2}})
    lines.append({"tracker": "json_logger", "event": "finish", "summary": {"eval/loss": loss}})
    (folder / name).write_text("".join(json.dumps(x) + "\n" for x in lines))


def write_wandb(folder: Path, params, tokens, flops, loss, as_list=False) -> None:
    """A W&B export: summary without the eval loss, which is in the history (at the last
    ``_step``, the history out of order), and W&B's wrapped config."""
    folder.mkdir(parents=True)
    summary = levanter_summary(params, tokens, flops, loss, "unused")
    del summary["unused"]
    (folder / "wandb-summary.json").write_text(json.dumps(summary))
    history = [{"_step": 20, "eval/loss": loss}, {"_step": 10, "eval/loss": loss + 1}]
    (folder / ("history.json" if as_list else "wandb-history.jsonl")).write_text(
        json.dumps(history) if as_list else "".join(json.dumps(h) + "\n" for h in history))
    (folder / "config.json").write_text(json.dumps({"lr": {"value": 0.01, "desc": None}}))


WRITERS = {"marin": write_marin, "marin-wandb": write_marin_tracker,
           "levanter": write_levanter, "wandb": write_wandb}


def write_table(path: Path, runs) -> None:
    with path.open("w", newline="") as f:
        table = csv.writer(f)
        table.writerow(["run", "params", "tokens", "flops", "loss"])
        table.writerows([f"r{i}", *run] for i, run in enumerate(runs))


def fit_of(rows, metric="loss"):
    labels = list(dict.fromkeys(r.label for r in rows))
    return fit_labels(rows, labels, metric=metric, bootstrap=0)


def law_of(fit) -> dict[str, float]:
    a2, a3 = fit.approach2, fit.approach3
    return {"params_exponent": a2.params.exponent, "tokens_exponent": a2.tokens.exponent,
            "E": a3.E, "A": a3.A, "B": a3.B, "alpha": a3.alpha, "beta": a3.beta}
