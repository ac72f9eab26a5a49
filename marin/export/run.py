"""A training step's output, read back for export: its model's shape, its tokenizer, and
its model at a committed checkpoint.

    run = read_run("local_store/train/tiny-1a2b3c4d")
    run.model                  # TransformerConfig, as the step trained it
    run.tokenizer              # "gpt2", or the path of the tokenizer.json folder
    model, step = restore_model(run, step=None)   # the newest committed checkpoint

A damaged newest ``step_N.ref`` (the marker an executor's attempt publishes a checkpoint
by) is refused rather than passed over for an older step; an explicit ``step`` exports
that one.

Design note: the trainer records nothing beside its checkpoints but ``metrics.jsonl`` and
``summary.json``; the step's config (``TrainLmConfig``: model, optimizer, steps, cache,
tokenizer) is what the executor writes to ``.executor_info`` when the step starts. The
checkpoints hold the optimizer's moments too, so restoring needs the optimizer's state
shape: it is rebuilt from the recorded hyperparameters exactly as the trainer builds it.
When ``TrainLmConfig.tokenizer`` is unset, the tokenizer is the one the token cache's
ledger names, checked against the fingerprint the ledger recorded.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from typing import Any

from marin.execution.shared import MARKER_SUFFIX
from marin.execution.status import INFO_FILE, CorruptRecordError, decode_info, info_path
from marin.models.config import TransformerConfig
from marin.storage import get_storage
from marin.storage.files import exists, join_url, open_url
from marin.training.hyperparameters import OptimizerHyperparameters

__all__ = ["ExportError", "TrainedRun", "checkpoint_root", "read_run", "restore_model"]

_REF = re.compile(rf"^step_(\d+){re.escape(MARKER_SUFFIX)}$")


class ExportError(ValueError):
    """The run or the destination cannot be exported to; the message names the field or
    file and the fix."""


@dataclass(frozen=True)
class TrainedRun:
    """What the export needs of one training step's output.

    Attributes:
        path: the step's output folder.
        model: the model's shape.
        optimizer: the hyperparameters, for the shape of the optimizer state saved with it.
        train_steps: the run's length (the optimizer's schedule depends on it).
        seed: the initialisation seed.
        tokenizer: a ``load_encoder`` spec: ``gpt2`` or a tokenizer.json (or its folder).
        tokenizer_fingerprint: what the token cache recorded of it ("" when unknown).
    """

    path: str
    model: TransformerConfig
    optimizer: OptimizerHyperparameters
    train_steps: int
    seed: int
    tokenizer: str
    tokenizer_fingerprint: str = ""


def read_run(path: str, tokenizer: str | None = None) -> TrainedRun:
    """The recorded config of the training step whose output is ``path``; ``tokenizer``
    (a ``load_encoder`` spec) replaces the recorded one."""
    where = info_path(path)
    try:
        with open_url(where, "rb") as f:
            info = decode_info(f.read())
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        raise ExportError(f"{path} has no {INFO_FILE}: pass the output folder of a training "
                          "step run by the executor (such as local_store/train/NAME-HASH)"
                          ) from None
    except CorruptRecordError as e:
        raise ExportError(f"{where}: {e}; pass the output folder of a training step") from None
    config = info.get("config")
    if not isinstance(config, dict) or not isinstance(config.get("model"), dict):
        raise ExportError(f"{where}: its config has no 'model': {path} is not the output of "
                          "a training step (train_lm); pass one that is")
    model = _record(TransformerConfig, config["model"], where, "config.model")
    optimizer = _record(OptimizerHyperparameters, config.get("optimizer"), where,
                        "config.optimizer")
    train_steps = _integer(config, "train_steps", where)
    seed = _integer(config, "seed", where)
    tokenizer, fingerprint = (tokenizer, "") if tokenizer else _tokenizer(config, where)
    return TrainedRun(path, model, optimizer, train_steps, seed, tokenizer, fingerprint)


def checkpoint_root(run: TrainedRun) -> str:
    """Where the trainer keeps the run's checkpoints."""
    return join_url(run.path, "checkpoints")


