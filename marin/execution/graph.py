"""The step graph: dependencies, versions, output paths, resolved configs.

    graph = StepGraph.build([train_step], prefix="gs://bucket/experiments")
    for node in graph.nodes:                # dependencies before dependents
        print(node.key, node.output_path)   # "train/tiny-3f9c01ab", ".../train/tiny-3f9c01ab"
    config = graph.resolve_config(graph.nodes[-1])

    order = StepOrder.of([train_step])      # the walk alone: names, order, dependencies
    graph = StepGraph.build(order, prefix)  # hashes the steps without walking them again

A step's version is the canonical JSON of its name and config, where every dependency
appears as its own ``<name>-<hash>`` key; so the hash covers the dependency's version
transitively, and never a path, a bucket or a region.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from marin.execution.config_tree import ConfigStructureError, iter_leaves, map_leaves
from marin.execution.diff import diff_versions
from marin.execution.hashing import (
    UnhashableConfigError,
    canonical_json,
    canonicalize,
    version_hash,
)
from marin.execution.step import (
    ExecutorStep,
    OutputPathOf,
    ThisOutputPath,
    UnversionedValue,
    VersionedValue,
    join_path,
)


@runtime_checkable
class StepCollection(Protocol):
    """A value holding a graph's steps (an IsoFLOP study, say): taken wherever a list of
    steps is (``executor_main``, ``Executor.run``, ``StepGraph.build``)."""

    @property
    def steps(self) -> Sequence[ExecutorStep]: ...


def step_list(steps: Sequence[ExecutorStep] | StepCollection) -> list[ExecutorStep]:
    """``steps`` as a list: a sequence as it is, a ``StepCollection`` by its ``steps``."""
    if not isinstance(steps, (list, tuple)) and isinstance(steps, StepCollection):
        return list(steps.steps)
    return list(steps)


class StepGraphError(ValueError):
    """The steps do not form a valid graph (a cycle, or one name with two versions)."""


@dataclass(eq=False)
class StepNode:
    """A step placed in the graph."""

    step: ExecutorStep
    hash: str
    version: dict[str, Any]
    output_path: str
    dependencies: list[StepNode] = field(default_factory=list)
    nonblocking: frozenset[StepNode] = frozenset()
    """The dependencies this step does not wait for (its config names them only through
    ``output_path_of(..., blocking=False)``): it starts once they have started."""

    key: str = field(init=False)
    """``<name>-<hash>``: the step's identity, and the last part of its output path."""

    def __post_init__(self) -> None:
        self.key = f"{self.step.name}-{self.hash}"

    @property
    def name(self) -> str:
        return self.step.name

    def __repr__(self) -> str:
        return f"StepNode({self.key})"


@dataclass(frozen=True, eq=False)
class StepOrder:
    """Every step reachable from ``roots``, dependencies first, with each step's direct
    dependencies: the one walk over the configs that an invocation makes. Overrides are
    applied to it (``apply_overrides``) and ``StepGraph.build`` hashes it, neither walking
    the configs again."""

    roots: list[ExecutorStep]
    steps: list[ExecutorStep]
    dependencies: dict[int, list[ExecutorStep]]
    """``id(step)``: the steps its config refers to (``steps`` keeps them alive)."""
    nonblocking: dict[int, frozenset[int]] = field(default_factory=dict)
    """``id(step)``: the ids of those dependencies it does not wait for; only steps that
    have any are listed."""

    @classmethod
    def of(cls, roots: Sequence[ExecutorStep] | StepCollection) -> StepOrder:
        roots = step_list(roots)
        check_steps(roots)
        steps, deps, nonblocking = _ordered_with_dependencies(roots)
        return cls(list(roots), steps, deps, nonblocking)

    def names(self) -> list[str]:
        return [s.name for s in self.steps]


