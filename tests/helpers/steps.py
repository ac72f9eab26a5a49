"""Steps that record each run in ``CALLS`` and check their inputs, for executor tests.

    CALLS.clear()
    a = step("a"); b = step("b", a)          # b reads a's out.txt
    Executor(prefix).run([b])
    assert CALLS == ["a", "b"]

The local runner runs step functions in this process, so a module-level list sees every
call; each test clears it first (``tests/test_executor_run.py`` does so with an autouse
fixture).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from marin.execution import ExecutorStep, output_path_of, this_output_path, unversioned

CALLS: list[str] = []


@dataclass(frozen=True)
class Cfg:
    label: str
    output_path: str
    inputs: tuple[str, ...] = ()
    fail: bool = False


def work(cfg: Cfg) -> None:
    CALLS.append(cfg.label)
    for path in cfg.inputs:  # dependencies finished before this step started
        assert Path(path).read_text() == Path(path).parent.name.rsplit("-", 1)[0]
    if cfg.fail:
        raise RuntimeError(f"step {cfg.label} broke on purpose")
    Path(cfg.output_path).mkdir(parents=True, exist_ok=True)
    (Path(cfg.output_path) / "out.txt").write_text(cfg.label)


def step(label: str, *deps: ExecutorStep, fail: bool = False) -> ExecutorStep:
    return ExecutorStep(label, work, Cfg(label, this_output_path(),
                                         tuple(output_path_of(d, "out.txt") for d in deps),
                                         unversioned(fail)))
