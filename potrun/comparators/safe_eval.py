"""A stand-in for Python's `eval()` on the text a peer would eval.

Where a peer's scorer calls `eval()` on a model's answer (DocMath's `normalize`, LongDocURL's
pipeline, the LaTeX evaluator's arithmetic), `safe_eval` gives what eval would give for literal and
arithmetic text, and never runs anything else: literals, tuples/lists/sets/dicts, + - * / // % ** ^ &
| << >>, unary + - ~, subscripts by a constant ("[1][0]"), a few pure builtins (abs round min max sum
int float), `math` functions (pow sqrt exp log log10 floor ceil fabs) and constants (pi e tau inf
nan). Anything else counts as "eval raised" (`EvalFailed`), as in the peer, or, where the text names
a builtin or `math` (which eval resolves), as "eval gave an object" (`EvalGaveObject`, a kind of
EvalFailed). Limits keep a hostile text from exhausting memory or time, each checked from the
operands *before* the operation runs: at most 10,000 characters of text, nesting at most 100 deep,
values of at most 10,000 characters or elements (a repeated or concatenated sequence's size is known
before it is made), integers of at most 14,000 bits (what str() prints: a power's or a shift's size is
known from its operands), %-format widths and precisions of at most 1,000, round(int, -n) past an int's
digits answered 0 without computing 10**n, sum() of numbers only, call arguments of at most 100
characters; and the whole evaluation at most 1,000,000 steps, charged to the record's budget
(`potrun.budget`).
"""

from __future__ import annotations

import ast
import builtins
import math
import operator
import re
from collections.abc import Callable
from typing import Any

from potrun.budget import OverBudget, charge

__all__ = ["EvalFailed", "EvalGaveObject", "safe_eval"]


class EvalFailed(Exception):
    """The peer's eval() would have raised (or we refuse to compute it)."""


class EvalGaveObject(EvalFailed):
    """The peer's eval() would have given an object, not a value: the text names a builtin or
    `math` ("abs", "dict()", "__import__('os')"), which eval resolves where we compute nothing. A
    scorer that tells it from a raise (DocMath: eval raised -> 0; an object -> no match) can."""


_MAX_EVAL_CHARS = 10_000
_MAX_INT_BITS = 14_000  # an int str() can still print (4,300 digits): a result must be writable as JSON
_MAX_SIZE = 10_000  # any value: characters of a string, elements (nested, repeats counted) of a container
_MAX_DEPTH = 100  # nesting of brackets and operators in the text
_MAX_FORMAT_FIELD = 1_000  # a %-format's width or precision
_MAX_ROUND_DIGITS = 4_400  # round(int, -n) past an int's 4,300 digits (at most 14,000 bits) is 0
_EVAL_UNITS = 1_000_000  # steps one evaluation may take (nodes, and the size of each value it makes)
_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.BitXor: operator.xor,
    ast.BitOr: operator.or_,
    ast.BitAnd: operator.and_,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
}
_UNARY: dict[type, Callable[[Any], Any]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
    ast.Invert: operator.invert,
}
_MATH: dict[str, Callable[..., Any]] = {
    "pow": math.pow,
    "sqrt": math.sqrt,
    "exp": math.exp,
    "log": math.log,
    "log10": math.log10,
    "floor": math.floor,
    "ceil": math.ceil,
    "fabs": math.fabs,
}


_PYTHON_BUILTINS = frozenset(dir(builtins))  # what a bare name resolves to in the peer's eval


_MATH_CONSTANTS = {"pi": math.pi, "e": math.e, "tau": math.tau, "inf": math.inf, "nan": math.nan}


def _is_math_constant(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "math"
        and node.attr in _MATH_CONSTANTS
    )


def _unevaluated(node: ast.AST) -> EvalFailed:
    """Why we compute nothing for `node`: the peer's eval would give an object where the text names a
    builtin or `math` (`EvalGaveObject`), and would raise (NameError...) otherwise."""
    names = (n.id for n in ast.walk(node) if isinstance(n, ast.Name))
    if any(name in _PYTHON_BUILTINS or name == "math" for name in names):
        return EvalGaveObject(type(node).__name__)
    return EvalFailed(type(node).__name__)


class _Meter:
    """Counts an evaluation's steps (each node, and the size of each value made) against its own
    allowance and the record's budget (`potrun.budget`): the whole evaluation is bounded, not only
    each operation."""

    def __init__(self) -> None:
        self.left = _EVAL_UNITS

    def spend(self, units: int) -> None:
        self.left -= units
        if self.left < 0:
            raise EvalFailed("too much work")
        charge(units)


