"""Non-finite answers: what a value claims when it is NaN or an infinity, and whether the gold is that.

Some peers' rules judge a NaN correct (DocMath's `compare_two_numbers`: max/min with NaN keep the gold,
and `log10(1) == 0` passes its power-of-ten rule), so a reward built on them would pay for
`ans = float('nan')` on every record. `paid_for_nonfinite(value, gold)` says when a verdict must not
stand: the value claims a non-finite number (a float, an element of a list, or a text that reads or
evaluates to one: "nan", "inf", "math.nan", "float('inf')"; not "1e999", a finite number past a float)
and the gold is not exactly that
(NaN for NaN, an infinity of the same sign). Rewards and `--strict` apply it; a preset that reproduces
a peer keeps the peer's verdict.
"""

from __future__ import annotations

import math
from typing import Any

from potrun.comparators.bignum import plain_decimal
from potrun.comparators.safe_eval import EvalFailed, safe_eval

__all__ = ["nonfinite_claim", "paid_for_nonfinite"]

_MAX_TEXT = 200  # an answer text longer than this is no number's spelling: not read here


def nonfinite_claim(value: Any) -> float | None:
    """The non-finite number `value` stands for (nan, inf or -inf), or None."""
    if isinstance(value, float):
        return None if math.isfinite(value) else value
    if isinstance(value, (list, tuple)):
        for item in value[:1000]:
            claim = nonfinite_claim(item) if not isinstance(item, (list, tuple)) else None
            if claim is not None:
                return claim
        return None
    if isinstance(value, str) and len(value) <= _MAX_TEXT:
        return _text_claim(value.strip().rstrip("%").strip())
    return None


def _text_claim(text: str) -> float | None:
    """A text's non-finite number: as float() reads it ("nan", "-Infinity"), or as the peers' eval()
    stand-in evaluates it ("math.nan", "float('inf')", "1e308 * 10"). A plain decimal ("1e999") is the
    finite number it spells, however large, not the inf a float reads it as (`bignum`)."""
    if plain_decimal(text) is not None:
        return None
    try:
        read = float(text)
    except ValueError:
        try:
            read = safe_eval(text)
        except EvalFailed:
            return None
    return read if type(read) is float and not math.isfinite(read) else None


def _same_nonfinite(claim: float, gold: Any) -> bool:
    other = nonfinite_claim(gold)
    if other is None:
        return False
    return (math.isnan(claim) and math.isnan(other)) or claim == other


def paid_for_nonfinite(value: Any, gold: Any, answer_text: str | None = None) -> bool:
    """True when `value` (or the answer text it was read from) claims NaN or an infinity and the gold is
    not exactly that: a verdict of "correct" on it must not be paid."""
    for candidate in (value, answer_text):
        claim = nonfinite_claim(candidate)
        if claim is not None and not _same_nonfinite(claim, gold):
            return True
    return False
