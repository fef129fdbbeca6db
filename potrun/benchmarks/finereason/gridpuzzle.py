"""Logic grid puzzles' state transition, from FineReason's `gridpuzzle_tree.py` and its prompter's
`get_answer`.

The state is the last `[[ ... ]]` in the text with its line breaks removed, read as a Python list of
rows. A move applies one clue not yet applied: each value the clue names (in quotes, or a whole
number) that belongs to a column's options and is not yet placed there goes into a row whose cell in
that column is empty or already holds it, in every combination; the tables where the clue then holds
are the valid next states (a clue naming no placeable value leaves the table as it is, when it
holds). The columns' options come from `outputs.solution`.

Only the placements that agree with the proposed table are built (the official code builds every
combination, over 80,000 tables for some records of its own data); each clue check costs its length
times the table's rows, and a record whose checks cost more than `MAX_WORK` is RulesTooCostly.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import product
from typing import Any

from potrun.benchmarks.finereason.clues import ClueError, Table, compile_condition, holds
from potrun.benchmarks.finereason.rules import (
    INVALID_MOVE,
    PARSING_ERROR,
    VALID,
    PuzzleError,
    RulesTooCostly,
    Transition,
    Unreadable,
    backtracking,
    decoded,
    field,
    last_nested_list,
    literal,
)

# Work: a clue's characters times the table's rows, summed over the clue checks a record needs (the
# official data needs at most about 500,000; a hostile record stops here within seconds).
MAX_WORK = 20_000_000
_QUOTED = re.compile(r"'([^']+)'")
_WHOLE_NUMBER = re.compile(r"\b\d+\b")


@dataclass(frozen=True)
class GridPuzzle(Transition):
    clues: tuple[tuple[str, str], ...]  # (number, condition), in the record's order
    applied: tuple[str, ...]  # the clues applied to reach the current state, in order
    options: tuple[tuple[Any, tuple[Any, ...]], ...]  # (column header, its values), the official domains

    @classmethod
    def from_record(cls, inputs: Mapping[str, Any], outputs: Mapping[str, Any], status: str) -> GridPuzzle:
        path = field(inputs, "initial_to_current")
        if not isinstance(path, list) or len(path) < 2:
            raise PuzzleError("inputs.initial_to_current does not hold the parent and current states")
        applied = field(inputs, "applied_clues")
        if not isinstance(applied, list):
            raise PuzzleError("inputs.applied_clues is not a list")
        return cls(
            parent=_table(path[-2], "initial_to_current"),
            current=_table(field(inputs, "current"), "current"),
            child=field(inputs, "unsolvable_child"),
            backtrack=backtracking(status),
            clues=_clues(decoded(field(inputs, "clues"), "clues")),
            applied=tuple(applied),
            options=_options(field(outputs, "solution", "outputs")),
        )

    def classify(self, text: str) -> str:
        """The official class of the table written in `text` (what follows "Next state:")."""
        block = last_nested_list(text.replace("\n", ""))
        if block is None:
            return PARSING_ERROR
        try:
            state = literal(block)
            return self.walk(state)
        except (Unreadable, ClueError):
            return PARSING_ERROR

    def move(self, previous: Table, proposed: Any) -> str:
        """Gives "1" when applying one clue not yet applied to `previous` can give `proposed`; else
        "invalid move". From the parent, the clues not yet applied are those before the last."""
        applied = self.applied[:-1] if self.backtrack else self.applied
        shaped = proposed if _shaped_like(proposed, previous) else None
        budget = _Budget()
        reached = False
        for number, condition in self.clues:
            if number not in applied:  # every clue is tried, as the official code builds them all first
                reached = self._reaches(condition, previous, shaped, budget) or reached
        return VALID if reached else INVALID_MOVE

    def _reaches(self, condition: str, table: Table, proposed: Table | None, budget: _Budget) -> bool:
        """True when applying `condition` to `table` can give `proposed` (None: a table of another
        shape, which nothing gives). Only the placements that agree with `proposed` are tried: the
        official code builds every combination, which is the same verdict at a cost that grows as
        rows ** values."""
        placeable = self._placeable(condition, table)
        if not placeable:  # nothing to place: the table stays, if the clue holds on it
            budget.spend(condition, table)
            return holds(condition, table) and proposed == table
        if any(not rows for _, _, rows in placeable):
            return False
        compile_condition(condition)  # the official code evaluates it at least once: ClueError if it cannot
        if proposed is None:
            return False
        column_values: dict[int, list[Any]] = {}
        for value, column, _ in placeable:
            column_values.setdefault(column, []).append(value)
        choices = [
            [
                (row, column, value)
                for row in _rows_to_try(value, rows, [r[column] for r in proposed], column_values[column])
            ]
            for value, column, rows in placeable
        ]
        for combination in product(*choices):
            budget.spend(condition, table)
            candidate = _filling(table, combination, proposed)
            if candidate is not None and proposed == candidate and holds(condition, candidate):
                return True
        return False

    def _placeable(self, condition: str, table: Table) -> list[tuple[Any, int, list[int]]]:
        """(value, column, rows it may go in) for each value the clue names that belongs to a
        column's options and is not yet placed in that column."""
        named = dict.fromkeys(_QUOTED.findall(condition) + _WHOLE_NUMBER.findall(condition))
        headers = table[0]
        placeable: dict[Any, int] = {}
        for text in named:
            value: Any = int(text) if text.isnumeric() else text  # int() raises as the official one does
            for header, values in self.options:
                if value not in values or header not in headers:
                    continue
                column = headers.index(header)
                if all(table[row][column] != value for row in range(1, len(table))):
                    placeable[value] = column
                break
        return [
            (value, column, [row for row in range(1, len(table)) if table[row][column] in ("", value)])
            for value, column in placeable.items()
        ]


