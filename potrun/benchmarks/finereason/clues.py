"""FineReason's grid-puzzle clue conditions, evaluated without `eval`.

A clue's condition is Python text from the record, such as
`(T[r('Lifealign')][c('times')] < T[r('shingles')][c('times')])`: `T[r(x)][c(y)]` is the cell in the
row holding `x` and the column headed `y` (an empty cell when either is missing). The official
`gridpuzzle_tree.py` compiles it and runs `eval` with no builtins; a condition that raises is False,
one that does not compile makes the whole answer a parsing error (`ClueError`).

Here only the forms the official data uses are evaluated (and, or, not, comparisons, + and -, unary
minus, literals, cells), default deny: any other node counts as a condition that raised (False), as
every other name does in the official environment. A cell keeps the official `CellValue` arithmetic:
`cell + x` and `x + cell` both give a cell of `cell.value + x`, `x - cell` raises, and a cell is
always true.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from potrun.benchmarks.finereason.rules import RulesTooCostly

MAX_CLUE_CHARS = 10_000
MAX_CLUE_DEPTH = 100
CELL_FUNCTION = "get_cell_value"  # the official name of T[r(x)][c(y)] once compiled (a clue may call it)

Table = list[list[Any]]


class ClueError(Exception):
    """A condition the official code cannot compile: its get_answer returns a parsing error."""


class _Raised(Exception):
    """The official eval would raise here: the condition is False."""


@dataclass(frozen=True)
class Cell:
    """A table cell read by a condition (the official CellValue)."""

    value: Any


_COMPARE: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}


def holds(condition: str, table: Table) -> bool:
    """True when the official `evaluate_single_clue(condition, table)` is True."""
    tree = compile_condition(condition)
    try:
        return _truth(_value(tree.body, table))
    except (_Raised, TypeError, ArithmeticError, IndexError, KeyError, ValueError, RecursionError):
        return False


@lru_cache(maxsize=4096)
def compile_condition(condition: str) -> ast.Expression:
    """The condition with each `T[r(x)][c(y)]` turned into `get_cell_value(x, y)`, as the official
    transformer does; ClueError where that fails, RulesTooCostly past the size bounds."""
    if len(condition) > MAX_CLUE_CHARS:
        raise RulesTooCostly(f"a clue of {len(condition)} characters (at most {MAX_CLUE_CHARS})")
    try:
        tree = ast.parse(condition, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
        raise ClueError(f"clue does not compile: {type(exc).__name__}") from None
    if _depth(tree) > MAX_CLUE_DEPTH:
        raise RulesTooCostly(f"a clue nested deeper than {MAX_CLUE_DEPTH}")
    return _CellReads().visit(tree)  # type: ignore[no-any-return]


class _CellReads(ast.NodeTransformer):
    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        self.generic_visit(node)
        inner = node.value
        if not (isinstance(inner, ast.Subscript) and isinstance(inner.value, ast.Name) and inner.value.id == "T"):
            return node
        if not (_called(inner.slice, "r") and _called(node.slice, "c")):
            return node
        row, col = inner.slice, node.slice
        assert isinstance(row, ast.Call) and isinstance(col, ast.Call)
        if not row.args or not col.args:  # the official args[0] raises
            raise ClueError("r() or c() without an argument")
        return ast.Call(func=ast.Name(id=CELL_FUNCTION, ctx=ast.Load()), args=[row.args[0], col.args[0]], keywords=[])


def _called(node: ast.AST, name: str) -> bool:
    """True for a call of `name`; the official `.func.id` raises on a call of anything but a name."""
    if not isinstance(node, ast.Call):
        return False
    if not isinstance(node.func, ast.Name):
        raise ClueError("T[...] indexed by a call of something other than a name")
    return node.func.id == name


def _depth(tree: ast.AST) -> int:
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


def _value(node: ast.expr, table: Table) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.BoolOp):
        return _bool_op(node, table)
    if isinstance(node, ast.Compare):
        return _compare(node, table)
    if isinstance(node, ast.BinOp):
        return _arithmetic(node.op, _value(node.left, table), _value(node.right, table))
    if isinstance(node, ast.UnaryOp):
        return _unary(node.op, _value(node.operand, table))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == CELL_FUNCTION:
        if len(node.args) != 2 or node.keywords:
            raise _Raised
        return cell(_value(node.args[0], table), _value(node.args[1], table), table)
    raise _Raised  # default deny: a form the official data does not use


def _bool_op(node: ast.BoolOp, table: Table) -> Any:
    wanted = isinstance(node.op, ast.Or)  # `or` stops at the first true operand, `and` at the first false
    result: Any = None
    for operand in node.values:
        result = _value(operand, table)
        if _truth(result) == wanted:
            return result
    return result


def _compare(node: ast.Compare, table: Table) -> bool:
    left = _value(node.left, table)
    for op, right_node in zip(node.ops, node.comparators, strict=True):
        compare = _COMPARE.get(type(op))
        if compare is None:
            raise _Raised
        right = _value(right_node, table)
        if not compare(_plain(left), _plain(right)):
            return False
        left = right
    return True


def _arithmetic(op: ast.operator, left: Any, right: Any) -> Any:
    if isinstance(op, ast.Add):
        if isinstance(left, Cell):
            return Cell(left.value + _plain(right))
        if isinstance(right, Cell):  # the official __radd__ adds in its own order
            return Cell(right.value + left)
        return _plain_arithmetic(operator.add, left, right)
    if isinstance(op, ast.Sub):
        if isinstance(left, Cell):
            return Cell(left.value - _plain(right))
        if isinstance(right, Cell):  # CellValue has no __rsub__
            raise _Raised
        return _plain_arithmetic(operator.sub, left, right)
    raise _Raised


def _plain_arithmetic(op: Callable[[Any, Any], Any], left: Any, right: Any) -> Any:
    numbers = (int, float)
    if isinstance(left, numbers) and isinstance(right, numbers):
        return op(left, right)
    if isinstance(left, str) and isinstance(right, str) and op is operator.add:
        return left + right
    raise _Raised


def _unary(op: ast.unaryop, operand: Any) -> Any:
    if isinstance(op, ast.Not):
        return not _truth(operand)
    if isinstance(op, ast.USub | ast.UAdd) and isinstance(operand, int | float):
        return -operand if isinstance(op, ast.USub) else +operand
    raise _Raised  # a cell has no unary minus


def cell(row_key: Any, column_key: Any, table: Table) -> Cell:
    """The cell in the first row (below the headers) holding `row_key`, in the column headed
    `column_key`; an empty cell when either is missing."""
    row_key, column_key = _plain(row_key), _plain(column_key)
    row = next((i for i in range(1, len(table)) if row_key in table[i]), -1)
    column = table[0].index(column_key) if column_key in table[0] else -1
    if row == -1 or column == -1:
        return Cell("")
    return Cell(table[row][column])


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, Cell) else value


def _truth(value: Any) -> bool:
    return True if isinstance(value, Cell) else bool(value)