def _size(x: Any) -> int:
    """What a value holds, in steps: a string's characters, an int's 64-bit words, a container's
    elements (nested, a repeated element counted each time it appears), 1 for anything else. Values
    are built under _MAX_SIZE and _MAX_DEPTH, so this is bounded too."""
    if isinstance(x, (str, bytes)):
        return len(x) + 1
    if isinstance(x, int):
        return x.bit_length() // 64 + 1
    if isinstance(x, (list, tuple, set, frozenset)):
        return 1 + sum(_size(item) for item in x)
    if isinstance(x, dict):
        return 1 + sum(_size(k) + _size(v) for k, v in x.items())
    return 1


def _check_size(x: Any) -> Any:
    if isinstance(x, int) and x.bit_length() > _MAX_INT_BITS:
        raise EvalFailed("integer too large")
    if isinstance(x, (str, bytes, list, tuple, set, frozenset, dict)) and _size(x) > _MAX_SIZE + 1:
        raise EvalFailed("value too large")
    return x


def _check_repetition(a: Any, b: Any) -> None:
    """Refuse "'a' * 10**9" or "[[1] * 9999] * 9999": a sequence repeated into something huge (its
    size, nested elements counted, times the count), before it is made."""
    for seq, times in ((a, b), (b, a)):
        sized = isinstance(seq, (str, bytes, list, tuple)) and isinstance(times, int)
        if sized and times > 0 and _size(seq) * times > _MAX_SIZE + times:
            raise EvalFailed("sequence repetition too large")


def _check_concatenation(a: Any, b: Any) -> None:
    same_kind = type(a) is type(b) and isinstance(a, (str, bytes, list, tuple))
    if same_kind and _size(a) + _size(b) > _MAX_SIZE + 2:
        raise EvalFailed("concatenation too large")


def _safe_pow(a: Any, b: Any) -> Any:
    big = isinstance(a, int) and isinstance(b, int) and b > 0 and abs(a) > 1 and a.bit_length() * b > _MAX_INT_BITS
    if big:
        raise EvalFailed("power too large")
    return a**b


def _check_shift(a: Any, b: Any) -> None:
    if isinstance(a, int) and isinstance(b, int) and b > 0 and a.bit_length() + b > _MAX_INT_BITS:
        raise EvalFailed("shift too large")


_PERCENT_FIELD = re.compile(r"%(?:\([^()%]*\))?[-#0 +]*(\*|\d+)?(?:\.(\*|\d*))?")


def _check_percent_format(template: Any, args: Any) -> None:
    """`'%0999999999e' % 1` would build a gigabyte: every width and precision of a %-format (written,
    or taken from the arguments by `*`) is at most _MAX_FORMAT_FIELD, checked before formatting."""
    if not isinstance(template, (str, bytes)):
        return
    text = template if isinstance(template, str) else template.decode("latin-1")
    starred = 0
    for match in _PERCENT_FIELD.finditer(text):
        for field in match.groups():
            if field == "*":
                starred += 1
            elif field and (len(field) > 4 or int(field) > _MAX_FORMAT_FIELD):
                raise EvalFailed("format field too wide")
    if starred:
        values = args if isinstance(args, tuple) else (args,)
        if any(isinstance(v, int) and abs(v) > _MAX_FORMAT_FIELD for v in values):
            raise EvalFailed("format field too wide")


def _bounded_round(args: list[Any]) -> Any:
    """round(x, n): round(int, -n) computes 10**n first (round(5, -10**9): hours); past an int's digits
    the answer is 0, which is given without computing it. A float rounds in constant time."""
    if len(args) == 2 and isinstance(args[0], int) and isinstance(args[1], int) and args[1] < -_MAX_ROUND_DIGITS:
        return 0
    return round(*args)


def _bounded_sum(args: list[Any]) -> Any:
    """sum() of numbers only: a sum of lists concatenates them, quadratic in their count."""
    items = [*args[0], *args[1:]] if args and isinstance(args[0], (list, tuple, set, frozenset)) else None
    if items is None or any(not isinstance(x, (int, float, complex)) for x in items):
        raise EvalFailed("sum of anything but numbers")
    return sum(*args)


_BUILTINS: dict[str, Callable[..., Any]] = {
    "abs": abs,
    "round": _bounded_round,
    "min": min,
    "max": max,
    "sum": _bounded_sum,
    "int": int,
    "float": float,
}


def _max_depth(text: str) -> int:
    """The deepest nesting of brackets in `text`, and the longest run of unary signs ("- - ~ -1")."""
    depth = deepest = run = longest = 0
    for ch in text:
        if ch in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in ")]}":
            depth -= 1
        if ch in "+-~":
            run += 1
            longest = max(longest, run)
        elif not ch.isspace():
            run = 0
    return max(deepest, longest)


def _tree_depth(tree: ast.AST) -> int:
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        if deepest > _MAX_DEPTH:
            break
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


