"""The ``marin scaling`` commands: IsoFLOP candidates of a budget, and fits of finished runs.

    marin scaling candidates --budget 3e19 --hardware gpu-h200
    marin scaling fit runs.csv local_store/train/ --target 1e21 --out plots/ --json

``scaling fit`` prints what ``marin.scaling_laws.study.run_fits`` fits and writes.
"""

from __future__ import annotations

import argparse
import json

from rich.table import Table

from marin import registry
from marin.cli.console import error, out, print_json, reject_extra

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    scaling = sub.add_parser("scaling", help="IsoFLOP candidates and scaling-law fits")
    scaling_sub = scaling.add_subparsers(dest="scaling_command", metavar="ACTION", required=True)
    cand = scaling_sub.add_parser("candidates", help="the runs that use a FLOP budget")
    cand.add_argument("--budget", type=float, required=True, help="training FLOPs, e.g. 3e19")
    cand.add_argument("--heuristic", default="completed-adamh",
                      help="a marin.scaling_heuristics plugin (default: completed-adamh)")
    cand.add_argument("--hardware", metavar="PRESET", help="hardware preset (memory, MFU)")
    cand.add_argument("--vocab-size", type=int)
    cand.add_argument("--seq-len", type=int)
    cand.add_argument("--json", action="store_true")
    cand.set_defaults(handler=_scaling_candidates)
    fit = scaling_sub.add_parser("fit", help="fit scaling laws to finished runs and plot them")
    fit.add_argument("results", nargs="+", help="tables (CSV, JSON lines or Parquet with "
                     "params, tokens, flops, loss and optionally budget), run folders (marin, "
                     "Marin's tracker_metrics.jsonl, Levanter, W&B exports) or folders of them")
    fit.add_argument("--metric", default="loss", help="what to fit: loss, bpb, macro_bpb, "
                     "<set>/bpb, or Levanter's eval/paloma/c4_en/bpb ... (default loss)")
    fit.add_argument("--label", help="one label for all the runs (default: each run's "
                     "label, group or parent folder)")
    fit.add_argument("--target", type=float, help="budget to predict the optimal model for")
    fit.add_argument("--out", help="folder for plots (PNG, HTML) and fit.json")
    fit.add_argument("--bootstrap", type=int, default=1000,
                     help="bootstrap resamples for standard errors (default 1000)")
    fit.add_argument("--heuristic", default="completed-adamh")
    fit.add_argument("--json", action="store_true")
    fit.set_defaults(handler=_scaling_fit)


def _scaling_candidates(args: argparse.Namespace, extra: list[str]) -> int:
    return reject_extra(extra) or _candidates(args.budget, args.heuristic, args.hardware,
                                              args.vocab_size, args.seq_len, args.json)


def _scaling_fit(args: argparse.Namespace, extra: list[str]) -> int:
    return reject_extra(extra) or _fit(args.results, args.target, args.out, args.bootstrap,
                                       args.heuristic, args.json, args.metric, args.label)


def _candidates(budget: float, heuristic_name: str, hardware: str | None,
                       vocab_size: int | None, seq_len: int | None, as_json: bool) -> int:
    from marin.scaling_laws.candidates import NoCandidateError
    from marin.scaling_laws.scaling_heuristics import load_heuristic

    try:
        heuristic = load_heuristic(heuristic_name, vocab_size, seq_len, hardware)
        if hardware:
            from marin.hardware import get_preset

            get_preset(hardware)
        explain = getattr(heuristic, "candidates_or_explain", None)
        candidates = explain(budget) if explain else list(heuristic.candidates_for_budget(budget))
    except (registry.PluginError, NoCandidateError, ValueError) as e:
        return error(str(e))
    if as_json:
        print_json([c.to_json() for c in candidates], default=str)
        return 0
    table = Table(title=f"{len(candidates)} candidates for {budget:.3g} FLOPs "
                  f"({heuristic_name})", title_justify="left")
    for column in ("hidden", "layers", "params", "batch", "steps", "tokens", "tok/param",
                   "FLOPs", "lr", "beta2", "mem/dev GB", "device-h"):
        table.add_column(column, justify="right")
    for c in candidates:
        m = c.model_config
        table.add_row(str(m.hidden_dim), str(m.num_layers), f"{c.params:.3g}",
                      str(c.batch_size), str(c.train_steps), f"{c.tokens:.3g}",
                      f"{c.tokens_per_param:.1f}", f"{c.flops:.3g}",
                      f"{c.optimizer.learning_rate:.2e}", f"{c.optimizer.beta2:.5f}",
                      f"{c.estimated_memory_per_device / 1e9:.1f}",
                      "-" if c.estimated_device_hours is None
                      else f"{c.estimated_device_hours:.3g}")
    out().print(table)
    return 0


