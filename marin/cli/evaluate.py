"""The ``marin eval`` command: lm-eval-harness on a trained run or an export.

    marin eval lm-eval local_store/train/tiny-1a2b3c4d --tasks tasks/plays.jsonl
    marin eval lm-eval exports/tiny --tasks cloze=tasks/plays.jsonl --out results/tiny --json

Each ``--tasks`` value is a task file (named after its file, ``plays``) or ``NAME=PATH``.
A training run is exported first (its newest checkpoint, or ``--step``); lm-eval runs
offline (``marin.evaluation.harness``). It prints each task's acc, acc_norm (by UTF-8
bytes) and bpb under the names a run records them, or with ``--json`` marin's report;
``--out`` keeps lm-eval's results JSON, its per-item samples and the report. A path that is
neither a run nor an export, a bad task file or a missing ``marin[lm-eval]`` is one line and
exit status 2.
"""

from __future__ import annotations

import argparse
import json
import os

from marin.cli.console import UsageError, command, out, print_json
from marin.evaluation import TaskConfig
from marin.storage.files import local_path

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    group = sub.add_parser("eval", help="evaluate a trained model with other libraries")
    esub = group.add_subparsers(dest="eval_command", metavar="HARNESS", required=True)
    lm = esub.add_parser("lm-eval", help="lm-eval-harness (0.4) on marin's task files, "
                         "offline")
    lm.add_argument("model", metavar="RUN_OR_EXPORT", help="a training step's output folder, "
                    "or a Hugging Face folder (marin export hf)")
    lm.add_argument("--tasks", nargs="+", required=True, metavar="PATH_OR_NAME=PATH",
                    help="task files (JSON lines); a task is named after its file, or NAME=PATH")
    lm.add_argument("--out", help="a new folder for results.json, samples_<task>.jsonl and "
                    "report.json")
    lm.add_argument("--step", type=int, help="the checkpoint of a training run (default: "
                    "the newest committed one)")
    lm.add_argument("--batch-size", type=int, default=16, help="lm-eval's batch size")
    lm.add_argument("--device", default="cpu", help="torch's device (cpu, cuda)")
    lm.add_argument("--json", action="store_true", help="print marin's report as JSON")
    lm.set_defaults(handler=_lm_eval)


def _task_of(value: str) -> TaskConfig:
    """``NAME=PATH``, or a path named after its file (``tasks/plays.jsonl``: ``plays``)."""
    name, equals, path = value.partition("=")
    if not equals:
        path = value
        name = os.path.splitext(os.path.basename(path.rstrip("/")))[0]
    if not name or not path:
        raise UsageError(f"--tasks {value!r}: give a task file, or NAME=PATH")
    return TaskConfig(name=name, path=path)


@command()
def _lm_eval(args: argparse.Namespace) -> int:
    from marin.evaluation.harness.run import evaluate_lm, write_outputs

    if args.batch_size < 1:
        raise UsageError(f"--batch-size must be at least 1, got {args.batch_size}")
    local = local_path(args.out) if args.out else None
    if local and os.path.isdir(local) and os.listdir(local):
        raise UsageError(f"--out {args.out} holds files: choose a new or empty folder")
    done = evaluate_lm(args.model, [_task_of(t) for t in args.tasks], args.step,
                       args.batch_size, args.device)
    if args.out:
        if local:
            os.makedirs(local, exist_ok=True)
        write_outputs(done, args.out)
    if args.json:
        print_json(json.loads(done.report.encode()))
        return 0
    from rich.table import Table

    report = done.report
    where = f" at step {report.step}" if report.step is not None else ""
    table = Table(title=f"lm-eval {report.lm_eval_version}: {report.model}{where}")
    for column in ("task", "items", "acc", "acc_norm", "bpb"):
        table.add_column(column)
    for task in report.tasks:
        table.add_row(task.name, str(len(task.items)), f"{task.acc:.4f}",
                      f"{task.acc_norm:.4f}", f"{task.bpb:.4f}")
    out().print(table)
    return 0