def safe_eval(text: str, *, calls: bool = True) -> Any:
    """What Python's eval(text) gives for literal and arithmetic text; raises EvalFailed otherwise.

    Each operation's cost is bounded from its operands before it runs (module docstring), and the
    whole evaluation by a count of steps, also charged to the record's budget (`potrun.budget`)."""
    tree = _parsed(text)
    try:
        return _Evaluator(calls).value(tree.body)
    except (EvalFailed, OverBudget):
        raise
    except Exception as e:  # ZeroDivisionError, OverflowError, TypeError, RecursionError ...
        raise EvalFailed(type(e).__name__) from None


def _parsed(text: str) -> ast.Expression:
    """The text's expression tree, its size and nesting checked before and after parsing."""
    if not isinstance(text, str) or len(text) > _MAX_EVAL_CHARS:
        raise EvalFailed("not evaluated")
    charge(len(text))
    if _max_depth(text) > _MAX_DEPTH:
        raise EvalFailed("nested too deep")
    try:
        tree = ast.parse(text.lstrip(" \t"), mode="eval")
    except Exception as e:  # SyntaxError, ValueError (NUL), RecursionError, MemoryError
        raise EvalFailed(type(e).__name__) from None
    if _tree_depth(tree) > _MAX_DEPTH:
        raise EvalFailed("nested too deep")
    return tree


class _Evaluator:
    """One evaluation: each node's value, every value made checked for size and its size spent."""

    def __init__(self, calls: bool) -> None:
        self.calls = calls
        self.meter = _Meter()

    def made(self, x: Any) -> Any:
        """A value just made: within its size, and its size spent."""
        self.meter.spend(_size(_check_size(x)))
        return x

    def value(self, node: ast.AST) -> Any:
        self.meter.spend(1)
        if isinstance(node, ast.Constant):
            return self.made(node.value)
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return self.made(_UNARY[type(node.op)](self.value(node.operand)))
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return self.made(self._binary(node))
        if isinstance(node, (ast.Tuple, ast.List, ast.Set, ast.Dict)):
            return self.made(self._container(node))
        if self.calls and isinstance(node, ast.Call) and not node.keywords:
            return self.made(self._call(node))
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):  # "[1][0]"
            container, key = self.value(node.value), node.slice.value
            if isinstance(container, dict):
                return container[key]  # a KeyError is eval's raise
            if isinstance(container, (list, tuple, str)) and isinstance(key, int):
                return container[key]  # an IndexError too
        if _is_math_constant(node):  # "math.pi"
            return _MATH_CONSTANTS[node.attr]  # type: ignore[attr-defined]
        raise _unevaluated(node)

    def _binary(self, node: ast.BinOp) -> Any:
        """An operation, its cost bounded from its operands before it runs."""
        left, right = self.value(node.left), self.value(node.right)
        if isinstance(node.op, ast.Pow):
            return _safe_pow(left, right)
        if isinstance(node.op, ast.LShift):
            _check_shift(left, right)
        if isinstance(node.op, ast.Mult):
            _check_repetition(left, right)
        if isinstance(node.op, ast.Add):
            _check_concatenation(left, right)
        if isinstance(node.op, ast.Mod):
            _check_percent_format(left, right)
        return _BINOPS[type(node.op)](left, right)

    def _container(self, node: ast.Tuple | ast.List | ast.Set | ast.Dict) -> Any:
        if isinstance(node, ast.Tuple):
            return tuple(self.value(e) for e in node.elts)
        if isinstance(node, ast.List):
            return [self.value(e) for e in node.elts]
        if isinstance(node, ast.Set):
            return {self.value(e) for e in node.elts}
        if any(k is None for k in node.keys):
            raise EvalFailed("dict unpacking")
        return {self.value(k): self.value(v) for k, v in zip(node.keys, node.values, strict=True)}  # type: ignore[arg-type]

    def _call(self, node: ast.Call) -> Any:
        """A call of a listed builtin or math function, its arguments short and paid for."""
        fn = node.func
        if isinstance(fn, ast.Name) and fn.id in _BUILTINS:
            f = _BUILTINS[fn.id]
        elif (
            isinstance(fn, ast.Attribute)
            and isinstance(fn.value, ast.Name)
            and fn.value.id == "math"
            and fn.attr in _MATH
        ):
            f = _MATH[fn.attr]
        else:
            raise _unevaluated(node)
        args = [self.value(a) for a in node.args]
        if any(isinstance(a, str) and len(a) > 100 for a in args):
            raise EvalFailed("long argument")
        self.meter.spend(sum(_size(a) for a in args))  # min, max, sum: a pass over their arguments
        return f(args) if f in (_bounded_round, _bounded_sum) else f(*args)
