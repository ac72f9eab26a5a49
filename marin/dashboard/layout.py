"""A layered drawing of a step graph: columns by dependency depth, one box per step.

    svg = layout_graph([("tok-1a2b3c4d", []), ("train-5e6f7a8b", ["tok-1a2b3c4d"])])
    svg.width, svg.height, svg.nodes[1].x, svg.edges

Design note: a longest-path layering (Sugiyama's first stage, without crossing reduction
beyond ordering each column by its parents' rows) is enough for experiment graphs, which
are wide and shallow; it needs no JavaScript library and renders as plain SVG.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

NODE_W = 230
NODE_H = 40
COL_GAP = 70
ROW_GAP = 14
PAD = 12


@dataclass(frozen=True)
class PlacedNode:
    key: str
    x: float
    y: float
    column: int


@dataclass(frozen=True)
class GraphLayout:
    nodes: list[PlacedNode]
    edges: list[tuple[float, float, float, float]]
    width: float
    height: float


def layout_graph(steps: Sequence[tuple[str, Sequence[str]]]) -> GraphLayout:
    """Place ``(key, dependency keys)`` pairs; dependencies outside the list are ignored."""
    deps = {key: [d for d in ds if d != key] for key, ds in steps}
    known = set(deps)
    column: dict[str, int] = {}
    for key in _topological(deps):
        parents = [d for d in deps[key] if d in known]
        column[key] = 1 + max((column[p] for p in parents), default=-1)
    columns: dict[int, list[str]] = {}
    for key, _ in steps:
        columns.setdefault(column[key], []).append(key)
    row: dict[str, float] = {}
    for c in sorted(columns):
        members = columns[c]
        if c > 0:
            members.sort(key=lambda k: (_mean([row[d] for d in deps[k] if d in row]), k))
        for i, key in enumerate(members):
            row[key] = i
    nodes = {key: PlacedNode(key, PAD + column[key] * (NODE_W + COL_GAP),
                             PAD + row[key] * (NODE_H + ROW_GAP), column[key])
             for key, _ in steps}
    edges = []
    for key, ds in deps.items():
        child = nodes[key]
        for d in ds:
            if d in nodes:
                parent = nodes[d]
                edges.append((parent.x + NODE_W, parent.y + NODE_H / 2, child.x,
                              child.y + NODE_H / 2))
    width = PAD * 2 + (max(column.values(), default=0) + 1) * (NODE_W + COL_GAP) - COL_GAP
    rows = max((len(m) for m in columns.values()), default=0)
    height = PAD * 2 + rows * (NODE_H + ROW_GAP) - ROW_GAP
    return GraphLayout([nodes[k] for k, _ in steps], edges, width, max(height, NODE_H))


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _topological(deps: dict[str, list[str]]) -> list[str]:
    order: list[str] = []
    state: dict[str, int] = {}
    for start in deps:
        if state.get(start):
            continue
        stack = [(start, iter(deps[start]))]
        state[start] = 1
        while stack:
            key, children = stack[-1]
            for child in children:
                if child in deps and not state.get(child):
                    state[child] = 1
                    stack.append((child, iter(deps[child])))
                    break
            else:
                stack.pop()
                state[key] = 2
                order.append(key)
    return order
