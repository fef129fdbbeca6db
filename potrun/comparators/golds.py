"""Reading golds: what a gold value or gold string means before any value is compared with it.

GSM8K-format golds (every preset): a gold string that holds the marker "####" (openai/gsm8k's
`answer`, lm-evaluation-harness's `target`: "...reasoning...\n#### 72") is the text after its LAST
marker, as lm-evaluation-harness's gsm8k task reads it (its exact_match drops everything up to the
last "#### ", "," and "$"; a final "." is dropped too): "#### 1,234" is "1234", "#### -3.5" is "-3.5"
(`gsm8k_gold`). The presets then judge that text as they judge any gold string, except three that
judge a number gold apart from a string: `pot` (`finqa_equal` compares a string gold as a string)
gets the float PoT's GSM8K data stores (72.0, `gsm8k_float`: its precision rule depends on it),
`longdocurl` the int or float as written (`gsm8k_number`: its Integer/Float format), and `default`
the same (GSM8K's answers are exact: "#### 0.5" is the number 0.5, not a gold stated to one decimal
that 0.55 would round to). No peer's own data has such golds, so no reproduced score changes.

A gold string that spells a plain number ("72", "-3.5", "1,234": `plain_number`; verl's ground_truth,
HF datasets' columns) is a number under every preset, as each peer's own data holds its numbers: `pot`
gets the float PoT's data stores, `longdocurl` infers the Integer or Float format from it (without an
`answer_format`); the others read number strings already (docs/comparators.md has the table).

The gold forms of the default rules (`read_gold`; the rules themselves are in
`potrun.comparators.default`): not answerable (None), a truth value (bool), a range (`GoldRange`,
`parse_range`), a choice letter (`Letter`), a number as written (`Num`), a list, or a text (`Text`).
"""

from __future__ import annotations

import numbers
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from potrun.comparators.common import is_number, shown
from potrun.extractors.answer import NO, YES, option_letters
from potrun.extractors.numbers import ParsedNumber, parse_number
from potrun.types import UsageError

__all__ = [
    "GSM8K_MARKER",
    "NO",
    "NOT_ANSWERABLE",
    "YES",
    "GoldRange",
    "Letter",
    "Num",
    "Text",
    "UnreadableGold",
    "gsm8k_float",
    "gsm8k_gold",
    "gsm8k_number",
    "norm_text",
    "num_from_parsed",
    "parse_range",
    "plain_number",
    "read_gold",
]

GSM8K_MARKER = "####"


def gsm8k_gold(text: str) -> str | None:
    """The answer of a GSM8K-format gold, or None when `text` has no "####" marker.

    The text after the last marker, stripped, without "," and "$" and a final "." (what
    lm-evaluation-harness's gsm8k exact_match compares: "...\n#### 1,234" -> "1234", "#### -3.5" ->
    "-3.5"). Whitespace after the marker is optional ("####72" -> "72").
    """
    at = text.rfind(GSM8K_MARKER)
    if at < 0:
        return None
    answer = text[at + len(GSM8K_MARKER) :].strip().replace(",", "").replace("$", "")
    return answer[:-1].rstrip() if answer.endswith(".") else answer


def gsm8k_number(answer: str) -> Any:
    """A GSM8K answer as a number: an int when written as one, else a float; else the text.

    For the presets that judge a number gold apart from a string gold (longdocurl infers its Integer
    or Float format from the gold's type). The gold is trusted data, not a program's object: int() and
    float() of its text are safe."""
    for convert in (int, float):
        try:
            return convert(answer)
        except ValueError:
            continue
    return answer


def gsm8k_float(answer: str) -> Any:
    """A GSM8K answer as the float PoT's GSM8K data stores ("answer": 18.0), else the text.

    The float matters: finqa_equal rounds to the precision str() prints, so 1.98 equals 2.0 (one
    decimal) but not 2 (five)."""
    try:
        return float(answer)
    except ValueError:
        return answer


# A gold string that is a plain number: a sign, digits (or thousands grouped by commas), a decimal part,
# an exponent; what a dataset's loader or a trainer's preprocessing wrote for a number ("72", "-3.5",
# "1,234", "1e-05"). Nothing else: no unit, currency, percent or word, which each preset reads its own way.
_PLAIN_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d*)?(?:[eE][-+]?\d+)?")
PLAIN_NUMBER_CHARS = 100  # longer is no gold a loader wrote, and int() of a long text costs