def _filling(table: Table, combination: tuple[tuple[int, int, Any], ...], proposed: Table) -> Table | None:
    """The table a combination of (row, column, value) gives, where it can match `proposed`; None
    where it cannot. Two values put in one cell leave the one written last: the official code writes
    them in the order of a Python set of strings, which changes with the interpreter's hash seed from
    run to run, so whichever survivor `proposed` shows is one the official code can give."""
    candidate = [list(row) for row in table]
    cells: dict[tuple[int, int], list[Any]] = {}
    for row, column, value in combination:
        cells.setdefault((row, column), []).append(value)
    for (row, column), values in cells.items():
        survivor = [value for value in values if proposed[row][column] == value]
        if not survivor:
            return None
        candidate[row][column] = survivor[0]
    return candidate


def _rows_to_try(value: Any, rows: list[int], proposed_column: list[Any], column_values: list[Any]) -> list[int]:
    """The rows `value` may go in for the table to become `proposed`: where `proposed` shows it (no
    other value can put it there), else under another value of its column that overwrote it."""
    shown = [row for row in rows if proposed_column[row] == value]
    return shown or [row for row in rows if _among(proposed_column[row], column_values)]


def _among(cell: Any, values: list[Any]) -> bool:
    """`cell in values` by ==, as the official comparison of tables reads cells."""
    return any(cell == value for value in values)


def _shaped_like(proposed: Any, table: Table) -> bool:
    return (
        isinstance(proposed, list)
        and len(proposed) == len(table)
        and all(isinstance(row, list) and len(row) == len(table[0]) for row in proposed)
    )


class _Budget:
    """The work a record's clue checks may take (MAX_WORK)."""

    def __init__(self) -> None:
        self.left = MAX_WORK

    def spend(self, condition: str, table: Table) -> None:
        self.left -= len(condition) * len(table)
        if self.left < 0:
            raise RulesTooCostly(f"checking the grid puzzle's clues would take more than {MAX_WORK} steps")


def _table(value: Any, name: str) -> Table:
    if not isinstance(value, list) or not value or not all(isinstance(row, list) and row for row in value):
        raise PuzzleError(f"inputs.{name} is not a table (a list of rows)")
    width = len(value[0])
    if any(len(row) != width for row in value):
        raise PuzzleError(f"inputs.{name} has rows of different lengths")
    return value


def _clues(value: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, dict):
        raise PuzzleError("inputs.clues is not an object of numbered clues")
    clues = []
    for number, clue in value.items():
        condition = clue.get("conditions") if isinstance(clue, dict) else None
        if not isinstance(condition, str):
            raise PuzzleError(f"inputs.clues.{number} has no conditions text")
        clues.append((number, condition))
    return tuple(clues)


def _options(solution: Any) -> tuple[tuple[Any, tuple[Any, ...]], ...]:
    """Each column's values in the solution, keyed by its header (a repeated header keeps its first
    place and its last column's values, as the official dict does)."""
    if not isinstance(solution, list) or not solution or not all(isinstance(row, list) for row in solution):
        raise PuzzleError("outputs.solution is not a table")
    headers = solution[0]
    options: dict[Any, tuple[Any, ...]] = {}
    try:
        for index, header in enumerate(headers):
            options[header] = tuple(dict.fromkeys(row[index] for row in solution[1:]))
    except (IndexError, TypeError):
        raise PuzzleError("outputs.solution has a row shorter than its headers, or an unhashable cell") from None
    return tuple(options.items())
