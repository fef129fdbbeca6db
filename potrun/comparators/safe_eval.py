"""A stand-in for Python's `eval()` on the text a peer would eval.

Where a peer's scorer calls `eval()` on a model's answer (DocMath's `normalize`, LongDocURL's
pipeline, the LaTeX evaluator's arithmetic), `safe_eval` gives what eval would give for literal and
arithmetic text, and never runs anything else: literals, tuples/lists/sets/dicts, + - * / // % ** ^ &
| << >>, unary + - ~, subscripts by a constant ("[1][0]"), a few pure builtins (abs round min max sum
int float), `math` functions (pow sqrt exp log log10 floor ceil fabs) and constants (pi e tau inf
nan). Anything else counts as "eval raised" (`EvalFailed`), as in the peer, or, where the text names
a builtin or `math` (which eval resolves), as "eval gave an object" (`EvalGaveObject`, a kind of
EvalFailed). Limits keep a hostile text from exhausting memory or time: at most 10,000 characters of
text or of a repeated sequence, integers of at most 14,000 bits (what str() prints), call arguments of at most 100
characters.
"""

from __future__ import annotations

import ast
import builtins
import math
import operator
from collections.abc import Callable
from typing import Any

__all__ = ["EvalFailed", "EvalGaveObject", "safe_eval"]


class EvalFailed(Exception):
    """The peer's eval() would have raised (or we refuse to compute it)."""


class EvalGaveObject(EvalFailed):
    """The peer's eval() would have given an object, not a value: the text names a builtin or
    `math` ("abs", "dict()", "__import__('os')"), which eval resolves where we compute nothing. A
    scorer that tells it from a raise (DocMath: eval raised -> 0; an object -> no match) can."""


_MAX_EVAL_CHARS = 10_000
_MAX_INT_BITS = 14_000  # an int str() can still print (4,300 digits): a result must be writable as JSON
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
_BUILTINS: dict[str, Callable[..., Any]] = {
    "abs": abs,
    "round": round,
    "min": min,
    "max": max,
    "sum": sum,
    "int": int,
    "float": float,
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


def _check_size(x: Any) -> Any:
    if isinstance(x, int) and x.bit_length() > _MAX_INT_BITS:
        raise EvalFailed("integer too large")
    return x


def _check_repetition(a: Any, b: Any) -> None:
    """Refuse "'a' * 10**9": a sequence repeated into something huge."""
    for seq, times in ((a, b), (b, a)):
        sized = isinstance(seq, (str, bytes, list, tuple)) and isinstance(times, int)
        if sized and len(seq) * times > _MAX_EVAL_CHARS:
            raise EvalFailed("sequence repetition too large")


def _safe_pow(a: Any, b: Any) -> Any:
    big = isinstance(a, int) and isinstance(b, int) and b > 0 and abs(a) > 1 and a.bit_length() * b > _MAX_INT_BITS
    if big:
        raise EvalFailed("power too large")
    return a**b


def safe_eval(text: str, *, calls: bool = True) -> Any:
    """What Python's eval(text) gives for literal and arithmetic text; raises EvalFailed otherwise."""
    if not isinstance(text, str) or len(text) > _MAX_EVAL_CHARS:
        raise EvalFailed("not evaluated")
    try:
        tree = ast.parse(text.lstrip(" \t"), mode="eval")
    except Exception as e:  # SyntaxError, ValueError (NUL), RecursionError, MemoryError
        raise EvalFailed(type(e).__name__) from None

    def ev(node: ast.AST) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return _UNARY[type(node.op)](ev(node.operand))
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            left, right = ev(node.left), ev(node.right)
            if isinstance(node.op, ast.Pow):
                return _check_size(_safe_pow(left, right))
            if isinstance(node.op, ast.LShift) and isinstance(right, int) and right > _MAX_INT_BITS:
                raise EvalFailed("shift too large")
            if isinstance(node.op, ast.Mult):
                _check_repetition(left, right)
            return _check_size(_BINOPS[type(node.op)](left, right))
        if isinstance(node, ast.Tuple):
            return tuple(ev(e) for e in node.elts)
        if isinstance(node, ast.List):
            return [ev(e) for e in node.elts]
        if isinstance(node, ast.Set):
            return {ev(e) for e in node.elts}
        if isinstance(node, ast.Dict):
            if any(k is None for k in node.keys):
                raise EvalFailed("dict unpacking")
            return {ev(k): ev(v) for k, v in zip(node.keys, node.values, strict=True)}  # type: ignore[arg-type]
        if calls and isinstance(node, ast.Call) and not node.keywords:
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
            args = [ev(a) for a in node.args]
            if any(isinstance(a, str) and len(a) > 100 for a in args):
                raise EvalFailed("long argument")
            return _check_size(f(*args))
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):  # "[1][0]"
            container, key = ev(node.value), node.slice.value
            if isinstance(container, dict):
                return container[key]  # a KeyError is eval's raise
            if isinstance(container, (list, tuple, str)) and isinstance(key, int):
                return container[key]  # an IndexError too
        if _is_math_constant(node):  # "math.pi"
            return _MATH_CONSTANTS[node.attr]  # type: ignore[attr-defined]
        raise _unevaluated(node)

    try:
        return ev(tree.body)
    except EvalFailed:
        raise
    except Exception as e:  # ZeroDivisionError, OverflowError, TypeError, RecursionError ...
        raise EvalFailed(type(e).__name__) from None
