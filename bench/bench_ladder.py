"""The ladder against scratch on the main job's data: ``experiments/isoflop_tiny.py``'s study
trained from scratch (the baseline) and as a ladder of cooldowns, in one prefix.

    python bench/bench_ladder.py [--prefix DIR] [--keep]

``tiny_study("scratch")`` and ``tiny_study("cooldown")`` take one name, so the corpora,
tokenizer and token caches are built once (timed apart); then each schedule's own steps run
in an invocation of their own, timed. Printed: the four checks of the ladder against the
scratch sweep (``tests/helpers/ladder_check.py`` says how each is computed), each with its
goal, then both wall times. The prefix defaults to a temporary folder, removed afterwards
unless ``--keep``; a prefix given is kept, and a second run in it skips what is done (its
wall times are then those of the skips, and (d) counts only what that run trained: nan when
it trained nothing from scratch).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from experiments.isoflop_tiny import BUDGETS, HELD_OUT, tiny_study  # noqa: E402
from tests.helpers.ladder_check import ladder_check, run_schedules  # noqa: E402

NAME = "isoflop-tiny-ladder"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prefix", help="the prefix both studies run in (default: a "
                        "temporary folder)")
    parser.add_argument("--keep", action="store_true",
                        help="keep the temporary prefix and print where it is")
    parser.add_argument("--concurrent", type=int, default=2, help="steps run at once")
    args = parser.parse_args()
    prefix = Path(args.prefix) if args.prefix else Path(tempfile.mkdtemp(prefix="ladder-"))
    started = time.perf_counter()
    try:
        scratch, ladder, shared_s = run_schedules(
            str(prefix), lambda schedule: tiny_study(schedule, name=NAME), args.concurrent)
        check = ladder_check(scratch, ladder)
    finally:
        if not args.prefix and not args.keep:
            shutil.rmtree(prefix, ignore_errors=True)
    budgets = ", ".join(f"{b:.3g}" for b in BUDGETS)
    held_out = ", ".join(f"{b:.3g}" for b in (HELD_OUT if isinstance(HELD_OUT, (tuple, list))
                                               else (HELD_OUT,)))
    print(f"study: {', '.join(scratch.found.labels)}; budgets {budgets}; held out {held_out}; "
          f"{len(check.points)} points per schedule, the scratch sweep the baseline")
    print(check.table())
    for run, what in ((scratch, "scratch"), (ladder, "ladder")):
        print(f"{what:<7}  wall {run.wall_s:7.1f} s; training {run.sweep_flops:.3g} FLOPs "
              f"in {len(run.trained)} runs, held-out runs {run.held_out_flops:.3g}")
    total = time.perf_counter() - started
    print(f"ladder / scratch wall time: {ladder.wall_s / scratch.wall_s:.2f}; shared steps "
          f"(corpora, tokenizer, caches) {shared_s:.1f} s; total {total:.1f} s")
    if args.keep or args.prefix:
        print(f"prefix: {prefix}")


if __name__ == "__main__":
    main()
