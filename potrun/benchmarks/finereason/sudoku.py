"""Sudoku's state transition, from FineReason's `sudoku_tree.py` and its prompter's `get_answer`.

The state is the last nine rows written as `[d, d, d, d, d, d, d, d, d]` (single digits) in the text;
fewer than nine rows cannot be compared cell by cell (a parsing error). One move fills exactly one
empty cell with 1-9 without repeating a digit in its row, column or box; any other change, removing
a digit included, is an "invalid move", and a state that differs in no cell or in several is
"multiple moves".
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from potrun.benchmarks.finereason.rules import (
    INVALID_MOVE,
    PARSING_ERROR,
    VALID,
    PuzzleError,
    Transition,
    backtracking,
    field,
    int_list,
)

# `\d` as the official pattern has it: any Unicode digit, which int() reads
_ROW = re.compile(r"\[(\d,\s*\d,\s*\d,\s*\d,\s*\d,\s*\d,\s*\d,\s*\d,\s*\d)\]")
SIZE = 9
MULTIPLE_MOVES = "multiple moves"

Grid = list[list[int]]


@dataclass(frozen=True)
class Sudoku(Transition):
    @classmethod
    def from_record(cls, inputs: Mapping[str, Any], status: str) -> Sudoku:
        return cls(
            parent=_grid(field(inputs, "parent"), "parent"),
            current=_grid(field(inputs, "current"), "current"),
            child=field(inputs, "unsolvable_child"),
            backtrack=backtracking(status),
        )

    def classify(self, text: str) -> str:
        """The official class of the state written in `text` (what follows "Next state:")."""
        rows: deque[list[int]] = deque(maxlen=SIZE)
        for match in _ROW.finditer(text):
            rows.append([int(digit.strip()) for digit in match.group(1).split(",")])
        if len(rows) < SIZE:  # the official cell-by-cell comparison fails on a short grid
            return PARSING_ERROR
        return self.walk(list(rows))

    def move(self, previous: Grid, proposed: Grid) -> str:
        """Gives "1" when `proposed` fills one empty cell of `previous` with a digit its row, column and box
        lack; else the official error class."""
        changed = [(r, c) for r in range(SIZE) for c in range(SIZE) if previous[r][c] != proposed[r][c]]
        if len(changed) != 1:
            return MULTIPLE_MOVES
        row, col = changed[0]
        digit = proposed[row][col]
        if previous[row][col] != 0 or not 1 <= digit <= SIZE:
            return INVALID_MOVE
        return VALID if digit not in _peers(previous, row, col) else INVALID_MOVE


def _peers(grid: Grid, row: int, col: int) -> set[int]:
    """The digits in the row, column and 3x3 box of a cell, the cell itself left out."""
    top, left = row - row % 3, col - col % 3
    cells = {(row, c) for c in range(SIZE)} | {(r, col) for r in range(SIZE)}
    cells |= {(r, c) for r in range(top, top + 3) for c in range(left, left + 3)}
    cells.discard((row, col))
    return {grid[r][c] for r, c in cells}


def _grid(value: Any, name: str) -> Grid:
    if not isinstance(value, list) or len(value) != SIZE:
        raise PuzzleError(f"inputs.{name} is not a 9x9 grid")
    return [int_list(row, name, SIZE) for row in value]
