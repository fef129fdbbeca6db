"""Preset "math": symbolic answers compared with huggingface's math-verify (the `math` extra).

`\\sqrt{8}` is `2\\sqrt{2}`, `\\pi/2` is `\\frac{\\pi}{2}`, `(1, 2)` is `(1,2)`, `x^2+1` is `1+x^2`:
math-verify parses both sides (LaTeX through latex2sympy2_extended, plain numbers and arithmetic
through sympy's `parse_expr`) and `verify` decides, numerically and symbolically.

What it costs the parent, read from math-verify 0.9: parsing and comparing run sympy on the text, so
a short text can ask for a huge computation (`(10^{7})!`, `2^{2^{40}}`). math-verify bounds each
step with `signal.alarm` (whole seconds, the main thread only; elsewhere it refuses with a
ValueError); this preset uses its options, PARSE_TIMEOUT_S and VERIFY_TIMEOUT_S, and in any other
thread gives the verdict False with that reason rather than run unbounded. The text reaches
`parse_expr`'s `eval` only through math-verify's expression pattern, which admits digits, spaces and
the operators `+ - * / ^ ( ) × ÷`: no name, so no call. Texts over MAX_CHARS are not parsed.
"""

from __future__ import annotations

import re
import threading
from types import MappingProxyType
from typing import Any

from potrun.comparators.common import shown
from potrun.comparators.preset import Preset
from potrun.types import InputError, UsageError, Verdict

__all__ = ["MAX_CHARS", "PARSE_TIMEOUT_S", "PRESET", "VERIFY_TIMEOUT_S"]

PARSE_TIMEOUT_S = 2  # math-verify's parsing_timeout, per parse (signal.alarm: whole seconds)
VERIFY_TIMEOUT_S = 2  # its timeout_seconds, per comparison
MAX_CHARS = 2_000  # a longer answer or gold is not parsed (the verdict is False)
_DELIMITED = ("$", "\\(", "\\[", "\\boxed")
_PLAIN_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d*)(?:\.\d+)?%?")


def _as_text(x: Any) -> str | None:
    """The answer as math-verify reads it: text as it is, a number in its decimal form, a list as a tuple."""
    if isinstance(x, bool) or x is None:
        return None
    if isinstance(x, str):
        return x
    if isinstance(x, (int, float)):
        return repr(x)
    if isinstance(x, list):
        items = [_as_text(item) for item in x]
        return None if None in items else "(" + ", ".join(items) + ")"  # type: ignore[arg-type]
    return None


def _parse(text: str, parse: Any) -> Any:
    """math-verify's parse; a bare LaTeX or symbolic text is read as math (`$...$`), as a gold often is
    written: without the delimiters math-verify would take `2` from `2\\sqrt{2}`."""
    if not any(mark in text for mark in _DELIMITED) and not _PLAIN_NUMBER.fullmatch(text.strip()):
        text = f"${text}$"
    return parse(text, parsing_timeout=PARSE_TIMEOUT_S)


def _judge_math(value: Any, gold: Any) -> Verdict:
    """math-verify's `verify(parse(gold), parse(value))` under its own timeouts (module docstring)."""
    try:
        from math_verify import parse, verify
    except ImportError:
        raise InputError("preset 'math' needs math-verify: pip install 'potrun[math]'") from None
    if threading.current_thread() is not threading.main_thread():  # a silent False would be a wrong verdict
        raise UsageError("preset 'math' runs only in the main thread: math-verify bounds its work with signal.alarm")
    value_text, gold_text = _as_text(value), _as_text(gold)
    if value_text is None or gold_text is None:
        return Verdict(False, f"math: {shown(value)} or {shown(gold)} is not math-verify's text or number")
    if len(value_text) > MAX_CHARS or len(gold_text) > MAX_CHARS:
        return Verdict(False, f"math: an answer over {MAX_CHARS} characters is not parsed")
    parsed_gold, parsed_value = _parse(gold_text, parse), _parse(value_text, parse)
    if not parsed_gold or not parsed_value:
        side = "gold" if not parsed_gold else "answer"
        return Verdict(
            False, f"math: math-verify finds no {side} in {shown(gold_text if side == 'gold' else value_text)}"
        )
    ok = bool(verify(parsed_gold, parsed_value, timeout_seconds=VERIFY_TIMEOUT_S))
    return Verdict(ok, f"math: {shown(parsed_value[-1])} {'equals' if ok else 'is not'} {shown(parsed_gold[-1])}")


PRESET = Preset(
    "math",
    _judge_math,
    MappingProxyType({}),
    "huggingface math-verify parse + verify (symbolic equivalence)",
    main_thread_only=True,
)
