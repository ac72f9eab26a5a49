"""A trained model as a Hugging Face Llama folder: ``config.json``, ``model.safetensors``,
``tokenizer.json`` and ``tokenizer_config.json``.

    export = export_hf("local_store/train/tiny-1a2b3c4d", "exports/tiny")   # newest step
    export_hf("local_store/train/tiny-1a2b3c4d", "exports/tiny-200", step=200)
    # then, with torch and transformers:
    #   LlamaForCausalLM.from_pretrained("exports/tiny"), AutoTokenizer.from_pretrained(...)

The run's model shape and tokenizer come from its recorded config (``marin.export.run``),
the mapping from ``marin.export.llama``, the tokenizer files from
``marin.export.tokenizer``; the folder appears whole or not at all
(``marin.export.folder``). Everything that can refuse the export (the destination, the
shape, the tokenizer, the step) is checked before the checkpoint is read. Weights are
written in float32, the dtype the trainer keeps them in; writing needs neither torch nor
transformers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from marin.export.folder import check_destination, new_folder
from marin.export.llama import check_expressible, llama_config, llama_tensors
from marin.export.run import ExportError, TrainedRun, read_run, restore_model
from marin.export.tokenizer import tokenizer_files
from marin.models.config import TransformerConfig

__all__ = ["Export", "export_hf", "export_model"]

WEIGHTS = "model.safetensors"
CONFIG = "config.json"


@dataclass(frozen=True)
class Export:
    """Attributes:
        out: the export's folder.
        step: the checkpoint exported (None for a model exported from memory).
        files: the names written, sorted.
    """

    out: str
    step: int | None
    files: tuple[str, ...]


def export_hf(run_output: str, out: str, step: int | None = None, force: bool = False,
              tokenizer: str | None = None) -> Export:
    """Export the training step whose output is ``run_output`` at checkpoint ``step`` (None:
    the newest committed one) to the local folder ``out``; ``force`` replaces an export
    already there; ``tokenizer`` (``gpt2``, or a tokenizer.json) replaces the recorded one."""
    check_destination(out, force)
    run = read_run(run_output, tokenizer)
    check_expressible(run.model)
    encoder = _encoder(run)
    _check_vocabulary(encoder, run.model)
    model, step = restore_model(run, step)
    files = _write(model, encoder, out, force, {"marin_run": run.path, "marin_step": str(step)})
    return Export(out, step, files)


def export_model(model: Any, encoder: Any, out: str, force: bool = False) -> Export:
    """Export ``model`` (a ``TransformerLM``) with the marin encoder it was trained with."""
    check_destination(out, force)
    return Export(out, None, _write(model, encoder, out, force, {}))


def _write(model: Any, encoder: Any, out: str, force: bool, provenance: dict[str, str]
           ) -> tuple[str, ...]:
    from safetensors.numpy import save_file

    _check_vocabulary(encoder, model.config)
    config = llama_config(model, encoder.eos_id)
    tensors = llama_tensors(model)
    files = {CONFIG: json.dumps(config, indent=1).encode(),
             **tokenizer_files(encoder, model.config.seq_len)}
    with new_folder(out, force) as folder:
        save_file(tensors, str(folder / WEIGHTS), metadata={"format": "pt", **provenance})
        for name, data in files.items():
            (folder / name).write_bytes(data)
    return tuple(sorted([WEIGHTS, *files]))


def _check_vocabulary(encoder: Any, config: TransformerConfig) -> None:
    if encoder.vocab_size > config.vocab_size:
        raise ExportError(f"tokenizer {encoder.name!r} has {encoder.vocab_size} tokens, more "
                          f"than TransformerConfig.vocab_size={config.vocab_size}: it is not the "
                          "tokenizer the model was trained with; pass that one with --tokenizer")


def _encoder(run: TrainedRun) -> Any:
    from marin.processing.tokenize.encoders import TokenizerError, load_encoder

    try:
        encoder = load_encoder(run.tokenizer)
    except TokenizerError as e:
        raise ExportError(f"{e} (the run's tokenizer; name another with --tokenizer)"
                          ) from None
    found = encoder.identity()["fingerprint"]
    if run.tokenizer_fingerprint and found != run.tokenizer_fingerprint:
        raise ExportError(f"tokenizer {run.tokenizer!r} has changed since the run's token "
                          f"cache was built with it (fingerprint {found}, the cache recorded "
                          f"{run.tokenizer_fingerprint}); pass the original with --tokenizer")
    return encoder
