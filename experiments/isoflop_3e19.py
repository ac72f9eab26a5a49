"""The seed's IsoFLOP study: budgets up to 3e19 FLOPs, GPT-2 tokens, a checked prediction at 1e20.

    python experiments/isoflop_3e19.py --dry-run                        # offline, seconds
    python experiments/isoflop_3e19.py --dry-run --hardware tpu-v5p --devices 8
    marin executor --dry-run experiments/isoflop_3e19.py --hardware tpu-v5p
    python experiments/isoflop_3e19.py --prefix gs://my-bucket/marin --backend ray
    python experiments/isoflop_3e19.py --corpus gs://my-bucket/corpus/*.jsonl.gz \\
        --validation gs://my-bucket/corpus/valid.jsonl.gz --dry-run
    python experiments/isoflop_3e19.py --help      # every option, this experiment's too

Every candidate of ``CompletedAdamhHeuristic(vocab_size=50257)`` (sequence length 4096) at
1e18, 3e18, 1e19 and ``DEFAULT_BUDGETS[3]`` = 3e19 FLOPs is trained on the same GPT-2 token
cache; the fit then predicts the optimum at ``DEFAULT_BUDGETS[4]`` = 1e20, which is trained
once and checked (``--holdout 0`` leaves the check out). The corpus is any fsspec URL of
JSON lines or Parquet; the default is FineWeb-Edu's 10BT sample on the Hugging Face hub at a
pinned commit, read through ``hf://``.

The options of ``StudyOptions`` are declared in ``experiment`` and parsed with the
executor's, so ``python`` and ``marin executor`` take them alike. Nothing touches the
network while planning: a dry run prints, per candidate, its shape, tokens, batch, steps,
FLOPs, memory per device and device-hours on ``--hardware``, then the totals. Before a real
run on the local backend, the preflight estimates the device-hours on the hardware it
detects and refuses, in one line, beyond ``--max_local_device_hours`` unless ``--yes``.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from marin.execution import ExecutorMainConfig, Experiment, Plan, executor_main
from marin.scaling_laws.candidates import CandidateConfig
from marin.scaling_laws.isoflop_analysis import DEFAULT_BUDGETS
from marin.scaling_laws.scaling_heuristics import CompletedAdamhHeuristic
from marin.scaling_laws.study import IsoFlopStudy, StudyCorpus, isoflop_study, study_candidates

NAME = "isoflop-3e19"
FINEWEB_EDU = ("hf://datasets/HuggingFaceFW/fineweb-edu@3c452cb1c31a957685cf2699bfd051afacd37422"
               "/sample/10BT")
DEFAULT_CORPUS = f"{FINEWEB_EDU}/00[0-9]_00000.parquet"
DEFAULT_VALIDATION = f"{FINEWEB_EDU}/013_00000.parquet"
SWEEP = DEFAULT_BUDGETS[:4]  # 1e18, 3e18, 1e19, 3e19
HELD_OUT = DEFAULT_BUDGETS[4]  # 1e20


@dataclass(frozen=True)
class StudyOptions:
    """Options of this experiment (the executor's own options pass through).

    Attributes:
        corpus: training documents, an fsspec URL or glob of JSON lines or Parquet.
        validation: held-out documents for eval loss.
        hardware: the preset the candidates are planned for (memory, device-hours).
        devices: accelerators per run.
        holdout: the budget of the checked prediction (0: none).
        yes: start a real run even when it is estimated to take long on this machine.
        max_local_device_hours: the estimate above which a local real run asks for --yes.
    """

    corpus: str = DEFAULT_CORPUS
    validation: str = DEFAULT_VALIDATION
    hardware: str = "gpu-h100"
    devices: int = 8
    holdout: float = HELD_OUT
    yes: bool = False
    max_local_device_hours: float = 24.0


def heuristic_for(options: StudyOptions) -> CompletedAdamhHeuristic:
    return CompletedAdamhHeuristic(vocab_size=50257, hardware=options.hardware,
                                   devices=options.devices)


def build(options: StudyOptions) -> IsoFlopStudy:
    return isoflop_study(NAME, StudyCorpus(train=(options.corpus,),
                                           validation=(options.validation,)),
                         budgets=SWEEP, heuristic=heuristic_for(options), tokenizer="gpt2",
                         predict_budget=options.holdout or None)


# -- the plan, for people --------------------------------------------------------------------

def planned_candidates(options: StudyOptions) -> dict[float, list[CandidateConfig]]:
    return study_candidates(heuristic_for(options), SWEEP)


def print_candidates(options: StudyOptions, console: Console | None = None) -> dict[str, float]:
    """A table of every candidate, then the totals (which it returns)."""
    console = console or _console()
    table = Table(title=f"{NAME}: candidates on {options.devices} x {options.hardware}",
                  title_justify="left")
    for column in ("budget", "hidden", "layers", "params", "tokens", "batch", "steps",
                   "FLOPs", "mem/device GB", "device-hours"):
        table.add_column(column, justify="right")
    totals = {"runs": 0, "flops": 0.0, "device_hours": 0.0}
    for budget, candidates in planned_candidates(options).items():
        for c in candidates:
            m = c.model_config
            table.add_row(f"{budget:.0e}", str(m.hidden_dim), str(m.num_layers),
                          f"{c.params:.3g}", f"{c.tokens:.3g}", str(c.batch_size),
                          str(c.train_steps), f"{c.flops:.3g}",
                          f"{c.estimated_memory_per_device / 1e9:.1f}",
                          f"{c.estimated_device_hours:.3g}")
            totals["runs"] += 1
            totals["flops"] += c.flops
            totals["device_hours"] += c.estimated_device_hours
    console.print(table)
    line = (f"totals: {totals['runs']} runs, {totals['flops']:.3g} FLOPs, "
            f"{totals['device_hours']:.4g} device-hours on {options.hardware}")
    if options.holdout:
        line += f"; plus one run of about {options.holdout:.3g} FLOPs for the checked prediction"
    console.print(line, highlight=False)
    return totals


def _console() -> Console:
    console = Console()
    if not console.is_terminal:
        console.width = 160  # the table keeps its columns in logs and pipes
    return console


def local_refusal(options: StudyOptions) -> str | None:
    """The one-line refusal when the study is too large for the hardware here, else None."""
    if options.yes:
        return None
    from marin.hardware import get_preset
    from marin.hardware.detect import detect

    found = detect()
    preset = get_preset(found["preset"] or "cpu")
    devices = max(1, len(found["devices"]))
    mfu = heuristic_for(options).mfu
    flops = sum(c.flops for cs in planned_candidates(options).values() for c in cs)
    flops += options.holdout or 0.0
    hours = flops / (preset.peak_bf16_flops * mfu) / 3600
    if hours <= options.max_local_device_hours:
        return None
    return (f"refusing to start: {NAME} needs about {hours:.3g} device-hours on the detected "
            f"{devices} x {preset.name} (over --max_local_device_hours "
            f"{options.max_local_device_hours:g}); run it on a cluster with `--backend ray "
            f"--ray_address ...` (each run asks for its {options.devices} accelerators), or "
            "pass --yes to start it here")


def preflight(options: StudyOptions, executor: ExecutorMainConfig) -> str | None:
    """Before a real run: the refusal of a study too large for this machine (local backend
    only; a cluster's runner places each run on its own accelerators)."""
    return local_refusal(options) if executor.backend == "local" else None


def show_candidates(result: object, options: StudyOptions) -> None:
    """After a dry run: the candidates and their totals."""
    if isinstance(result, Plan):
        print_candidates(options)


experiment = Experiment(build, options=StudyOptions, preflight=preflight,
                        description=f"{NAME}: IsoFLOP sweep to 3e19 FLOPs",
                        after=show_candidates)

if __name__ == "__main__":
    executor_main(experiment)
