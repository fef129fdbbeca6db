"""Graph coloring's state transition, from FineReason's `graphcoloring_tree.py` and its prompter's
`get_answer`.

The state is every number in the text, in order (the official `\\d+`: a stray "S(i+1)" counts too):
none is "no coloring found", a count other than the graph's vertices "invalid coloring", more
distinct colors than the chromatic number "too many colors". One move colors exactly one uncolored
vertex with a color none of its neighbours has; the color's value is not checked against the
chromatic number (only the count of distinct colors is).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from potrun.benchmarks.finereason.rules import (
    INVALID_MOVE,
    VALID,
    PuzzleError,
    Transition,
    backtracking,
    decoded,
    field,
    int_list,
)

_NUMBER = re.compile(r"\d+")
# Python refuses int() of longer digit strings; a color that long is kept as its digits (it equals
# no color a record can hold, and is not 0).
_MAX_INT_DIGITS = 4000
MULTIPLE_MOVES = "multiple moves"

Color = int | str


@dataclass(frozen=True)
class GraphColoring(Transition):
    graph: list[list[int]]
    colors: int

    @classmethod
    def from_record(cls, inputs: Mapping[str, Any], status: str) -> GraphColoring:
        graph = _graph(field(inputs, "graph"))
        colors = field(inputs, "chromatic_number")
        if type(colors) is not int:
            raise PuzzleError("inputs.chromatic_number is not an integer")
        vertices = len(graph)
        return cls(
            graph=graph,
            colors=colors,
            parent=int_list(field(inputs, "parent"), "parent", vertices),
            current=int_list(field(inputs, "current"), "current", vertices),
            child=field(inputs, "unsolvable_child"),
            backtrack=backtracking(status),
        )

    def classify(self, text: str) -> str:
        """The official class of the coloring written in `text` (what follows "Next state:")."""
        count = sum(1 for _ in _NUMBER.finditer(text))
        if count == 0:
            return "no coloring found"
        if count != len(self.graph):
            return "invalid coloring"
        coloring = [_color(match.group()) for match in _NUMBER.finditer(text)]
        if len({color for color in coloring if color != 0}) > self.colors:
            return "too many colors"
        return self.walk(coloring)

    def move(self, previous: list[int], proposed: list[Color]) -> str:
        """Gives "1" when `proposed` colors one uncolored vertex of `previous` with a color its neighbours
        lack; else the official error class."""
        changed = [vertex for vertex, color in enumerate(previous) if color != proposed[vertex]]
        if len(changed) != 1:
            return MULTIPLE_MOVES
        vertex = changed[0]
        color = proposed[vertex]
        if previous[vertex] != 0 or color == 0:
            return INVALID_MOVE
        clash = any(previous[neighbour] == color for neighbour in self.graph[vertex])
        return INVALID_MOVE if clash else VALID


def _color(digits: str) -> Color:
    significant = digits.lstrip("0") or "0"
    return int(significant) if len(significant) <= _MAX_INT_DIGITS else significant


def _graph(value: Any) -> list[list[int]]:
    """The adjacency list (a JSON string of it, as data/graphcoloring_states.json stores it, too)."""
    value = decoded(value, "graph")
    if not isinstance(value, list):
        raise PuzzleError("inputs.graph is not an adjacency list")
    vertices = len(value)
    for neighbours in value:
        if not all(0 <= n < vertices for n in int_list(neighbours, "graph")):
            raise PuzzleError("inputs.graph names a vertex it does not have")
    return value
