"""The ``marin`` command. Thin: each subcommand delegates to a library module.

    marin executor --dry-run experiments/isoflop_3e19.py
    marin executor --prefix gs://bucket/x --max-concurrent 4 experiments.tiny --json
    marin trace summarize gs://bucket/train/run-1234 --top 15
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    raw = argv[1:]
    if argv[:1] == ["executor"]:
        from marin.execution.options import normalize

        argv = ["executor", *normalize(raw, positionals=True)]
    args, extra = parser.parse_known_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    args.raw = raw
    return args.handler(args, extra)


class _Parser(argparse.ArgumentParser):
    """Usage errors in one line (exit status 2), pointing at ``--help``."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="marin", description="Scaling-law experiments, "
                                     "from a laptop to a cluster.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    ex = sub.add_parser("executor", help="plan or run an experiment's steps", add_help=False,
                        description="Plan (--dry-run) or run the steps of an experiment file "
                        "or module. The experiment's own options and --STEP.FIELD VALUE "
                        "overrides of step configs go after the experiment (marin executor "
                        "EXPERIMENT --help lists them). A runner's own options are "
                        "--BACKEND-KEY VALUE (--ray-address HOST:PORT) or --runner-option "
                        "KEY=VALUE.")
    ex.add_argument("experiment", nargs="?", help="path to an experiment file, or a module name")
    ex.add_argument("-h", "--help", action="store_true", help="show this help (with an "
                    "EXPERIMENT: its options and overrides too) and exit")
    from marin.execution.options import add_options

    add_options(ex, positionals=True)  # the fields of ExecutorMainConfig, both spellings
    ex.set_defaults(handler=_executor, help_parser=ex)

    plugins = sub.add_parser("plugins", help="list and check installed plugins")
    plugins_sub = plugins.add_subparsers(dest="plugins_command", metavar="ACTION", required=True)
    listing = plugins_sub.add_parser("list", help="every plugin: group, name, distribution, "
                                     "version, status")
    listing.add_argument("--json", action="store_true")
    listing.add_argument("--no-load", action="store_true",
                         help="list entry points without importing them")
    listing.set_defaults(handler=_plugins_list)
    check = plugins_sub.add_parser("check", help="load every plugin; exit 1 if any is broken")
    check.add_argument("--json", action="store_true")
    check.set_defaults(handler=_plugins_check)

    storage = sub.add_parser("storage", help="storage utilities")
    storage_sub = storage.add_subparsers(dest="storage_command", metavar="ACTION", required=True)
    bucket = storage_sub.add_parser("check", help="a bucket's location, location type and "
                                    "storage class, with warnings")
    bucket.add_argument("url")
    bucket.add_argument("--compute-region", help="where the accelerators run "
                        "(default: $MARIN_COMPUTE_REGION)")
    bucket.add_argument("--json", action="store_true")
    bucket.set_defaults(handler=_storage_check)

    hardware = sub.add_parser("hardware", help="accelerator presets")
    hardware_sub = hardware.add_subparsers(dest="hardware_command", metavar="ACTION",
                                           required=True)
    show = hardware_sub.add_parser("show", help="devices found, the preset that applies, "
                                   "the flags in force")
    show.add_argument("--hardware", metavar="PRESET", help="a preset name (default: detected)")
    show.add_argument("--json", action="store_true")
    show.set_defaults(handler=_hardware_show)
    presets = hardware_sub.add_parser("list", help="installed presets")
    presets.add_argument("--json", action="store_true")
    presets.set_defaults(handler=_hardware_list)

    cache = sub.add_parser("cache", help="token caches")
    cache_sub = cache.add_subparsers(dest="cache_command", metavar="ACTION", required=True)
    stats = cache_sub.add_parser("stats", help="figures of every token cache under a path")
    stats.add_argument("path", help="a cache, or a prefix holding caches (any fsspec URL)")
    stats.add_argument("--json", action="store_true")
    stats.set_defaults(handler=_cache_stats)

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
    dash = sub.add_parser("dashboard", help="a read-only web page over a prefix: experiments, "
                          "step graphs, training curves, studies")
    dash.add_argument("--prefix", help="the executor prefix (default: $MARIN_PREFIX, else "
                      "./local_store, as the executor)")
    dash.add_argument("--port", type=_dashboard_port, default=8050,
                      help="TCP port, 0 for any free one (default 8050)")
    dash.add_argument("--host", default="127.0.0.1", help="interface (default 127.0.0.1; any "
                      "other needs a token)")
    dash.add_argument("--token", help="secret for requests (default: $MARIN_DASHBOARD_TOKEN, "
                      "else a random one off loopback)")
    dash.set_defaults(handler=_dashboard)

    trace = sub.add_parser("trace", help="summaries of JAX profiles (XPlane traces)")
    trace_sub = trace.add_subparsers(dest="trace_command", metavar="ACTION", required=True)
    summ = trace_sub.add_parser("summarize", help="top kernels, time per category, steps "
                                "and hints of a trace")
    summ.add_argument("paths", nargs="+", metavar="PATH", help="an .xplane.pb, a profile "
                      "folder, or a training step's output folder (any fsspec URL); several "
                      "give a summary each (--json: a list)")
    summ.add_argument("--top", type=int, default=10, help="kernels to list (default 10)")
    summ.add_argument("--json", action="store_true")
    summ.add_argument("--html", metavar="OUT", help="write a breakdown chart (plotly HTML)")
    summ.add_argument("--png", metavar="OUT", help="write a breakdown chart (PNG)")
    summ.set_defaults(handler=_trace_summarize)
    comp = trace_sub.add_parser("compare", help="per category and per top kernel: the "
                                "change from trace A to trace B")
    comp.add_argument("before")
    comp.add_argument("after")
    comp.add_argument("--top", type=int, default=10)
    comp.add_argument("--json", action="store_true")
    comp.set_defaults(handler=_trace_compare)

    gcp = sub.add_parser("gc", help="list (dry run) or delete what nothing under a prefix "
                         "needs: old step versions, killed attempts, cut checkpoint saves")
    gcp.add_argument("--prefix", required=True)
    gcp.add_argument("--keep", action="append", default=[], metavar="EXPERIMENT",
                     help="keep only these experiments (or invocation ids); repeatable")
    gcp.add_argument("--older-than", metavar="AGE",
                     help="only what is older (30d, 12h; 0 for any age; default 24h)")
    gcp.add_argument("--keep-last", type=int, default=1, metavar="N",
                     help="keep the newest N invocations of each experiment (default 1), "
                          "and its last complete one")
    gcp.add_argument("--yes", action="store_true", help="delete (default: a dry run)")
    gcp.add_argument("--wait", type=float, default=60.0,
                     help="seconds to wait for executors that are planning (default 60)")
    gcp.add_argument("--json", action="store_true")
    gcp.set_defaults(handler=_gc)
    dup = sub.add_parser("du", help="bytes per experiment, step and version under a prefix, "
                         "and what marin gc would free")
    dup.add_argument("--prefix", required=True)
    dup.add_argument("--json", action="store_true")
    dup.set_defaults(handler=_du)
    for name, help_ in (("pin", "keep a step output from marin gc"),
                        ("unpin", "let marin gc judge a pinned step output again")):
        p = sub.add_parser(name, help=help_)
        p.add_argument("key", nargs="?" if name == "pin" else None, metavar="STEP_KEY")
        p.add_argument("--prefix", required=True)
        if name == "pin":
            p.add_argument("--list", action="store_true", help="list the pins")
        p.set_defaults(handler=_pin, remove=name == "unpin")

    from marin.services.cli import add_parsers as add_service_parsers

    add_service_parsers(sub)  # services, logs, kv, status
    from marin.export.commands import add_parsers as add_export_parsers

    add_export_parsers(sub)  # export hf
    return parser


