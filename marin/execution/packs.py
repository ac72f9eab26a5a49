"""Packs: ready steps of one shape that run together, as one program (``--pack N``).

    @packable(PackSpec(key=shape_of, train=train_together, capacity=members_that_fit))
    def train_lm(config): ...

    pack_spec(train_lm)                  # its PackSpec; None for a function that never packs
    packer = Packer(graph, limit=4)
    packer.take(node, ready)             # node and up to 3 of the ready nodes it packs with
    plan_packs(plan, limit=4)            # the packs a dry run shows, as lists of entries

A step's function says that its steps pack (``packable``): ``key(config)`` is what the
configs that run together share (None: this config never packs), ``train(configs)`` runs
them together and returns each one's error (None when it succeeded), ``capacity(config)``
how many such members fit on one device. The executor packs ready steps of one function,
equal resources (one host) and equal keys, at most ``limit`` and at most ``capacity``.

The key is never hashed: a packed and an unpacked run of one config are one step, and a
rerun skips it either way. Each member keeps its own worker protocol
(``marin.execution.pack_worker``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from marin.execution.graph import StepGraph, StepNode
    from marin.execution.planning import Plan, PlanEntry

__all__ = ["PackSpec", "Packer", "check_pack_limit", "pack_spec", "packable", "plan_packs"]

F = TypeVar("F", bound=Callable[..., Any])

_PACK_ATTRIBUTE = "__marin_pack__"


@dataclass(frozen=True)
class PackSpec:
    """How the steps of one function pack (see the module).

    Attributes:
        key: what packed configs share (compared with ``==``), or None for one that
            never packs.
        train: runs configs of one key together; one error or None per config, in order.
        capacity: how many members like ``config`` fit on one device.
    """

    key: Callable[[Any], Hashable | None]
    train: Callable[[Sequence[Any]], Sequence[BaseException | None]]
    capacity: Callable[[Any], int]


def packable(spec: PackSpec) -> Callable[[F], F]:
    """Declare that the steps of the decorated function pack as ``spec`` says; returns the
    function itself."""

    def declare(fn: F) -> F:
        setattr(fn, _PACK_ATTRIBUTE, spec)
        return fn

    return declare


def pack_spec(fn: Callable[..., Any]) -> PackSpec | None:
    """``fn``'s ``PackSpec`` (through ``functools.partial``), or None."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    spec = getattr(fn, _PACK_ATTRIBUTE, None)
    return spec if isinstance(spec, PackSpec) else None


def check_pack_limit(limit: object) -> int:
    """``limit`` as a pack size; a ValueError naming the option when it is not one."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"`pack` must be a whole number of at least 1 (1: no packing), "
                         f"got {limit!r}")
    return limit


class Packer:
    """Finds the packs of a graph's nodes; keys are computed once per node."""

    def __init__(self, graph: StepGraph, limit: int = 1):
        self.graph = graph
        self.limit = check_pack_limit(limit)
        self._keys: dict[StepNode, tuple[Any, ...] | None] = {}
        self._capacity: dict[StepNode, int] = {}

    def key(self, node: StepNode) -> tuple[Any, ...] | None:
        """What ``node`` packs by: its function's spec, resources and key; None if it
        never packs."""
        if node not in self._keys:
            self._keys[node] = None
            spec = pack_spec(node.step.fn)
            if spec is not None and node.step.resources.hosts == 1:
                config = self.graph.resolve_config(node)
                try:
                    key, capacity = spec.key(config), spec.capacity(config)
                except Exception:  # a config its function refuses runs alone, and fails there
                    key = None
                if key is not None:
                    self._keys[node] = (spec, node.step.resources, key)
                    self._capacity[node] = max(1, capacity)
        return self._keys[node]

    def take(self, node: StepNode, candidates: Iterable[StepNode]) -> list[StepNode]:
        """``node`` and the first of ``candidates`` of its key: at most ``limit`` in all,
        and at most as many as fit on one device (``candidates`` is not read when
        ``limit`` is 1)."""
        if self.limit == 1:
            return [node]
        key = self.key(node)
        if key is None:
            return [node]
        size = min(self.limit, self._capacity[node])
        members = [node]
        for other in candidates:
            if len(members) >= size:
                break
            if other is not node and other not in members and self.key(other) == key:
                members.append(other)
        return members


def plan_packs(plan: Plan, limit: int) -> list[list[PlanEntry]]:
    """The packs of two or more that ``plan``'s run would form with ``--pack limit``: steps
    to run of one key whose dependencies to run are the same (so they are ready at once)."""
    packer = Packer(plan.graph, limit)
    if packer.limit == 1:
        return []
    runs = [e for e in plan.entries if e.action == "run"]
    to_run = {e.node for e in runs}
    groups: dict[Any, list[PlanEntry]] = {}
    for entry in runs:
        key = packer.key(entry.node)
        if key is None:
            continue
        ready_with = frozenset(d for d in entry.node.dependencies if d in to_run)
        groups.setdefault((key, ready_with), []).append(entry)
    packs = []
    for group in groups.values():
        nodes = [e.node for e in group]
        by_node = {e.node: e for e in group}
        while nodes:
            members = packer.take(nodes[0], nodes[1:])
            if len(members) > 1:
                packs.append([by_node[n] for n in members])
            nodes = [n for n in nodes if n not in members]
    return packs