def _fit(results: list[str], target: float | None, out_dir: str | None, bootstrap: int,
         heuristic_name: str, as_json: bool, metric: str, label: str | None) -> int:
    from marin.scaling_laws.scaling_heuristics import load_heuristic
    from marin.scaling_laws.study.run_fits import fit_runs, nearest_candidates, write_fit_files

    try:
        fitted = fit_runs(results, metric, label, target, bootstrap)
        nearest = nearest_candidates(fitted, load_heuristic(heuristic_name)) if target else {}
    except (ValueError, registry.PluginError) as e:
        return error(str(e))
    files = write_fit_files(fitted, out_dir) if out_dir else []
    if as_json:
        report: dict = {"fit": fitted.fits.to_json(), "nearest_candidates": {
            name: json.loads(json.dumps(c.to_json(), default=str)) if c else None
            for name, c in nearest.items()}}
        if out_dir:
            report["files"] = files
        print_json(report, allow_nan=False)
        return 0
    _print_fit(fitted.fits, nearest, files)
    return 0


def _print_fit(fits, nearest: dict, files: list[str]) -> None:
    from marin.scaling_laws.study.summary import fmt, fmt_interval, label_lines

    console = out()
    for label, fit in fits.fits.items():
        if len(fits.labels) > 1:
            console.print(f"[bold]label {label}[/]")
        console.print(f"[bold]{fit.runs} runs[/], {len(fit.excluded)} dropped "
                      "(failed, NaN, infinite or non-positive)")
        table = Table(title="IsoFLOP minima (Approach 2)", title_justify="left")
        for column in ("budget", "runs", "optimal tokens", "95% interval", "optimal params",
                       "loss"):
            table.add_column(column, justify="right")
        for b in fit.budgets:
            table.add_row(f"{b.budget:.3g}", str(b.points), f"{b.optimal_tokens:.3g}",
                          fmt_interval(b.optimal_tokens_interval), f"{b.optimal_params:.3g}",
                          f"{b.optimal_loss:.4f}")
        for b in fit.budgets_not_fitted:
            table.add_row(f"{b.budget:.3g}", str(b.runs), f"not fitted: {b.reason}", "", "", "")
        console.print(table)
        for line in label_lines(fit, None)[1:]:
            console.print(line, highlight=False)
        for p in fit.predictions:
            for approach, optimum in (("Approach 2", p.approach2), ("Approach 3", p.approach3)):
                if optimum is not None:
                    console.print(f"[bold]at {p.budget:.3g} FLOPs[/] ({approach}): N_opt "
                                  f"{fmt(optimum.params)} (95% "
                                  f"{fmt_interval(optimum.params_interval)}), D_opt "
                                  f"{fmt(optimum.tokens)}, loss {fmt(optimum.loss, 4)}",
                                  highlight=False)
        c = nearest.get(label)
        if c is not None:
            console.print(f"  nearest candidate: hidden {c.model_config.hidden_dim}, "
                          f"{c.model_config.num_layers} layers, {c.params:.3g} params, batch "
                          f"{c.batch_size}, {c.train_steps} steps")
    from marin.scaling_laws.study.summary import comparison_line

    for c in fits.comparisons:
        console.print(comparison_line(c), highlight=False)
    for n in fits.not_compared:
        console.print(n.reason, highlight=False)
    for f in files:
        console.print(f"  wrote {f}")
