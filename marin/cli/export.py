"""The ``marin export`` command.

    marin export hf local_store/train/tiny-1a2b3c4d exports/tiny            # newest step
    marin export hf local_store/train/tiny-1a2b3c4d exports/tiny --step 200 --force

A refused export (no committed checkpoint, an unknown step, a shape Llama cannot hold, an
OUT that holds files) prints one line naming the field or file and the fix, and exits 2.
"""

from __future__ import annotations

import argparse

from marin.cli.console import command, say

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    export = sub.add_parser("export", help="export a trained model to other libraries")
    esub = export.add_subparsers(dest="export_command", metavar="FORMAT", required=True)
    hf = esub.add_parser("hf", help="a Hugging Face Llama folder: config.json, "
                         "model.safetensors, tokenizer.json")
    hf.add_argument("run_output", metavar="RUN_OUTPUT", help="a training step's output folder")
    hf.add_argument("out", metavar="OUT", help="the folder to write (a local path)")
    hf.add_argument("--step", type=int, help="the checkpoint to export (default: the newest "
                    "committed one)")
    hf.add_argument("--force", action="store_true", help="replace an export already in OUT")
    hf.add_argument("--tokenizer", help="gpt2, or a tokenizer.json (default: the run's own)")
    hf.set_defaults(handler=_export_hf)


def _export_errors():
    from marin.export.run import ExportError

    return [((ExportError,), 2)]


@command(_export_errors)
def _export_hf(args: argparse.Namespace) -> int:
    from marin.export.hf import export_hf

    done = export_hf(args.run_output, args.out, args.step, args.force, args.tokenizer)
    say(f"exported {args.run_output} at step {done.step} to {done.out}: "
        f"{', '.join(done.files)}")
    return 0
