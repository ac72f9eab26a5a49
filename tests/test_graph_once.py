"""One invocation walks the steps' configs once: overrides apply to that walk, and the
graph hashed from it is the one planned and run."""

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from marin.execution import (
    Executor,
    ExecutorStep,
    Plan,
    StepGraph,
    executor_main,
    external_path_field,
    output_path_of,
    this_output_path,
)
from marin.execution.graph import StepOrder
from marin.execution.overrides import apply_overrides


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


def _edited(rates: dict[str, float]) -> list[ExecutorStep]:
    """The chain as if the file had been edited to set each step's ``rate``: the reference
    the overridden walk must hash as."""
    a = ExecutorStep("a", _noop, Config(output=this_output_path(), rate=rates.get("a", 1.0)))
    b = ExecutorStep("b", _noop, Config(output=this_output_path(), rate=rates.get("b", 1.0),
                                        source=output_path_of(a)))
    c = ExecutorStep("c", _noop, Config(output=this_output_path(), rate=rates.get("c", 1.0),
                                        source=output_path_of(b)))
    return [c]


@pytest.mark.parametrize("overrides", [{}, {"a.rate": "2.0"}, {"b.rate": "0.5", "a.rate": "3"}])
def test_overrides_on_the_walk_hash_as_the_edited_file(overrides):
    walked = StepGraph.from_order(apply_overrides(StepOrder.of(_chain()), overrides), "/p")
    edited = StepGraph.build(_edited({k.split(".")[0]: float(v)
                                      for k, v in overrides.items()}), "/p")
    assert _keys(walked) == _keys(edited)
    if overrides:
        assert _keys(walked) != _keys(StepGraph.build(_chain(), "/p"))


def test_an_override_that_replaces_a_dependency_by_a_path_drops_that_dependency():
    order = apply_overrides(StepOrder.of(_chain()), {"c.source": "/data/elsewhere"}, "/p")
    assert order.names() == ["c"]
    graph = StepGraph.from_order(order, "/p")
    assert [n.name for n in graph.nodes] == ["c"] and graph.nodes[0].dependencies == []


def test_a_graph_is_planned_only_under_the_prefix_it_was_built_for(tmp_path: Path):
    graph = StepGraph.build(_chain(), str(tmp_path / "one"))
    assert Executor(str(tmp_path / "one")).plan(graph).graph is graph
    with pytest.raises(ValueError, match="built for the prefix"):
        Executor(str(tmp_path / "two")).plan(graph)


def test_a_dry_run_with_an_override_plans_the_overridden_graph(tmp_path: Path, capsys):
    """The plan ``executor_main`` returns is of the overridden steps, keyed as the edited
    file would be (how often the configs are walked is a figure of bench/bench_graph_walks.py)."""
    plan = executor_main(_chain(), args=["--prefix", str(tmp_path), "--dry-run", "--json",
                                         "--a.rate", "2"])
    assert isinstance(plan, Plan)
    assert _keys(plan.graph) == _keys(StepGraph.build(_edited({"a": 2.0}), str(tmp_path)))
    assert json.loads(capsys.readouterr().out)["steps"][0]["key"] == plan.graph.nodes[0].key
    assert list(tmp_path.iterdir()) == []  # a dry run writes nothing
