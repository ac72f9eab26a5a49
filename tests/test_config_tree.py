"""The one walk over config trees: dependencies, hashing, resolution and info files agree
on every container kind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from collections import namedtuple
from dataclasses import dataclass

import pydantic
import pytest

from marin.execution import ExecutorStep, StepGraph, output_path_of, this_output_path
from marin.execution.config_tree import (
    MAX_DEPTH,
    ConfigStructureError,
    Kind,
    iter_leaves,
    kind_of,
    map_leaves,
)
from marin.execution.graph import dependencies_of
from marin.execution.status import decode_info, encode_info
from marin.execution.step import OutputPathOf
from tests.conftest import ROOT


def noop(config):
    return None


def _source(name: str) -> ExecutorStep:
    return ExecutorStep(name, noop, {"name": name, "out": this_output_path()})


class Model(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(arbitrary_types_allowed=True)
    data: object
    width: int = 4


@dataclass(frozen=True)
class Record:
    data: object
    note: str = "x"


Pair = namedtuple("Pair", ["left", "right"])


def _every_container(steps: dict[str, ExecutorStep]) -> dict[str, object]:
    """One placeholder inside each kind of container the walk knows."""
    return {
        "dataclass": Record(output_path_of(steps["a"], "rec")),
        "pydantic": Model(data=output_path_of(steps["b"], "model")),
        "dict": {"k": output_path_of(steps["c"], "dict")},
        "mapping": types.MappingProxyType({"k": output_path_of(steps["d"], "proxy")}),
        "list": [output_path_of(steps["e"], "list")],
        "tuple": (output_path_of(steps["f"], "tuple"),),
        "namedtuple": Pair(output_path_of(steps["g"], "pair"), 1),
        "set": {output_path_of(steps["h"], "set")},
        "frozenset": frozenset({output_path_of(steps["i"], "frozen")}),
    }


def test_a_placeholder_inside_a_set_is_resolved_to_a_set_of_paths():
    a, b = _source("data/a"), _source("data/b")
    reader = ExecutorStep("read", noop, {"inputs": frozenset({output_path_of(a, "x.txt"),
                                                             output_path_of(b, "y.txt")}),
                                         "tags": {"t1", "t2"}})
    graph = StepGraph.build([reader], "/p")
    node = graph.node_of(reader)
    assert {d.name for d in node.dependencies} == {"data/a", "data/b"}
    resolved = graph.resolve_config(node)
    assert type(resolved["inputs"]) is frozenset
    assert resolved["inputs"] == {f"{graph.node_of(a).output_path}/x.txt",
                                  f"{graph.node_of(b).output_path}/y.txt"}
    assert resolved["tags"] is reader.config["tags"]  # unchanged parts keep their identity


def test_a_set_hashes_the_same_in_any_order_and_any_process():
    script = (
        "from marin.execution import ExecutorStep, StepGraph, output_path_of, this_output_path\n"
        "def noop(c): pass\n"
        "src = [ExecutorStep(f's{i}', noop, {'i': i, 'o': this_output_path()}) for i in range(6)]\n"
        "order = src if ORDER == 'forward' else src[::-1]\n"
        "inputs = set()\n"
        "for s in order:\n"
        "    inputs.add(output_path_of(s, 'part'))\n"
        "    inputs.add(s.name)\n"
        "step = ExecutorStep('read', noop, {'inputs': inputs})\n"
        "print(StepGraph.build([step], '/p').node_of(step).key)\n"
    )
    keys = set()
    for seed, order in (("0", "forward"), ("4242", "backward")):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        out = subprocess.run([sys.executable, "-c", f"ORDER = {order!r}\n{script}"],
                             capture_output=True, text=True, env=env, check=True, cwd=ROOT)
        keys.add(out.stdout.strip())
    assert len(keys) == 1, keys


def test_a_set_and_a_list_of_the_same_placeholders_are_different_identities():
    a = _source("data/a")
    as_set = ExecutorStep("read", noop, {"inputs": {output_path_of(a)}})
    as_list = ExecutorStep("read", noop, {"inputs": [output_path_of(a)]})
    assert (StepGraph.build([as_set], "/p").node_of(as_set).hash
            != StepGraph.build([as_list], "/p").node_of(as_list).hash)


def test_every_container_kind_is_walked_alike_by_all_three():
    steps = {k: _source(f"data/{k}") for k in "abcdefghi"}
    reader = ExecutorStep("read", noop, _every_container(steps))
    placeholders = [leaf for leaf in iter_leaves(reader.config)
                    if isinstance(leaf, OutputPathOf)]
    assert sorted(p.sub for p in placeholders) == sorted(
        ["rec", "model", "dict", "proxy", "list", "tuple", "pair", "set", "frozen"])
    assert {s.name for s in dependencies_of(reader)} == {s.name for s in steps.values()}

    graph = StepGraph.build([reader], "/p")
    version = json.dumps(graph.node_of(reader).version)
    for step in steps.values():  # each dependency's identity entered the hash
        assert graph.node_of(step).key in version

    resolved = graph.resolve_config(graph.node_of(reader))
    assert [leaf for leaf in iter_leaves(resolved)] == []  # nothing left unresolved
    out = {k: graph.node_of(s).output_path for k, s in steps.items()}
    assert resolved["dataclass"] == Record(f"{out['a']}/rec")
    assert isinstance(resolved["pydantic"], Model)
    assert resolved["pydantic"].data == f"{out['b']}/model"
    assert resolved["mapping"]["k"] == f"{out['d']}/proxy"
    assert resolved["namedtuple"] == Pair(f"{out['g']}/pair", 1)
    assert resolved["set"] == {f"{out['h']}/set"}

    info = decode_info(encode_info({"version": 1, "config": resolved}))["config"]
    assert info == {
        "dataclass": {"data": f"{out['a']}/rec", "note": "x"},
        "pydantic": {"data": f"{out['b']}/model", "width": 4},
        "dict": {"k": f"{out['c']}/dict"},
        "mapping": {"k": f"{out['d']}/proxy"},
        "list": [f"{out['e']}/list"],
        "tuple": [f"{out['f']}/tuple"],
        "namedtuple": [f"{out['g']}/pair", 1],
        "set": [f"{out['h']}/set"],
        "frozenset": [f"{out['i']}/frozen"],
    }


def test_pydantic_models_are_detected_one_way():
    class Plain:
        model_fields = {"x": None}  # looks like a model, is not one

        def model_dump(self):
            return {}

        def model_copy(self, update=None):
            return self

    assert kind_of(Model(data=1)) is Kind.RECORD
    assert kind_of(Plain()) is Kind.LEAF


def test_map_leaves_keeps_unchanged_trees_and_rebuilds_changed_ones():
    a = _source("data/a")
    config = {"keep": Record(1, "y"), "change": [Record(output_path_of(a))]}
    mapped = map_leaves(config, lambda leaf: "resolved")
    assert mapped is not config
    assert mapped["keep"] is config["keep"]
    assert mapped["change"] == [Record("resolved")]
    untouched = {"a": [1, 2], "b": {"c": (3,)}}
    assert map_leaves(untouched, lambda leaf: "never") is untouched


def _self_list() -> list:
    loop: list = [1]
    loop.append(loop)
    return loop


def _self_dict() -> dict:
    loop: dict = {"a": 1}
    loop["me"] = loop
    return loop


@dataclass
class Mutable:
    child: object = None


def _self_record() -> Mutable:
    record = Mutable()
    record.child = [record]
    return record


@pytest.mark.parametrize("make, field, back_to", [
    (_self_list, "config['loop'][1]", "config['loop']"),
    (_self_dict, "config['loop']['me']", "config['loop']"),
    (_self_record, "config['loop'].child[0]", "config['loop']"),
])
def test_a_config_that_contains_itself_is_refused_by_every_walk(make, field, back_to):
    config = {"out": this_output_path(), "loop": make()}
    step = ExecutorStep("cyclic", noop, config)
    assert dependencies_of(step) == []  # the dependency walk ends instead of looping
    with pytest.raises(ConfigStructureError) as info:
        StepGraph.build([step], "/p")
    message = str(info.value)
    assert message.startswith(f"step 'cyclic': {field}: the config contains itself")
    assert f"(back to {back_to})" in message and "\n" not in message
    with pytest.raises(ConfigStructureError, match="contains itself"):
        map_leaves(config, lambda leaf: leaf)
    with pytest.raises(ConfigStructureError, match="contains itself"):
        encode_info({"config": config})


def test_a_value_shared_by_two_fields_is_no_cycle():
    shared = [1, 2, {"x": 3}]
    step = ExecutorStep("shared", noop, {"a": shared, "b": shared, "c": [shared, shared]})
    node = StepGraph.build([step], "/p").nodes[0]
    assert node.version["config"]["c"] == [[1, 2, {"x": 3}]] * 2


def test_a_config_nested_too_deeply_is_one_line_naming_the_limit():
    deep: object = 1
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(ConfigStructureError) as info:
        StepGraph.build([ExecutorStep("deep", noop, {"d": deep})], "/p")
    message = str(info.value)
    assert message.startswith("step 'deep': config['d'][0][0]")
    assert f"more than {MAX_DEPTH} levels deep" in message and "\n" not in message
    assert len(message) < 300
    shallow: object = 1
    for _ in range(MAX_DEPTH - 2):  # within the limit (the dict is one level): hashed
        shallow = [shallow]
    StepGraph.build([ExecutorStep("shallow", noop, {"d": shallow})], "/p")