def restore_model(run: TrainedRun, step: int | None = None) -> tuple[Any, int]:
    """The run's model (a ``TransformerLM``) at checkpoint ``step`` (None: the newest
    committed one), and that step."""
    import equinox as eqx
    import jax

    from marin.models.transformer import TransformerLM
    from marin.training.checkpoint import CheckpointError, Checkpoints
    from marin.training.optimizer import build_optimizer
    from marin.training.state import TrainerState

    root = checkpoint_root(run)
    # Opening checkpoints creates their folder: a run that has none is left untouched.
    checkpoints = Checkpoints(root, asynchronous=False) if exists(root) else None
    try:
        refs = _published_refs(root) if checkpoints is not None else {}  # listed first
        steps = checkpoints.steps() if checkpoints is not None else []
        if step is None:
            _refuse_damaged_newest(run, refs, steps)
        if not steps:
            raise ExportError(f"{run.path} has no committed checkpoint under {root}: the run "
                              "saved none yet; export it once it has (its last step always "
                              "saves one, TrainLmConfig.checkpoint_every sets how often before)")
        if step is None:
            step = steps[-1]
        elif step not in steps:
            damaged = f" ({refs[step]} is damaged)" if step in refs else ""
            raise ExportError(f"{run.path} has no committed checkpoint at step {step}{damaged}; "
                              f"it has {', '.join(map(str, steps))}: pass one of them to --step")
        model = TransformerLM.init(run.model, key=jax.random.PRNGKey(run.seed))
        tx, _ = build_optimizer(run.optimizer, run.train_steps,
                                eqx.filter(model, eqx.is_inexact_array))
        state = TrainerState.init(model, tx)
        (model, _), _ = checkpoints.restore(step, (state.model, state.opt_state))
    except CheckpointError as e:
        raise ExportError(f"{e} (the model's shape is {run.path}/{INFO_FILE}'s config.model)"
                          ) from None
    finally:
        if checkpoints is not None:
            checkpoints.close()
    return model, step


def _published_refs(root: str) -> dict[int, str]:
    """Step -> path of every ``step_N.ref`` under ``root``: the checkpoints an executor's
    attempts published to the run's shared folder (``marin.execution.shared``)."""
    found = {}
    for name in get_storage(root).list_dir(root):
        match = _REF.match(name)
        if match:
            found[int(match.group(1))] = join_url(root, name)
    return found


def _refuse_damaged_newest(run: TrainedRun, refs: dict[int, str], steps: list[int]) -> None:
    """A published ref newer than every complete checkpoint is damaged (unreadable, or
    leading to no complete checkpoint): the newest checkpoint is not the one to export."""
    newest = max(refs, default=None)
    if newest is None or newest in steps or (steps and newest < steps[-1]):
        return
    older = (f"the newest intact one is step {steps[-1]}: pass --step {steps[-1]} to export "
             "it" if steps else "no other is intact")
    raise ExportError(f"{refs[newest]} is damaged (it leads to no complete checkpoint), so "
                      f"the run's newest checkpoint, step {newest}, cannot be exported; "
                      f"{older}, or restore the ref")


def _record(cls: type, data: Any, where: str, field_path: str) -> Any:
    """A dataclass built from the JSON object that ``encode_info`` wrote of it."""
    if not isinstance(data, dict):
        raise ExportError(f"{where}: {field_path} is {json.dumps(data)}, not an object; "
                          "pass the output folder of a training step")
    known = {f.name: f for f in dataclasses.fields(cls)}
    missing = [name for name, f in known.items() if name not in data
               and f.default is dataclasses.MISSING]
    if missing:
        raise ExportError(f"{where}: {field_path} has no {missing[0]!r}; pass the output "
                          "folder of a training step")
    try:
        return cls(**{name: value for name, value in data.items() if name in known})
    except (TypeError, ValueError) as e:
        raise ExportError(f"{where}: {field_path} is not a valid {cls.__name__} ({e})"
                          ) from None


def _integer(config: dict[str, Any], name: str, where: str) -> int:
    value = config.get(name)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ExportError(f"{where}: config.{name} is {json.dumps(value)}, not an integer; "
                          "pass the output folder of a training step")
    return value


def _tokenizer(config: dict[str, Any], where: str) -> tuple[str, str]:
    """The tokenizer spec of the run, and the fingerprint its token cache recorded."""
    from marin.processing.tokenize.ledger import read_ledger
    from marin.processing.tokenize.records import CacheError

    spec, cache = config.get("tokenizer"), config.get("cache_path")
    ledger = None
    if isinstance(cache, str):
        try:
            ledger = read_ledger(cache)
        except CacheError:
            ledger = None
    if isinstance(spec, str) and spec:
        return spec, ledger.tokenizer.fingerprint if ledger is not None else ""
    if ledger is None:
        raise ExportError(f"{where}: config.tokenizer is unset and the token cache "
                          f"(config.cache_path={cache!r}) has no readable ledger.json naming "
                          "the tokenizer; restore the cache, or name the tokenizer with "
                          "--tokenizer (gpt2, or a tokenizer.json)")
    return ledger.tokenizer.name, ledger.tokenizer.fingerprint
