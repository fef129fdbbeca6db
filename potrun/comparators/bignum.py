"""Numbers past a float: compared exactly as the decimals they are written as, with linear work.

A float reads "1e99999999" and "2e99999999" alike (both inf), and every preset's reading refuses, or
reads as inf, a number of 200,000 digits: the gold "1e99999999" would be paid for any huge answer, and
a correct 200,000-digit answer judged wrong. `exact_verdict(value, gold)` decides before any preset's
rules when either side is a plain decimal (an int, a finite float, or a text such as "-1,234.50e-7")
past a float's range, or when both are plain decimals longer than a number reader takes
(`MAX_NUMBER_CHARS`): equal as written decimals (sign, significant digits, exponent; "1e400" equals
"10e399" and 10**400) is correct, anything else wrong (a float tolerance would call any two such
numbers equal). A side that is no plain decimal while the other is past a float is wrong too: no
preset's float reading of it can be trusted there. At most MAX_EXACT_CHARS (300,000) characters a
number: a longer text is not read as one (the preset's own rules judge it, a text rule may still find
two identical texts equal), and two such numbers cost ~19 million of the record's 50 million units.
"""

from __future__ import annotations

import math
import re
from typing import Any

from potrun.extractors.numbers import MAX_NUMBER_CHARS

__all__ = ["MAX_EXACT_CHARS", "Decimal", "beyond_float", "exact_verdict", "plain_decimal"]

MAX_EXACT_CHARS = 300_000  # two such numbers, charged by the record's budget, stay well inside it
_MAX_INT_BITS = 14_000  # str() of an int is quadratic; ~4,200 digits stays under int's own 4,300 limit
_FLOAT_MAX_EXPONENT = 308  # past 1.8e308 a float is inf...
_FLOAT_MIN_EXPONENT = -324  # ...and below 5e-324 it is 0
# One plain decimal: a sign, digits (commas checked apart), a fraction, an exponent of at most 18
# digits. No nested quantifier: linear on any text.
_PLAIN = re.compile(r"\s*([-+]?)(\d[\d,]*|)(?:\.(\d*))?(?:[eE]([-+]?\d{1,18}))?\s*")

# (negative, significant digits without leading or trailing zeros, exponent of the last digit);
# zero is (False, "", 0).
Decimal = tuple[bool, str, int]


def plain_decimal(value: Any) -> Decimal | None:
    """`value` as an exact decimal, if it is an int (of bounded size), a finite float or a text that
    is one plain decimal number; else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return _from_text(str(value)) if value.bit_length() <= _MAX_INT_BITS else None
    if isinstance(value, float):
        return _from_text(repr(value)) if math.isfinite(value) else None
    if isinstance(value, str) and len(value) <= MAX_EXACT_CHARS:
        return _from_text(value)
    return None


def _from_text(text: str) -> Decimal | None:
    match = _PLAIN.fullmatch(text)
    if match is None:
        return None
    sign, whole, fraction, exponent = match.groups()
    if not whole and not fraction:
        return None  # ".", "+", "e5": no digit
    if "," in whole and not _grouped(whole):
        return None
    digits = whole.replace(",", "") + (fraction or "")
    power = int(exponent or 0) - len(fraction or "")
    significant = digits.lstrip("0")
    if not significant:
        return (False, "", 0)
    kept = significant.rstrip("0")
    return (sign == "-", kept, power + len(significant) - len(kept))


def _grouped(whole: str) -> bool:
    """Thousands grouped as written: 1-3 digits, then groups of exactly three."""
    groups = whole.split(",")
    return 1 <= len(groups[0]) <= 3 and all(len(group) == 3 for group in groups[1:])


def beyond_float(number: Decimal) -> bool:
    """Whether a float cannot hold `number`'s size: it would read as inf, or as 0 though it is not."""
    _negative, digits, power = number
    if not digits:
        return False
    magnitude = power + len(digits) - 1  # the exponent of its first digit
    return magnitude > _FLOAT_MAX_EXPONENT or magnitude < _FLOAT_MIN_EXPONENT


def exact_verdict(value: Any, gold: Any) -> bool | None:
    """The verdict when a side is a plain decimal past a float, or both are too long for the number
    readers (module docstring); None: the preset's own rules decide."""
    exact_value, exact_gold = plain_decimal(value), plain_decimal(gold)
    past = any(number is not None and beyond_float(number) for number in (exact_value, exact_gold))
    if past:
        return exact_value is not None and exact_value == exact_gold
    if exact_value is not None and exact_gold is not None and _long(value) and _long(gold):
        return exact_value == exact_gold
    return None


def _long(value: Any) -> bool:
    return isinstance(value, str) and len(value.strip()) > MAX_NUMBER_CHARS


# A number inside a text, as the presets' readers take one: digits with commas, a fraction and an
# exponent, or a power of ten ("10^{400}", "10**400"). Linear: each is one pass of simple runs.
_NUMBER_IN_TEXT = re.compile(r"\d[\d,]*(?:\.\d*)?(?:[eE][-+]?\d+)?")
_POWER_OF_TEN = re.compile(r"10\s*(?:\^|\*\*)\s*\{?\s*[-+]?(\d+)")


def overflows_in_text(value: Any) -> bool:
    """Whether a text holds a number a float reads as inf or 0 though it is neither (a reading of it
    by a preset's float rules is not the number: two such texts would compare equal whatever they say)."""
    if not isinstance(value, str):
        return False
    for match in _NUMBER_IN_TEXT.finditer(value):
        number = _from_text(match.group())
        if number is not None and beyond_float(number):
            return True
        if number is None and _has_exponent(match.group()):  # an exponent past 18 digits
            return True
    return any(_huge_power(match.group(1)) for match in _POWER_OF_TEN.finditer(value))


def _huge_power(exponent: str) -> bool:
    """Whether 10 to this (decimal, unsigned) exponent is past a float, without int() of a long text."""
    significant = exponent.lstrip("0")
    return len(significant) > 3 or int(significant or "0") > _FLOAT_MAX_EXPONENT


def _has_exponent(token: str) -> bool:
    return "e" in token or "E" in token
