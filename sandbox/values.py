"""Turning whatever a program produced into plain data, inside the sandbox.

Runs in the runner process, under the program's limits: a hostile `__float__` or `__repr__` can only
waste the program's own time. Only known types are converted; anything else is reported, never sent.
"""

from __future__ import annotations

import sys
from decimal import Decimal
from fractions import Fraction
from typing import Any

MAX_ITEMS = 10_000  # elements of a list answer
MAX_INT_BITS = 13_000  # about 4,000 decimal digits: beyond, an integer is reported, not sent
REPR_LIMIT = 200


class Unconvertible(Exception):
    """The answer is not plain data; the message says what it was."""


class TooLarge(Exception):
    """The answer is larger than the limits allow."""


class IntegerTooLong(ValueError):
    """An integer too long to write in decimal: Python's own `str()` refuses it (int_max_str_digits),
    so the program failed to produce a number, as `print(10 ** 100000)` fails."""


def to_plain(value: Any, depth: int = 0) -> Any:
    """int, float (NaN and inf kept), bool, str, None, and lists of these."""
    kind = type(value)
    if kind is bool or kind is float or kind is str or value is None:
        return value
    if kind is int:
        if value.bit_length() > MAX_INT_BITS:
            raise IntegerTooLong(f"integer of {value.bit_length()} bits exceeds the limit for integer string "
                                 f"conversion ({MAX_INT_BITS} bits)")  # fmt: skip
        return value
    if isinstance(value, (list, tuple)):
        return _plain_list(value, depth)
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(value, (numpy.generic, numpy.ndarray)):
        return _plain_numpy(value, numpy, depth)
    if isinstance(value, Fraction):
        return float(value)
    if isinstance(value, Decimal):
        return float(value)
    if kind.__module__.startswith("sympy"):
        return _plain_sympy(value)
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):  # IntEnum and other int subclasses
        return to_plain(int(value), depth)
    if isinstance(value, float):
        return float(value)
    raise Unconvertible(f"answer of type {kind.__name__} is not a number: {bounded_repr(value)}")


def _plain_list(items: Any, depth: int) -> list[Any]:
    if depth > 8:
        raise Unconvertible("answer nested too deeply")
    if len(items) > MAX_ITEMS:
        raise TooLarge(f"list of {len(items)} items")
    return [to_plain(item, depth + 1) for item in items]


def _plain_numpy(value: Any, numpy: Any, depth: int) -> Any:
    if isinstance(value, numpy.ndarray):
        if value.size > MAX_ITEMS:
            raise TooLarge(f"array of {value.size} items")
        if value.dtype.kind not in "biuf":
            raise Unconvertible(f"array of dtype {value.dtype}")
        return _plain_list(value.tolist(), depth) if value.ndim else to_plain(value.item(), depth)
    if value.dtype.kind not in "biuf":
        raise Unconvertible(f"numpy scalar of dtype {value.dtype}")
    return to_plain(value.item(), depth)


def _plain_sympy(value: Any) -> Any:
    if getattr(value, "is_Boolean", False) and value in (True, False):
        return bool(value)
    if getattr(value, "is_Integer", False):
        return to_plain(int(value))
    if getattr(value, "is_number", False) and getattr(value, "is_real", False):
        result = float(value)
        return result
    raise Unconvertible(f"sympy expression is not a real number: {bounded_repr(value)}")


VALUE_TYPES = {bool: "bool", int: "int", float: "float", str: "str", list: "list", type(None): None}


def value_type(value: Any) -> str | None:
    return VALUE_TYPES[type(value)]


def bounded_repr(value: Any, limit: int = REPR_LIMIT) -> str:
    try:
        text = repr(value)
    except Exception as exc:  # a hostile __repr__ is the program's own error
        text = f"<unrepresentable {type(value).__name__}: {type(exc).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."
