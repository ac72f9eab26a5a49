"""Exporting trained models out of marin: a Hugging Face Llama folder.

    from marin.export import export_hf
    export_hf("local_store/train/tiny-1a2b3c4d", "exports/tiny")      # newest checkpoint
    # marin export hf local_store/train/tiny-1a2b3c4d exports/tiny --step 200

Submodules: ``hf`` (the export), ``llama`` (config and tensor mapping), ``tokenizer``
(tokenizer.json), ``run`` (reading a training step's output), ``folder`` (an output folder
that appears whole), ``protected`` (the folders an export may never touch: step outputs,
attempts, a prefix's records); ``marin export`` is ``marin.cli.export``. Names are imported
on first use, so importing the package loads no JAX.
"""

from __future__ import annotations

from marin._lazy import lazy_exports

_EXPORTS = {
    "Export": "marin.export.hf",
    "ExportError": "marin.export.run",
    "export_hf": "marin.export.hf",
    "export_model": "marin.export.hf",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