def _dashboard_port(text: str) -> int:
    from marin.dashboard.server import port_number

    return port_number(text)


def _dashboard(args: argparse.Namespace, extra: list[str]) -> int:
    from marin.dashboard.server import main as dashboard_main

    return _reject_extra(extra) or dashboard_main(args.prefix, args.host, args.port, args.token)


def _trace_summarize(args: argparse.Namespace, extra: list[str]) -> int:
    from marin.profiling import report

    return _reject_extra(extra) or report.summarize(args.paths, args.top, args.json,
                                                    args.html, args.png)


def _trace_compare(args: argparse.Namespace, extra: list[str]) -> int:
    from marin.profiling import report

    return _reject_extra(extra) or report.compare(args.before, args.after, args.top, args.json)


def _cache_stats(args: argparse.Namespace, extra: list[str]) -> int:
    from marin import commands

    return _reject_extra(extra) or commands.cache_stats(args.path, args.json)


def _scaling_candidates(args: argparse.Namespace, extra: list[str]) -> int:
    from marin import commands

    return _reject_extra(extra) or commands.scaling_candidates(
        args.budget, args.heuristic, args.hardware, args.vocab_size, args.seq_len, args.json)


def _scaling_fit(args: argparse.Namespace, extra: list[str]) -> int:
    from marin import commands

    return _reject_extra(extra) or commands.scaling_fit(
        args.results, args.target, args.out, args.bootstrap, args.heuristic, args.json,
        args.metric, args.label)


def _gc(args: argparse.Namespace, extra: list[str]) -> int:
    from marin import gc_commands

    return _reject_extra(extra) or gc_commands.gc(args.prefix, args.keep, args.older_than,
                                                  args.yes, args.json, args.wait,
                                                  args.keep_last)