class StepGraph:
    def __init__(self, nodes: list[StepNode], node_by_step: dict[int, StepNode],
                 steps: list[ExecutorStep], prefix: str):
        self.nodes = nodes
        self.prefix = prefix
        self._node_by_step = node_by_step
        self._steps = steps  # keeps every step alive, so the id() keys stay unique

    @classmethod
    def build(cls, steps: Sequence[ExecutorStep] | StepCollection, prefix: str) -> StepGraph:
        """Walk ``steps``, hash them and place them under ``prefix``."""
        return cls.from_order(StepOrder.of(steps), prefix)

    @classmethod
    def from_order(cls, walked: StepOrder, prefix: str) -> StepGraph:
        """Hash an already walked ``StepOrder`` and place it under ``prefix``."""
        order, deps_of, nonblocking = walked.steps, walked.dependencies, walked.nonblocking
        node_by_step: dict[int, StepNode] = {}
        node_by_key: dict[str, StepNode] = {}
        version_by_name: dict[str, StepNode] = {}
        nodes: list[StepNode] = []
        for step in order:
            node = _make_node(step, deps_of[id(step)], nonblocking.get(id(step), _NONE),
                              node_by_step, prefix)
            existing = node_by_key.get(node.key)
            if existing is not None:
                node_by_step[id(step)] = existing
                continue
            clash = version_by_name.get(step.name)
            if clash is not None:
                raise StepGraphError(_name_clash_message(clash, node))
            version_by_name[step.name] = node
            node_by_key[node.key] = node
            node_by_step[id(step)] = node
            nodes.append(node)
        return cls(nodes, node_by_step, order, prefix)

    def node_of(self, step: ExecutorStep) -> StepNode:
        try:
            return self._node_by_step[id(step)]
        except KeyError:
            raise KeyError(f"step {step.name!r} is not part of this graph") from None

    def dependents(self) -> dict[StepNode, list[StepNode]]:
        out: dict[StepNode, list[StepNode]] = {n: [] for n in self.nodes}
        for node in self.nodes:
            for dep in node.dependencies:
                out[dep].append(node)
        return out

    def closure(self, selected: Iterable[StepNode]) -> set[StepNode]:
        """``selected`` and everything they depend on."""
        seen: set[StepNode] = set()
        stack = list(selected)
        while stack:
            node = stack.pop()
            if node not in seen:
                seen.add(node)
                stack.extend(node.dependencies)
        return seen

    def resolve_config(self, node: StepNode, own_output: str | None = None) -> Any:
        """The config with every placeholder replaced by a concrete path; with
        ``own_output``, ``this_output_path()`` points there (an attempt's folder) instead
        of at the step's output path."""
        own = node.output_path if own_output is None else own_output

        def resolve(leaf: Any) -> Any:
            if isinstance(leaf, ExecutorStep):
                return self.node_of(leaf).output_path
            if isinstance(leaf, OutputPathOf):
                return join_path(self.node_of(leaf.step).output_path, leaf.sub)
            if isinstance(leaf, ThisOutputPath):
                return join_path(own, leaf.sub)
            if isinstance(leaf, (VersionedValue, UnversionedValue)):
                return map_leaves(leaf.value, resolve)
            return leaf

        return map_leaves(node.step.config, resolve)


_NONE: frozenset[int] = frozenset()


def nonblocking_keys(node: StepNode) -> list[str]:
    """The keys of the dependencies ``node`` does not wait for, sorted."""
    return sorted(d.key for d in node.nonblocking)


def dependencies_of(step: ExecutorStep) -> list[ExecutorStep]:
    """The steps ``step``'s config refers to, waited for or not."""
    return dependency_edges(step)[0]


def dependency_edges(step: ExecutorStep) -> tuple[list[ExecutorStep], frozenset[int]]:
    """The steps ``step``'s config refers to, and the ids of those it refers to only through
    nonblocking placeholders (one blocking reference makes the edge blocking)."""
    deps: dict[int, ExecutorStep] = {}
    blocking: set[int] = set()
    for leaf in iter_leaves(step.config):
        if isinstance(leaf, ExecutorStep):
            deps.setdefault(id(leaf), leaf)
            blocking.add(id(leaf))
        elif isinstance(leaf, OutputPathOf):
            deps.setdefault(id(leaf.step), leaf.step)
            if leaf.blocking:
                blocking.add(id(leaf.step))
    if len(blocking) == len(deps):
        return list(deps.values()), _NONE
    return list(deps.values()), frozenset(deps.keys() - blocking)


