"""Game of 24's state transition, from FineReason's `game24_tree.py` and its prompter's `get_answer`.

The state is the last `[...]` in the text (up to its first "]"), read as a Python list of expression
strings. It must use the four numbers of the puzzle exactly ("different numbers" otherwise). One move
replaces two expressions by one that joins them with a single operator: the official check counts
the expressions added and removed, then deletes the two used expressions' text (with and without
their parentheses) from the new one and expects exactly one of + - * / to be left.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from potrun.benchmarks.finereason.rules import (
    PARSING_ERROR,
    VALID,
    PuzzleError,
    Transition,
    Unreadable,
    backtracking,
    field,
    last_flat_list,
    literal,
)

_NUMBER = re.compile(r"\d+")
_OPERATORS = ("+", "-", "*", "/")
# Longer digit runs cannot be one of the puzzle's numbers (a JSON record cannot hold such an int)
_MAX_NUMBER_DIGITS = 4000


@dataclass(frozen=True)
class Game24(Transition):
    numbers: list[int]

    @classmethod
    def from_record(cls, inputs: Mapping[str, Any], status: str) -> Game24:
        initial = field(inputs, "initial_state")
        try:  # the official int() of each
            numbers = sorted(int(item) for item in initial)
        except (TypeError, ValueError):
            raise PuzzleError("inputs.initial_state is not a list of whole numbers") from None
        return cls(
            numbers=numbers,
            parent=_expressions(field(inputs, "parent"), "parent"),
            current=_expressions(field(inputs, "current"), "current"),
            child=field(inputs, "unsolvable_child"),
            backtrack=backtracking(status),
        )

    def classify(self, text: str) -> str:
        """The official class of the expressions written in `text` (what follows "Next state:")."""
        block = last_flat_list(text)
        if block is None:
            return PARSING_ERROR
        try:
            state = literal(block)
        except Unreadable:
            return PARSING_ERROR
        if not all(isinstance(expression, str) for expression in state):
            return PARSING_ERROR  # the official re.findall on a non-string raises
        if _numbers_in(state) != self.numbers:
            return "different numbers"
        return self.walk(state)

    def move(self, previous: list[str], proposed: list[str]) -> str:
        """Gives "1" when `proposed` joins two expressions of `previous` with one operator; else the
        official error class."""
        if len(proposed) != len(previous) - 1:
            return "length difference is not 1"
        before, after = Counter(previous), Counter(proposed)
        added = after - before
        if len(added) != 1:
            return "no new expression or more than one new expression found"
        used = list((before - after).elements())  # in the order of first appearance in `previous`
        if len(used) != 2:
            return "number of used expressions is not 2"
        rest = next(iter(added))
        for expression in used:
            rest = rest.replace(expression, "")
        for expression in used:
            rest = rest.replace(expression.replace("(", "").replace(")", ""), "")
        rest = rest.replace(" ", "").replace("(", "").replace(")", "")
        if len(rest) != 1:
            return "more than 1 operator"
        return VALID if rest in _OPERATORS else "invalid operator"


def _numbers_in(expressions: list[str]) -> list[int] | None:
    """The numbers the expressions use, sorted; None when one is too long to be a puzzle's."""
    runs = [match.group().lstrip("0") or "0" for expression in expressions for match in _NUMBER.finditer(expression)]
    if any(len(run) > _MAX_NUMBER_DIGITS for run in runs):
        return None
    return sorted(int(run) for run in runs)


def _expressions(value: Any, name: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise PuzzleError(f"inputs.{name} is not a list of expressions")
    return value
