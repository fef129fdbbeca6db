"""Sudoku checker: a gold for `potrun check` (record field `checker`, run trusted in the sandbox).

The answer is the solved grid: a list of 9 rows of 9 integers 1-9, or its text ("[[5, 3, 4, ...],
...]", as a chain-of-thought answer gives it), read with `json` or `ast.literal_eval`, never `eval`.
It is correct iff every row, column and 3x3 box holds 1-9 once each, and every given of GIVENS
(0: an empty cell) is kept.

One puzzle per copy: a record carries this source with its own GIVENS.
"""

import ast
import json

GIVENS = [
    [5, 3, 0, 0, 7, 0, 0, 0, 0],
    [6, 0, 0, 1, 9, 5, 0, 0, 0],
    [0, 9, 8, 0, 0, 0, 0, 6, 0],
    [8, 0, 0, 0, 6, 0, 0, 0, 3],
    [4, 0, 0, 8, 0, 3, 0, 0, 1],
    [7, 0, 0, 0, 2, 0, 0, 0, 6],
    [0, 6, 0, 0, 0, 0, 2, 8, 0],
    [0, 0, 0, 4, 1, 9, 0, 0, 5],
    [0, 0, 0, 0, 8, 0, 0, 7, 9],
]
DIGITS = set(range(1, 10))


def check(answer):
    grid = read_grid(answer)
    if grid is None:
        return False
    rows = grid
    columns = [[row[c] for row in grid] for c in range(9)]
    boxes = [
        [grid[r][c] for r in range(br, br + 3) for c in range(bc, bc + 3)]
        for br in range(0, 9, 3)
        for bc in range(0, 9, 3)
    ]
    if any(set(group) != DIGITS for group in rows + columns + boxes):
        return False
    return all(given in (0, grid[r][c]) for r, row in enumerate(GIVENS) for c, given in enumerate(row))


def read_grid(answer):
    """The 9x9 grid of ints, or None when the answer is not one."""
    if isinstance(answer, str):
        if len(answer) > 2000:
            return None
        try:
            answer = json.loads(answer)
        except ValueError:
            try:
                answer = ast.literal_eval(answer.strip())
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                return None
    if not isinstance(answer, (list, tuple)) or len(answer) != 9:
        return None
    grid = []
    for row in answer:
        if not isinstance(row, (list, tuple)) or len(row) != 9:
            return None
        if any(type(cell) is not int for cell in row):
            return None
        grid.append(list(row))
    return grid