def check_steps(steps: Sequence[ExecutorStep]) -> None:
    for i, step in enumerate(steps):
        if not isinstance(step, ExecutorStep):
            raise TypeError(f"steps[{i}] is a {type(step).__name__}, not an ExecutorStep")


def _ordered_with_dependencies(roots: Sequence[ExecutorStep]
                               ) -> tuple[list[ExecutorStep], dict[int, list[ExecutorStep]],
                                          dict[int, frozenset[int]]]:
    """Dependencies first; iterative, so a 100,000-step chain does not hit recursion limits.
    A nonblocking edge is an edge: a cycle through one is refused like any other."""
    done: set[int] = set()
    on_path: dict[int, ExecutorStep] = {}
    order: list[ExecutorStep] = []
    deps_cache: dict[int, list[ExecutorStep]] = {}
    nonblocking: dict[int, frozenset[int]] = {}
    for root in roots:
        if id(root) in done:
            continue
        stack: list[tuple[ExecutorStep, int]] = [(root, 0)]
        on_path[id(root)] = root
        while stack:
            step, index = stack[-1]
            deps = deps_cache.get(id(step))
            if deps is None:
                deps, unwaited = dependency_edges(step)
                deps_cache[id(step)] = deps
                if unwaited:
                    nonblocking[id(step)] = unwaited
            if index < len(deps):
                stack[-1] = (step, index + 1)
                dep = deps[index]
                if id(dep) in done:
                    continue
                if id(dep) in on_path:
                    cycle = [s.name for s, _ in stack[[id(s) for s, _ in stack].index(id(dep)):]]
                    raise StepGraphError(
                        "the steps form a cycle: " + " -> ".join([*cycle, dep.name])
                        + "; a step cannot depend on its own output"
                    )
                on_path[id(dep)] = dep
                stack.append((dep, 0))
            else:
                stack.pop()
                del on_path[id(step)]
                done.add(id(step))
                order.append(step)
    return order, deps_cache, nonblocking


#: The longest file name most filesystems (ext4, xfs, APFS) and object keys' parts accept.
NAME_MAX = 255


def _check_name_length(name: str) -> None:
    if len(name) * 4 <= NAME_MAX - 20:  # UTF-8 spends at most 4 bytes on a character
        return
    for part in name.split("/"):
        if len(part.encode()) > NAME_MAX - 20:
            raise StepGraphError(
                f"step name {name!r}: the part {part[:40]!r}... is {len(part.encode())} bytes; "
                f"with its hash suffix it exceeds the {NAME_MAX}-byte limit of file names. "
                "Shorten it, or split it into folders with '/'")


def _make_node(step: ExecutorStep, dep_steps: list[ExecutorStep], unwaited: frozenset[int],
               node_by_step: dict[int, StepNode], prefix: str) -> StepNode:
    _check_name_length(step.name)
    deps = [node_by_step[id(d)] for d in dep_steps]
    nonblocking = _NONE if not unwaited else frozenset(
        node_by_step[i] for i in unwaited) - {node_by_step[id(d)] for d in dep_steps
                                               if id(d) not in unwaited}
    try:
        config = canonicalize(step.config, lambda s: node_by_step[id(s)].key)
    except (ConfigStructureError, UnhashableConfigError) as e:
        raise e.in_step(step.name) from None
    version = {"name": step.name, "config": config}
    digest = version_hash(canonical_json(version))
    output_path = join_path(prefix, f"{step.name}-{digest}")
    return StepNode(step, digest, version, output_path, list(dict.fromkeys(deps)), nonblocking)


def _name_clash_message(a: StepNode, b: StepNode) -> str:
    changes = diff_versions(a.version["config"], b.version["config"])
    detail = "; ".join(str(c) for c in changes[:5]) or "their dependencies differ"
    return (
        f"two different steps are both named {a.name!r} ({a.key} and {b.key}): {detail}. "
        "Give each variant its own name (for example with a suffix describing the change)."
    )
