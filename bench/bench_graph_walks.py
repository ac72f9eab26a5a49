"""How often one dry run with an override walks each step's config (the figure that the
"one walk per invocation" design keeps at one, plus one for each overridden step).

    python bench/bench_graph_walks.py --steps 1000

The graph is a chain with fan-out (step ``i`` depends on ``i-1`` and ``i//2``); one step's
field is overridden on the command line; the dry run goes through ``executor_main``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import marin.execution.graph as graph_module
import marin.execution.overrides as overrides_module
from marin.execution import ExecutorStep, executor_main, output_path_of


@dataclass(frozen=True)
class Config:
    inputs: list = field(default_factory=list)
    rate: float = 1.0


def _noop(config: Config) -> None:
    pass


def chain(n: int) -> list[ExecutorStep]:
    steps: list[ExecutorStep] = []
    for i in range(n):
        deps = {i - 1, i // 2} - {i} if i else set()
        steps.append(ExecutorStep(f"s/{i}", _noop,
                                  Config([output_path_of(steps[d]) for d in sorted(deps)])))
    return steps[-1:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    args = parser.parse_args()
    walked: Counter[str] = Counter()
    real = graph_module.dependency_edges

    def counting(step):
        walked[step.name] += 1
        return real(step)

    graph_module.dependency_edges = counting
    overrides_module.dependency_edges = counting
    with tempfile.TemporaryDirectory() as prefix, contextlib.redirect_stdout(io.StringIO()):
        executor_main(chain(args.steps), args=["--prefix", prefix, "--dry-run", "--json",
                                               "--s/0.rate", "2"])
    print(f"{args.steps} steps, one overridden: {sum(walked.values())} config walks "
          f"({sum(walked.values()) / args.steps:.3f} per step; most walked: "
          f"{walked.most_common(1)[0][1]} times)")


if __name__ == "__main__":
    main()