def plain_number(text: str) -> int | float | None:
    """The number a gold string such as "72", "-3.5" or "1,234" spells (an int when written as one),
    else None: the gold forms the presets that compare a number gold apart from a string gold (`pot`,
    `longdocurl`) read as a number. Surrounding whitespace is allowed; at most PLAIN_NUMBER_CHARS."""
    text = text.strip()
    if not text or len(text) > PLAIN_NUMBER_CHARS or _PLAIN_NUMBER.fullmatch(text) is None:
        return None
    digits = text.replace(",", "")
    if not any(ch.isdigit() for ch in digits.split("e")[0].split("E")[0]):
        return None  # ".e5", "+": the pattern's parts are all optional
    try:
        return int(digits)
    except ValueError:
        return float(digits)


# ------------------------------------------------------------------ the gold forms of the default rules


@dataclass(frozen=True, slots=True)
class Num:
    """A number as written: value, scale word and factor, percent sign, stated decimals."""

    value: int | float
    scale: str | None = None
    factor: float = 1.0
    percent: bool = False
    decimals: int | None = None  # digits after the decimal point, when the gold states them


@dataclass(frozen=True, slots=True)
class GoldRange:
    """An interval gold. Missing bounds are None (unbounded)."""

    low: Num | None
    high: Num | None
    low_closed: bool = True
    high_closed: bool = True

    def describe(self) -> str:
        lo = "-inf" if self.low is None else shown(self.low.value)
        hi = "inf" if self.high is None else shown(self.high.value)
        return f"{'[' if self.low_closed else '('}{lo}, {hi}{']' if self.high_closed else ')'}"


@dataclass(frozen=True, slots=True)
class Letter:
    """A multiple-choice gold: "A".."E", or the letters of a multi-select answer ("BD", sorted)."""

    letter: str


@dataclass(frozen=True, slots=True)
class Text:
    """A text gold, normalised (`norm_text`)."""

    text: str


NOT_ANSWERABLE = frozenset({"not answerable", "unanswerable", "none", "n/a", "no answer"})
_EXPONENT_WRITTEN = re.compile(r"\d[eE][+-]?\d|\^|\\frac|/|×|\\times")
_DECIMALS = re.compile(r"\d[\d,\u2009 ]*[.,](\d+)")
# Its low bound is short: unbounded, each "between" of a long text scanned on to the text's end.
_BETWEEN = re.compile(
    r"\bbetween\s+(?P<lo>.{1,60}?)\s+and\s+(?P<hi>\S+(?:\s+(?:thousand|million|billion|trillion|percent))?)",
    re.I,
)
# Chinese: "答案在2.21%到2.54%之间", "13亿元至14亿元之间", "介于18和21之间": a number with a short unit,
# a connector, another, then 之间 (or 以内, 范围内); "由30%下调至20%" has no 之间 and is no range.
# A bound starts where a number does, never inside one: else each digit of a long run starts a scan to
# its end (a 100,000-digit gold took minutes).
_ZH_BOUND = r"(?<![\d,.])[-+]?\d[\d,]*(?:\.\d+)?[^\d\s到至~～和与—-]{0,4}?"
_ZH_BETWEEN = re.compile(
    rf"(?P<lo>{_ZH_BOUND})\s*(?:到|至|~|～|和|与|—|-)\s*(?P<hi>{_ZH_BOUND})\s*(?:之间|以内|范围内)"
)
_INTERVAL = re.compile(
    r"^\s*(?P<open>[\[(])\s*(?P<lo>[^,;\[\]()]+?)\s*[,;]\s*(?P<hi>[^,;\[\]()]+?)\s*(?P<close>[\])])\s*$"
)


def norm_text(s: str) -> str:
    """NFKC, casefold, trimmed, whitespace collapsed, without surrounding quotes and a final period."""
    s = unicodedata.normalize("NFKC", s).casefold().strip()
    s = " ".join(s.split())
    if len(s) >= 2 and s[0] == s[-1] and s[0] in "\"'`":
        s = s[1:-1].strip()
    return s[:-1].rstrip() if s.endswith(".") else s


