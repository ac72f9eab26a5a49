"""One invocation walks the steps' configs once: overrides apply to that walk, and the
graph hashed from it is the one planned and run."""

from dataclasses import dataclass
from pathlib import Path

import pytest

import marin.execution.graph as graph_module
import marin.execution.overrides as overrides_module
from marin.execution import Executor, ExecutorStep, StepGraph, output_path_of, this_output_path
from marin.execution.executor_main import run_with_options
from marin.execution.graph import StepOrder
from marin.execution.options import ExecutorMainConfig
from marin.execution.overrides import apply_overrides
from marin.execution.step import external_path_field


@dataclass(frozen=True)
class Config:
    output: str = ""
    rate: float = 1.0
    source: str = external_path_field(default="")


def _noop(config: Config) -> None:
    pass


def _chain() -> list[ExecutorStep]:
    a = ExecutorStep("a", _noop, Config(output=this_output_path()))
    b = ExecutorStep("b", _noop, Config(output=this_output_path(), source=output_path_of(a)))
    c = ExecutorStep("c", _noop, Config(output=this_output_path(), source=output_path_of(b)))
    return [c]


def _keys(graph: StepGraph) -> list[str]:
    return [n.key for n in graph.nodes]


@pytest.mark.parametrize("overrides", [{}, {"a.rate": "2.0"}, {"b.rate": "0.5", "a.rate": "3"}])
def test_overrides_on_the_walk_hash_as_overrides_on_the_steps(overrides):
    steps = _chain()
    from_walk = StepGraph.build(apply_overrides(StepOrder.of(steps), overrides), "/p")
    from_list = StepGraph.build(apply_overrides(steps, overrides), "/p")
    assert _keys(from_walk) == _keys(from_list)
    if overrides:
        assert _keys(from_walk) != _keys(StepGraph.build(steps, "/p"))


def test_an_override_that_replaces_a_dependency_by_a_path_drops_that_dependency():
    order = apply_overrides(StepOrder.of(_chain()), {"c.source": "/data/elsewhere"}, "/p")
    assert order.names() == ["c"]
    graph = StepGraph.build(order, "/p")
    assert [n.name for n in graph.nodes] == ["c"] and graph.nodes[0].dependencies == []


def test_a_graph_is_planned_only_under_the_prefix_it_was_built_for(tmp_path: Path):
    graph = StepGraph.build(_chain(), str(tmp_path / "one"))
    assert Executor(str(tmp_path / "one")).plan(graph).graph is graph
    with pytest.raises(ValueError, match="built for the prefix"):
        Executor(str(tmp_path / "two")).plan(graph)


def test_a_dry_run_with_overrides_walks_each_config_once(tmp_path: Path, monkeypatch):
    walked: list[str] = []
    real = graph_module.dependencies_of

    def counting(step):
        walked.append(step.name)
        return real(step)

    monkeypatch.setattr(graph_module, "dependencies_of", counting)
    monkeypatch.setattr(overrides_module, "dependencies_of", counting)
    order = StepOrder.of(_chain())
    code = run_with_options(order, ExecutorMainConfig(prefix=str(tmp_path), dry_run=True,
                                                      json=True), {"a.rate": "2"})
    assert code == 0
    # Each step once for the walk; the overridden step once more, to see whether the
    # override replaced one of its dependencies by a value.
    assert sorted(walked) == ["a", "a", "b", "c"]
