"""Game of 24 checker: a gold for `potrun check` (record field `checker`, run trusted in the sandbox).

The answer is an arithmetic expression such as "(8-4)*(7-1)" (a trailing "= 24" is allowed; x, ×
and ÷ are read as * and /). It is correct iff it uses each of NUMBERS exactly once, only + - * / and
parentheses, and evaluates to exactly 24 in exact fractions: 8/(3-8/3) is 24, not 23.999999999999996.
The expression is parsed with `ast` and evaluated here, node by node: never `eval`.

One puzzle per copy: a record carries this source with its own NUMBERS line.
"""

import ast
from fractions import Fraction

NUMBERS = (4, 7, 8, 1)
TARGET = 24
MAX_CHARS = 200

OPERATORS = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
}


def check(answer):
    if not isinstance(answer, str) or len(answer) > MAX_CHARS:
        return False
    text = answer.strip().rstrip(".").replace("×", "*").replace("÷", "/").replace("x", "*")
    left, equals, right = text.partition("=")
    if equals and right.strip() != str(TARGET):
        return False
    try:
        tree = ast.parse(left.strip(), mode="eval")
    except SyntaxError:
        return False
    used = []
    try:
        value = evaluate(tree.body, used)
    except (ValueError, ZeroDivisionError):
        return False
    return sorted(used) == sorted(NUMBERS) and value == TARGET


def evaluate(node, used):
    """The exact value of an expression of integers, + - * / and parentheses; ValueError otherwise."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        used.append(node.value)
        return Fraction(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in OPERATORS:
        return OPERATORS[type(node.op)](evaluate(node.left, used), evaluate(node.right, used))
    raise ValueError(f"not allowed in a 24 expression: {type(node).__name__}")