def num_from_parsed(parsed: ParsedNumber, text: str | None) -> Num:
    decimals = None
    if text is not None and isinstance(parsed.value, float) and not _EXPONENT_WRITTEN.search(text):
        m = _DECIMALS.search(text)
        if m is not None:
            decimals = len(m.group(1))
    return Num(parsed.value, parsed.scale, parsed.scale_factor, parsed.percent, decimals)


def _bound(x: Any) -> Num | None:
    if x is None:
        return None
    if is_number(x):
        return Num(x)
    if isinstance(x, str):
        parsed = parse_number(x)
        if parsed is not None:
            return num_from_parsed(parsed, x)
    raise ValueError(f"range bound {x!r} is not a number")


def parse_range(text: str) -> GoldRange | None:
    """A range written in text ("an answer between 18% and 21% is correct", "[18, 21]",
    "答案在18%到21%之间均视为正确"), or None."""
    if type(text) is not str:
        raise UsageError(f"parse_range reads a text, not {type(text).__name__}")
    m = _INTERVAL.match(text)
    if m is not None and "[" in text:  # "(a, b)" is more often a pair than an open interval
        lo, hi = parse_number(m.group("lo")), parse_number(m.group("hi"))
        if lo is not None and hi is not None:
            return GoldRange(
                num_from_parsed(lo, m.group("lo")),
                num_from_parsed(hi, m.group("hi")),
                m.group("open") == "[",
                m.group("close") == "]",
            )
    for pattern in (_BETWEEN, _ZH_BETWEEN):
        m = pattern.search(text)
        if m is not None:
            found = _between(m.group("lo").strip(), m.group("hi").strip().rstrip(".,;:!?"))
            if found is not None:
                return found
    return None


def _between(lo_text: str, hi_text: str) -> GoldRange | None:
    """The closed range of two bounds; the low one takes the high one's scale when it has none."""
    lo, hi = parse_number(lo_text), parse_number(hi_text)
    if lo is None or hi is None:
        return None
    low, high = num_from_parsed(lo, lo_text), num_from_parsed(hi, hi_text)
    if low.scale is None and high.scale is not None:  # "between 3 and 4 million"
        low = Num(low.value, high.scale, high.factor, low.percent or high.percent, low.decimals)
    return GoldRange(low, high)


def _range_from_dict(gold: Mapping[str, Any]) -> GoldRange:
    if not ({"min", "max"} & set(gold)):
        raise ValueError("a dict gold needs 'min' and/or 'max'")
    low, high = _bound(gold.get("min")), _bound(gold.get("max"))
    if low is None and high is None:
        raise ValueError("a range gold needs at least one bound")
    inclusive = bool(gold.get("inclusive", True))
    return GoldRange(low, high, inclusive, inclusive)


@lru_cache(maxsize=4096)
def _classify_gold_text(text: str) -> object:
    """What a gold string means: None, bool, GoldRange, Letter, Num or Text (cached: golds repeat)."""
    norm = norm_text(text)
    if norm in NOT_ANSWERABLE:
        return None
    if norm in YES:
        return True
    if norm in NO:
        return False
    rng = parse_range(text)
    if rng is not None:
        return rng
    letters = option_letters(text)
    if letters is not None:
        return Letter(letters)
    parsed = parse_number(text)
    if parsed is not None:
        return num_from_parsed(parsed, text)
    return Text(norm)


class UnreadableGold(ValueError):
    """A gold the default rules cannot read; its message is the verdict's reason."""


def read_gold(gold: Any) -> object:
    """The form of a gold under the default rules: None, bool, list, GoldRange, Letter, Num or Text.

    Raises UnreadableGold for a dict that is not a range and for a type no rule takes."""
    if isinstance(gold, tuple):
        gold = list(gold)
    if isinstance(gold, str):
        return _classify_gold_text(gold)
    if isinstance(gold, Mapping):
        try:
            return _range_from_dict(gold)
        except ValueError as e:
            raise UnreadableGold(f"gold not understood: {e}") from None
    if gold is None or isinstance(gold, (bool, list)):
        return gold
    if is_number(gold):
        return Num(gold)
    if isinstance(gold, numbers.Real):
        return Num(float(gold))
    raise UnreadableGold(f"gold of type {type(gold).__name__} is not supported")
