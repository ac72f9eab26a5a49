"""lm-eval-harness on a marin model: export it if it is a training run, write the tasks'
YAMLs, run lm-eval offline, keep its results; as a function and as an executor step.

    step = lm_eval_step("eval/tiny", output_path_of(train), [TaskConfig("plays", PATH)])
    done = evaluate_lm("local_store/train/tiny-1a2b3c4d", [TaskConfig("plays", PATH)])
    done.report.task("plays").acc_norm        # LmEvalReport (marin.evaluation.harness.results)
    write_outputs(done, "results/tiny")       # results.json, samples_plays.jsonl, report.json

``model`` is a training step's output (exported with ``marin.export.export_hf`` into a
scratch folder, at checkpoint ``step`` or the newest) or a Hugging Face folder (``marin
export hf``'s). lm-eval's ``HFLM`` loads it in float32 with its own tokenizer (marin's BPE
or GPT-2, as exported), adding no BOS; ``max_length`` is the model's ``seq_len - 1``, so
that a long item keeps the same last ``seq_len`` tokens marin's scoring keeps. Nothing is
downloaded: ``HF_HUB_OFFLINE``, ``HF_DATASETS_OFFLINE`` and ``TRANSFORMERS_OFFLINE`` are
set, the tasks are lm-eval YAMLs over local copies of their items
(``marin.evaluation.harness.task_yaml``), and lm-eval's own task index is not read.
The output: lm-eval's results JSON (``results.json``, its samples left out), its per-item
samples (``samples_<task>.jsonl``) and marin's ``report.json``.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from marin.evaluation.harness.results import ItemResult, LmEvalReport, TaskResult
from marin.evaluation.harness.task_yaml import check_task_names, write_task_folder
from marin.evaluation.tasks import TaskConfig, TaskItem, read_task, task_fingerprint
from marin.execution import ExecutorStep, this_output_path, unversioned_field
from marin.storage.files import exists, join_url, local_path, open_url

__all__ = ["INSTALL", "LmEvalConfig", "LmEvalError", "LmEvalRun", "evaluate_lm",
           "lm_eval_step", "run_lm_eval", "write_outputs"]

INSTALL = "pip install 'marin[lm-eval]'"
RESULTS, REPORT = "results.json", "report.json"
_OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


class LmEvalError(ValueError):
    """The model, the tasks or the installation cannot be evaluated; one line with the fix."""


@dataclass(frozen=True)
class LmEvalConfig:
    """The config of an lm-eval step.

    Attributes:
        model: a training step's output (exported first) or a Hugging Face folder.
        tasks: the tasks to evaluate, each a marin task file.
        output_path: where the results go (the step's own output).
        step: the checkpoint of a training run to export (None: the newest committed one).
        batch_size: lm-eval's batch size (the results do not depend on it).
        device: torch's device for the model (``cpu``, ``cuda``).
    """

    model: str
    tasks: tuple[TaskConfig, ...]
    output_path: str
    step: int | None = None
    batch_size: int = unversioned_field(default=16)
    device: str = unversioned_field(default="cpu")


@dataclass(frozen=True)
class LmEvalRun:
    """One lm-eval evaluation.

    Attributes:
        report: marin's report of it.
        results_json: lm-eval's results JSON (its samples left out), as text.
        samples_jsonl: each task's per-item samples as lm-eval logs them (JSON lines), by
            task name.
    """

    report: LmEvalReport
    results_json: str
    samples_jsonl: dict[str, str]


def lm_eval_step(name: str, model: Any, tasks: Sequence[TaskConfig], step: int | None = None,
                 batch_size: int = 16, device: str = "cpu") -> ExecutorStep:
    """An executor step evaluating ``model`` (a path, or ``output_path_of(train_step)``) on
    ``tasks`` with lm-eval; cached and skipped like any step."""
    return ExecutorStep(name, run_lm_eval,
                        LmEvalConfig(model, tuple(tasks), this_output_path(), step, batch_size,
                                     device),
                        description=f"lm-eval on {len(tasks)} task(s)")


def run_lm_eval(config: LmEvalConfig) -> None:
    """The step's function: ``evaluate_lm``, then ``write_outputs`` into its output."""
    write_outputs(evaluate_lm(config.model, config.tasks, config.step, config.batch_size,
                              config.device), config.output_path)


def write_outputs(done: LmEvalRun, out: str) -> None:
    """``results.json``, ``samples_<task>.jsonl`` and ``report.json`` under ``out``."""
    files = {RESULTS: done.results_json, REPORT: done.report.encode().decode(),
             **{f"samples_{name}.jsonl": text for name, text in done.samples_jsonl.items()}}
    for name, text in files.items():
        with open_url(join_url(out, name), "w", encoding="utf-8") as f:
            f.write(text)


def evaluate_lm(model: str, tasks: Sequence[TaskConfig], step: int | None = None,
                batch_size: int = 16, device: str = "cpu") -> LmEvalRun:
    """lm-eval's scores of ``model`` on ``tasks`` (module docstring)."""
    if not tasks:
        raise LmEvalError("no tasks: name at least one task file")
    check_task_names(tasks)
    items = {task.name: read_task(task.path) for task in tasks}  # bad files fail first
    is_folder = _check_model(model)
    if step is not None and is_folder:
        raise LmEvalError(f"step {step}: {model} is a Hugging Face folder, which holds one "
                          "checkpoint; pass a step only with a training run")
    harness = _import_lm_eval()
    with tempfile.TemporaryDirectory(prefix="marin-lm-eval-") as scratch:
        work = Path(scratch)
        folder, exported = (local_path(model), None) if is_folder else _export(model, step,
                                                                               work)
        names = write_task_folder(items, work / "tasks")
        results = harness.run(folder, work / "tasks", names, batch_size, device)
    samples = results.pop("samples")
    report = LmEvalReport(model, exported, harness.version, tuple(
        _task_result(t.name, task_fingerprint(t.path), items[t.name], samples[t.name])
        for t in tasks))
    dump = harness.handle_non_serializable
    return LmEvalRun(report, json.dumps(results, indent=2, default=dump, ensure_ascii=False),
                     {name: "".join(json.dumps(s, default=dump, ensure_ascii=False) + "\n"
                                    for s in samples[name]) for name in names})


def _check_model(model: str) -> bool:
    """Whether ``model`` is a Hugging Face folder (else it is a training step's output)."""
    from marin.execution.status import INFO_FILE, info_path

    if not exists(model):
        raise LmEvalError(f"{model} does not exist: pass a training step's output folder or "
                          "a Hugging Face folder (marin export hf)")
    if exists(join_url(model, "config.json")) and exists(join_url(model, "tokenizer.json")):
        if local_path(model) is None:
            raise LmEvalError(f"{model}: lm-eval loads a Hugging Face folder from a local "
                              "path; copy it here first, or pass the training run")
        return True
    if not exists(info_path(model)):
        raise LmEvalError(f"{model} is neither a training step's output (no {INFO_FILE}) nor "
                          "a Hugging Face folder (no config.json and tokenizer.json): pass "
                          "one of them")
    return False


def _export(model: str, step: int | None, work: Path) -> tuple[str, int | None]:
    from marin.export import ExportError, export_hf

    try:
        done = export_hf(model, str(work / "model"), step)
    except ExportError as e:
        raise LmEvalError(str(e)) from None
    return done.out, done.step


@dataclass(frozen=True)
class _Harness:
    """lm-eval, imported.

    Attributes:
        version: its installed version.
        simple_evaluate: ``lm_eval.simple_evaluate``.
        hflm: its Hugging Face model class, ``HFLM``.
        task_manager: ``lm_eval.tasks.TaskManager``.
        handle_non_serializable: how lm-eval writes values JSON has no type for.
    """

    version: str
    simple_evaluate: Any
    hflm: Any
    task_manager: Any
    handle_non_serializable: Any

    def run(self, folder: str, tasks: Path, names: Sequence[str], batch_size: int,
            device: str) -> dict[str, Any]:
        """lm-eval's results (its samples included) of the model in ``folder``."""
        with open_url(join_url(folder, "config.json"), "r") as f:
            seq_len = int(json.load(f)["max_position_embeddings"])
        lm = self.hflm(pretrained=folder, backend="causal", dtype="float32",
                       batch_size=batch_size, device=device, max_length=seq_len - 1,
                       add_bos_token=False)
        manager = self.task_manager(include_path=str(tasks), include_defaults=False)
        results = self.simple_evaluate(model=lm, tasks=list(names), task_manager=manager,
                                       log_samples=True, verbosity="ERROR")
        if results is None:  # only a non-zero rank of a distributed run gets None
            raise LmEvalError("lm-eval returned no results on this process")
        return dict(results)


def _import_lm_eval() -> _Harness:
    """lm-eval, imported offline; a missing extra fails naming it."""
    os.environ.update(_OFFLINE)
    try:
        import lm_eval
        from lm_eval.models.huggingface import HFLM
        from lm_eval.tasks import TaskManager
        from lm_eval.utils import handle_non_serializable
    except ImportError as e:
        raise LmEvalError(f"lm-eval cannot be imported ({e}): {INSTALL}") from None
    from importlib.metadata import version

    return _Harness(version("lm_eval"), lm_eval.simple_evaluate, HFLM, TaskManager,
                    handle_non_serializable)


def _task_result(name: str, fingerprint: str, items: Sequence[TaskItem],
                 samples: Sequence[dict[str, Any]]) -> TaskResult:
    """``name``'s result from lm-eval's samples of it (one per item, in any order)."""
    by_doc = {int(s["doc_id"]): s for s in samples}
    if sorted(by_doc) != list(range(len(items))):
        raise LmEvalError(f"lm-eval returned {len(by_doc)} samples of task {name!r}, which "
                          f"has {len(items)} items")
    results = []
    for index, item in enumerate(items):
        sample = by_doc[index]
        logliks = tuple(float(response[0]) for response in sample["filtered_resps"])
        results.append(ItemResult(logliks, item.gold,
                                  len(item.choices[item.gold].encode("utf-8")),
                                  float(sample["acc"]), float(sample["acc_bytes"])))
    return TaskResult(name, fingerprint, tuple(results))
