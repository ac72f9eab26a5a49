"""The step graph: order, deduplication, clashes, cycles, resolution."""

from __future__ import annotations

import pytest

from marin.execution import (
    ExecutorStep,
    StepGraph,
    StepGraphError,
    output_path_of,
    this_output_path,
)


def noop(config):
    return None


def test_dependencies_come_first_and_equal_versions_are_one_step():
    a1 = ExecutorStep("a", noop, {"x": 1})
    a2 = ExecutorStep("a", noop, {"x": 1})  # another object, same version
    b = ExecutorStep("b", noop, {"in": output_path_of(a1)})
    c = ExecutorStep("c", noop, {"in": output_path_of(a2, "sub")})
    graph = StepGraph.build([b, c], "/p")
    assert [n.name for n in graph.nodes] == ["a", "b", "c"]
    assert graph.node_of(a1) is graph.node_of(a2)
    assert graph.resolve_config(graph.node_of(c))["in"] == graph.node_of(a1).output_path + "/sub"


def test_one_name_with_two_versions_is_an_error_naming_the_difference():
    a1 = ExecutorStep("tokenize", noop, {"seq_len": 128})
    a2 = ExecutorStep("tokenize", noop, {"seq_len": 256})
    with pytest.raises(StepGraphError, match=r"'tokenize'.*seq_len: 128 -> 256"):
        StepGraph.build([a1, a2], "/p")


def test_a_cycle_is_an_error_before_anything_runs():
    config_a: dict = {}
    a = ExecutorStep("a", noop, config_a)
    b = ExecutorStep("b", noop, {"in": output_path_of(a)})
    config_a["in"] = output_path_of(b)  # mutate after construction: a -> b -> a
    with pytest.raises(StepGraphError, match="cycle: a -> b -> a"):
        StepGraph.build([a], "/p")


def test_long_chains_do_not_hit_the_recursion_limit():
    step = ExecutorStep("s0", noop, {"i": 0})
    for i in range(1, 5000):
        step = ExecutorStep(f"s{i}", noop, {"prev": step, "i": i})
    graph = StepGraph.build([step], "/p")
    assert len(graph.nodes) == 5000
    assert graph.nodes[0].name == "s0"


def test_this_output_path_resolves_to_the_steps_own_path():
    s = ExecutorStep("out/step", noop,
                     {"out": this_output_path(), "ckpt": this_output_path("ckpt")})
    graph = StepGraph.build([s], "gs://b/x")
    node = graph.node_of(s)
    assert graph.resolve_config(node) == {"out": node.output_path,
                                          "ckpt": node.output_path + "/ckpt"}
    assert node.output_path.startswith("gs://b/x/out/step-")


@pytest.mark.parametrize("name", ["", "/abs", "a//b", "a/../b", "trailing/"])
def test_bad_step_names_are_refused(name):
    with pytest.raises(ValueError, match="name"):
        ExecutorStep(name, noop, {})


def test_non_steps_in_the_list_are_refused():
    with pytest.raises(TypeError, match=r"steps\[0\] is a str"):
        StepGraph.build(["nope"], "/p")  # type: ignore[list-item]