def _du(args: argparse.Namespace, extra: list[str]) -> int:
    from marin import gc_commands

    return _reject_extra(extra) or gc_commands.du(args.prefix, args.json)


def _pin(args: argparse.Namespace, extra: list[str]) -> int:
    from marin import gc_commands

    return _reject_extra(extra) or gc_commands.pin_command(
        args.prefix, args.key, getattr(args, "list", False), args.remove)


def _reject_extra(extra: list[str]) -> int | None:
    if extra:
        from rich.console import Console

        Console(stderr=True).print(f"[bold red]error:[/] unrecognized arguments: "
                                   f"{' '.join(extra)}", highlight=False, soft_wrap=True)
        return 2
    return None


def _plugins_list(args: argparse.Namespace, extra: list[str]) -> int:
    from marin import commands

    return _reject_extra(extra) or commands.plugins_list(args.json, load=not args.no_load)


def _plugins_check(args: argparse.Namespace, extra: list[str]) -> int:
    from marin import commands

    return _reject_extra(extra) or commands.plugins_check(args.json)


def _storage_check(args: argparse.Namespace, extra: list[str]) -> int:
    from marin import commands

    return _reject_extra(extra) or commands.storage_check(args.url, args.compute_region,
                                                          args.json)


def _hardware_show(args: argparse.Namespace, extra: list[str]) -> int:
    from marin import commands

    return _reject_extra(extra) or commands.hardware_show(args.hardware, args.json)


def _hardware_list(args: argparse.Namespace, extra: list[str]) -> int:
    from marin import commands

    return _reject_extra(extra) or commands.hardware_list(args.json)


def _executor(args: argparse.Namespace, extra: list[str]) -> int:
    """``marin executor``: the experiment's declaration, then the same parsing and running
    as ``python EXPERIMENT.py`` (``marin.execution.command_line``), spelled with dashes."""
    from rich.console import Console

    from marin.execution.command_line import HelpRequested, Style, UsageError, parse_invocation
    from marin.execution.executor import gc_paused
    from marin.execution.executor_main import exit_code, run_invocation
    from marin.execution.experiments import (
        ExperimentError,
        experiment_of_module,
        find_experiments,
        load_experiment,
    )

    err = Console(stderr=True)
    if not args.experiment:
        if args.help:
            args.help_parser.print_help()
            return 0
        found = find_experiments()
        listing = "\n".join(f"  {p}" for p in found) or "  (none under ./experiments)"
        err.print("marin executor needs an EXPERIMENT (a file or module). Experiments "
                  f"found:\n{listing}", highlight=False, soft_wrap=True)
        return 2
    try:
        with gc_paused():  # the experiment's steps, then the one walk over their configs
            experiment = experiment_of_module(load_experiment(args.experiment))
            invocation = parse_invocation(experiment, args.raw, Style.CLI,
                                          prog="marin executor", positional="experiment")
    except HelpRequested as h:
        sys.stdout.write(h.text)
        return 0
    except ExperimentError as e:
        err.print(f"[bold red]error:[/] {_misplaced_experiment(args.experiment, extra) or e}",
                  highlight=False, soft_wrap=True)
        return 2
    except UsageError as e:
        err.print(f"[bold red]error:[/] {e}", highlight=False, soft_wrap=True)
        return 2
    global _exit_at_once
    _exit_at_once = invocation.options.dry_run
    return exit_code(run_invocation(invocation, args.experiment, Style.CLI))


def _misplaced_experiment(taken: str, extra: list[str]) -> str | None:
    """When an override's value was read as the experiment (``--STEP.field VALUE`` written
    before it), the message names the experiment file that came later and the right order.
    Only for a name that is no file at all; an experiment given as a module name later on
    is not recognised, and the plain error stands."""
    if os.path.exists(taken):
        return None
    later = next((a for a in extra if a.endswith(".py") and os.path.isfile(a)), None)
    if later is None:
        return None
    return (f"{taken!r} was read as the experiment, but {later} comes later: overrides "
            "(--STEP.field VALUE) go after the experiment, as in marin executor OPTIONS "
            f"{later} OVERRIDES")


_exit_at_once = False  # set by a dry run: nothing is left to finish at exit


def run() -> None:
    """The console script: ``main``, then exit. After a dry run the process ends without
    tearing down its objects one by one (a tenth of a 100,000-step dry run's time); other
    commands exit normally, so that atexit handlers (Ray's shutdown among them) run."""
    try:
        code = main()
        if _exit_at_once:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    except BrokenPipeError:  # the reader went away (``| head``): exit as a shell would
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        os._exit(128 + 13)
    sys.exit(code)

