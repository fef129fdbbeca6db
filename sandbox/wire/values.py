"""Turning whatever a program produced into plain data, inside the sandbox.

Runs in the runner process, under the program's limits: a hostile `__float__` or `__repr__` can only
waste the program's own time. Only known types are converted; anything else is reported, never sent.
"""

from __future__ import annotations

import itertools
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


class Budget:
    """How much plain data one answer may still grow by (in characters of its JSON, roughly): the
    whole value is bounded, not each part, so 60 strings of 1 MB do not pass a 1 MB limit."""

    __slots__ = ("left",)

    def __init__(self, size: int) -> None:
        self.left = size

    def spend(self, size: int) -> None:
        self.left -= size
        if self.left < 0:
            raise TooLarge("the answer is larger than the output limit")


def to_plain(value: Any, budget: Budget | None = None, depth: int = 0) -> Any:
    """int, float (NaN and inf kept), bool, str, None, and lists of these, within `budget`.

    Types are checked exactly: a subclass of list or tuple is read through the base type's own length
    and iterator (a lying `__len__` or `__iter__` is never called), and other subclasses are converted
    only where their base type is (an int subclass becomes an int)."""
    if budget is None:
        budget = Budget(1 << 62)
    kind = type(value)
    if kind is bool or kind is float or value is None:
        budget.spend(8)
        return value
    if kind is str:
        budget.spend(len(value) + 2)
        return value
    if kind is int:
        if value.bit_length() > MAX_INT_BITS:
            raise IntegerTooLong(
                f"integer of {value.bit_length()} bits exceeds the limit for integer string "
                f"conversion ({MAX_INT_BITS} bits)"
            )
        budget.spend(max(8, value.bit_length() // 3))
        return value
    if isinstance(value, list):
        return _plain_list(list.__len__(value), list.__iter__(value), budget, depth)
    if isinstance(value, tuple):
        return _plain_list(tuple.__len__(value), tuple.__iter__(value), budget, depth)
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(value, (numpy.generic, numpy.ndarray)):
        return _plain_numpy(value, numpy, budget, depth)
    if isinstance(value, (Fraction, Decimal)):
        return to_plain(float(value), budget, depth)
    if kind.__module__.startswith("sympy"):
        return to_plain(_plain_sympy(value), budget, depth)
    if isinstance(value, int):  # IntEnum and other int subclasses
        return to_plain(int.__index__(value), budget, depth)
    if isinstance(value, float):
        return to_plain(float.__float__(value), budget, depth)
    if isinstance(value, str):
        return to_plain(str.__str__(value), budget, depth)
    raise Unconvertible(f"answer of type {bounded_name(kind)} is not a number: {bounded_repr(value)}")


def _plain_list(size: int, items: Any, budget: Budget, depth: int) -> list[Any]:
    if depth > 8:
        raise Unconvertible("answer nested too deeply")
    if size > MAX_ITEMS:
        raise TooLarge(f"list of {size} items")
    budget.spend(2 + size)
    return [to_plain(item, budget, depth + 1) for item in itertools.islice(items, MAX_ITEMS)]


def _plain_numpy(value: Any, numpy: Any, budget: Budget, depth: int) -> Any:
    if isinstance(value, numpy.ndarray):
        if value.size > MAX_ITEMS:
            raise TooLarge(f"array of {value.size} items")
        if value.dtype.kind not in "biuf":
            raise Unconvertible(f"array of dtype {value.dtype}")
        plain = numpy.ndarray.tolist(value)
        return _plain_list(len(plain), iter(plain), budget, depth) if value.ndim else to_plain(plain, budget, depth)
    if value.dtype.kind not in "biuf":
        raise Unconvertible(f"numpy scalar of dtype {value.dtype}")
    return to_plain(numpy.generic.item(value), budget, depth)


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


def bounded_name(kind: type, limit: int = 100) -> str:
    """A type's name, bounded: a class may be named with a 30 MB string."""
    name: str = type.__dict__["__name__"].__get__(kind)
    return name if len(name) <= limit else name[: limit - 3] + "..."


def bounded_repr(value: Any, limit: int = REPR_LIMIT) -> str:
    try:
        text = repr(value)
    except BaseException as exc:  # a hostile __repr__ is the program's own error
        text = f"<unrepresentable {bounded_name(type(value))}: {bounded_name(type(exc))}>"
    if type(text) is not str:
        text = f"<unrepresentable {bounded_name(type(value))}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."
