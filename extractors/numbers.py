"""Number parsing: one answer span ("$(1,234.5) million", "12.5\\%", "\\frac{3}{4}") to a ParsedNumber.

`parse_number(text)` reads a text that *is* a number, with the decorations models and gold files put
around numbers; it does not look for a number inside prose (`find_numbers` does that, for the
last-number fallback of chain-of-thought extraction). Grammar, in order::

    [approx word] [sign] [currency] [sign] ["("] [currency] [sign] core [× 10^n] [scale] [%] [currency]
    [")" [scale] [%]] [unit]

core: `1,234,567.8`, `1 000`, `1{,}234`, `10,\\!000`, `2,50`, `.5`, `1.5e6`, `3/4`, `\\frac{a}{b}` (also
`\\dfrac`, `\\tfrac`, `\\cfrac`, `\\frac34`), `10^{6}`.

Decisions (peers disagree; see tests/extractors/test_numbers.py):
- `value` is the number as written, sign applied, WITHOUT scale or percent: "3.5 million" -> 3.5.
  `scaled()` applies them.
- Ints stay ints when written as ints ("1,234" -> 1234, "3 × 10^6" -> 3000000); a decimal point,
  an e-exponent, a negative power of ten or a fraction give a float.
- Accounting negatives: "(1,234.5)" -> -1234.5, "($1,234)" -> -1234, "(12.5%)" -> -12.5 with percent.
  An explicit sign inside or before the parentheses wins: "(-5)" -> -5.
- Commas: a comma followed by exactly three digits (integer part not starting with 0) groups thousands:
  "1,234" -> 1234. A single comma otherwise is a decimal comma, as Math-Verify reads it:
  "2,50" -> 2.5, "1000,99" -> 1000.99, "0,111" -> 0.111; but not inside parentheses, where
  "(1,2)" is a pair. Mixed or ragged commas ("3,5,7", "1,234,56", "1,234,5") are not a number: None.
- Scale words (thousand, million, billion, trillion, lakh, crore, plurals, any case) and the
  unambiguous abbreviations mn/mln/MM/bn/bln/tn/k always count. So do the Chinese scales, written
  with or without a space: 千 (thousand), 万 (1e4), 百万 (million), 千万 (1e7), 亿 (1e8), 十亿 (billion),
  万亿 (trillion); "13.08亿元" is 13.08 with the scale 亿 and the unit 元. 千 before a unit of measure
  (千克, 千米, 千瓦...) is that unit's prefix, not a scale. The single letters K, m/M, b/B, t/T
  count only after a currency ("$5m", "€3B"): "5 m" is five metres, "300 K" is 300 kelvin.
- Percent: `%`, `\\%`, "percent", "per cent", "pct", "percentage point(s)", 个百分点.
- Full-width forms (１２３．５％, ＋, －) read as their ASCII letters; the full-width comma "，" does not:
  in Chinese prose it separates clauses ("由30，20" is not 30.2).
- `unit` is the trailing unit text ("42 dollars" -> "dollars", "4kHz" -> "kHz") or else the currency
  symbol or code ("$42" -> "$"). A trailing text that holds a digit, starts with an operator or
  backslash, or is a lone variable (x, n, i, e, pi) makes the whole text not a number.
- Non-finite results and inputs over MAX_NUMBER_CHARS characters give None.
"""

from __future__ import annotations

import math
import re
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal

__all__ = ["MAX_NUMBER_CHARS", "ParsedNumber", "find_numbers", "last_number", "parse_number"]

MAX_NUMBER_CHARS = 512  # an answer span longer than this is prose, not a number
_MAX_DIGITS = 4000  # int() refuses more than 4300 digits; stay below it
_MAX_EXP = 400

SCALES: dict[str, float] = {
    "thousand": 1e3,
    "lakh": 1e5,
    "lac": 1e5,
    "million": 1e6,
    "crore": 1e7,
    "billion": 1e9,
    "trillion": 1e12,
    "万": 1e4,
    "千万": 1e7,
    "亿": 1e8,
}
_CJK_SCALES = {  # as written -> canonical name (an English word where there is one)
    "万亿": "trillion",
    "十亿": "billion",
    "千万": "千万",
    "百万": "million",
    "亿": "亿",
    "万": "万",
    "千": "thousand",
}
_ABBREVIATIONS = {
    "k": "thousand",
    "K": "thousand",
    "mn": "million",
    "mln": "million",
    "MM": "million",
    "bn": "billion",
    "bln": "billion",
    "tn": "trillion",
}
_LETTERS_AFTER_CURRENCY = {"k": "thousand", "m": "million", "b": "billion", "t": "trillion"}


# Full-width ASCII forms (U+FF01..U+FF5E) to ASCII, one character for one, so positions in a text
# carry over; not the full-width comma, a clause separator in Chinese prose.
_FULL_WIDTH = {c: c - 0xFEE0 for c in range(0xFF01, 0xFF5F) if c != ord("\uff0c")} | {0x3000: ord(" ")}


def _half_width(text: str) -> str:
    return text.translate(_FULL_WIDTH) if any("\uff01" <= c <= "\uff5e" or c == "\u3000" for c in text) else text


@dataclass(frozen=True, slots=True)
class ParsedNumber:
    """A number as written: `value` has its sign but neither scale nor percent applied."""

    value: int | float
    unit: str | None = None
    scale: str | None = None  # canonical word: "thousand", "million", ...
    scale_factor: float = 1.0
    percent: bool = False

    def scaled(self) -> int | float:
        """value × scale_factor, then ÷ 100 when percent.

        Computed in decimal from repr(value), so "1.1 million" gives 1100000.0, not 1100000.0000000002.
        The result is an int when value is an int and percent is False, else a float.
        """
        if self.scale_factor == 1.0 and not self.percent:
            return self.value
        if not math.isfinite(self.value):
            return self.value * self.scale_factor / (100 if self.percent else 1)
        exact = Decimal(repr(self.value)) * Decimal(repr(self.scale_factor))
        if self.percent:
            exact /= 100
        if isinstance(self.value, int) and not self.percent:
            return int(exact)
        return float(exact)


# ---------------------------------------------------------------- normalisation

_PLAIN_SUBS = (
    ("\u2212", "-"),
    ("\ufe63", "-"),
    ("\uff0d", "-"),  # unicode minus signs
    ("\u00a0", " "),
    ("\u202f", "\u2009"),
    ("\uff04", "$"),
    ("\uffe5", "¥"),
)
_LATEX_SUBS = (
    ("\\dfrac", "\\frac"),
    ("\\tfrac", "\\frac"),
    ("\\cfrac", "\\frac"),
    ("{,}", ","),
    ("\\!", ""),
    ("\\,", "\u2009"),
    ("\\;", " "),
    ("\\:", " "),
    ("\\ ", " "),
    ("\\%", "%"),
    ("\\$", "$"),
    ("\\times", "×"),
    ("\\cdot", "·"),
    ("\\left", ""),
    ("\\right", ""),
    ("^\\circ", "°"),
    ("^{\\circ}", "°"),
    ("\\circ", "°"),
    ("\\euro", "€"),
    ("\\pounds", "£"),
)
_TEXT_CMD = re.compile(r"\\(?:text|textrm|textup|textnormal|mathrm|mbox|textbf|mathbf|operatorname)\s*\{([^{}]*)\}")
_LEAD_APPROX = re.compile(r"(?:approximately|approx\.?|about|around|roughly|≈|~|=)\s*", re.I)
_TRAIL_PUNCT = ".,;:!? \t\r\n"


def _strip_wrappers(s: str) -> str:
    """Peel `$…$`, `$$…$$`, `\\(…\\)`, `\\[…\\]`, `**…**`, `\\boxed{…}` that wrap the whole text."""
    for _ in range(4):  # a few nested layers at most
        s = s.strip().rstrip(_TRAIL_PUNCT)
        if len(s) >= 2 and s[0] == "$" and s[-1] == "$":
            s = s.strip("$")
        elif (s.startswith(("\\(", "\\[")) and s.endswith(("\\)", "\\]"))) or (
            len(s) >= 4 and s.startswith("**") and s.endswith("**")
        ):
            s = s[2:-2]
        elif s.startswith(("\\boxed{", "\\fbox{")) and s.endswith("}"):
            s = s[s.index("{") + 1 : -1]
        else:
            return s
    return s


def _normalize(text: str) -> str:
    s = _half_width(text)
    for old, new in _PLAIN_SUBS:
        if old in s:
            s = s.replace(old, new)
    if "\\" in s or "{" in s:
        if "\\text" in s or "\\math" in s or "\\mbox" in s or "\\operatorname" in s:
            s = _TEXT_CMD.sub(r" \1 ", s)
        for old, new in _LATEX_SUBS:
            if old in s:
                s = s.replace(old, new)
    s = _strip_wrappers(s)
    m = _LEAD_APPROX.match(s)
    if m:
        s = s[m.end() :]
    return s


# ---------------------------------------------------------------- grammar pieces

_SIGN = re.compile(r"\s*([+-])\s*")
_CURRENCY_WORDS = r"US\$|HK\$|A\$|C\$|S\$|NZ\$|R\$|USD|EUR|GBP|JPY|CNY|RMB|INR|CAD|AUD|CHF|HKD|SGD|KRW|Rs\.?"
_CURRENCY_PREFIX = re.compile(rf"\s*({_CURRENCY_WORDS}|[$€£¥₹])\s*")
_CURRENCY_SUFFIX = re.compile(rf"\s*({_CURRENCY_WORDS}|[$€£¥₹])(?![A-Za-z])")
_GROUP_SEP = "[ \u2009]"
_CORE = re.compile(
    r"\\frac\s*(?:\{\s*(?P<fn>[+-]?\d+(?:\.\d+)?)\s*\}|(?P<fn1>\d))"
    r"\s*(?:\{\s*(?P<fd>[+-]?\d+(?:\.\d+)?)\s*\}|(?P<fd1>\d))"
    r"|(?P<sn>\d+(?:\.\d+)?)\s*/\s*(?P<sd>\d+(?:\.\d+)?)(?![\d.,])"
    r"|(?P<int>[1-9]\d{0,2}(?:,\d{3}(?![\d]))+"
    rf"|[1-9]\d{{0,2}}(?:{_GROUP_SEP}\d{{3}}(?![\d]))+"
    r"|\d+)?"
    r"(?:\.(?P<dec>\d+))?(?:[eE](?P<exp>[+-]?\d+))?"
)
_DECIMAL_COMMA = re.compile(r",(\d+)(?![\d,.])")
_POWER = r"(?:\^|\*\*)\s*(?:\{\s*([+-]?\d+)\s*\}|\(\s*([+-]?\d+)\s*\)|([+-]?\d+))"
_SCI = re.compile(r"\s*(?:×|[xX*·])\s*10\s*" + _POWER)
_BARE_POWER = re.compile(r"\s*" + _POWER)
_SCALE_WORD = re.compile(r"\s*(thousand|million|billion|trillion|lakh|lac|crore)s?(?![A-Za-z])", re.I)
# longest first; 千 before a unit of measure is its prefix (千克 kg, 千米 km, 千瓦 kW...), not "thousand"
_CJK_SCALE_WORDS = "万亿|十亿|千万|百万|亿|万|千(?![克米瓦焦帕卡赫字])"
_CJK_SCALE = re.compile(rf"\s*({_CJK_SCALE_WORDS})")
_SCALE_ABBR = re.compile(r"\s*(mn|mln|MM|bn|bln|tn|k)(?![A-Za-z])")
_SCALE_LETTER = re.compile(r"\s*([kKmMbBtT])(?![A-Za-z])")
_PERCENT = re.compile(
    r"\s*(?:%|percent(?:age points?)?(?![A-Za-z])|per\s?cent(?![A-Za-z])|pct(?![A-Za-z])"
    r"|percentage points?(?![A-Za-z])|个百分点)",
    re.I,
)
_CLOSE = re.compile(r"\s*\)")
_UNIT_EXPONENT = re.compile(r"\^\{?-?\d+\}?")
_NOT_UNITS = frozenset({"x", "y", "z", "n", "i", "j", "e", "π", "pi", "and", "or", "to", "plus", "minus", "times"})
_UNIT_BAD_START = frozenset("+-*/=<>^_\\,;|&{}[]")


@dataclass(slots=True)
class _Parts:
    """Mutable scratch state of one parse; frozen into a ParsedNumber at the end."""

    neg: bool = False
    explicit_sign: bool = False
    currency: str | None = None
    scale: str | None = None
    percent: bool = False


def parse_number(text: str) -> ParsedNumber | None:
    """Parse a text that is one number (see the module docstring for the grammar); None otherwise."""
    if not isinstance(text, str) or len(text) > MAX_NUMBER_CHARS:
        return None
    s = _normalize(text)
    if not s:
        return None
    parts = _Parts()
    pos = _take_sign(s, 0, parts)
    pos = _take_currency(s, pos, parts)
    if not parts.explicit_sign:
        pos = _take_sign(s, pos, parts)
    paren = s.startswith("(", pos)
    if paren:
        pos = _take_currency(s, pos + 1, parts)
        if not parts.explicit_sign:
            pos = _take_sign(s, pos, parts)
    core = _read_core(s, pos, decimal_comma=not paren)  # "(1,2)" is a pair, not -1.2
    if core is None:
        return None
    value, pos = core
    pos = _take_suffixes(s, pos, parts)
    if paren:
        m = _CLOSE.match(s, pos)
        if m is None:
            return None
        pos = _take_suffixes(s, m.end(), parts)
        if not parts.explicit_sign:
            parts.neg = True  # accounting negative
    unit = _read_unit(s[pos:])
    if unit is False:
        return None
    return _finish(value, parts, unit)


def _finish(value: int | float, parts: _Parts, unit: str | bool | None) -> ParsedNumber | None:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if parts.neg:
        value = -value
    scale = parts.scale
    return ParsedNumber(
        value=value,
        unit=unit if isinstance(unit, str) else parts.currency,
        scale=scale,
        scale_factor=SCALES[scale] if scale else 1.0,
        percent=parts.percent,
    )


def _take_sign(s: str, pos: int, parts: _Parts) -> int:
    m = _SIGN.match(s, pos)
    if m is None:
        return pos
    parts.explicit_sign = True
    parts.neg = m.group(1) == "-"
    return m.end()


def _take_currency(s: str, pos: int, parts: _Parts) -> int:
    m = _CURRENCY_PREFIX.match(s, pos)
    if m is None or parts.currency is not None:
        return pos
    parts.currency = m.group(1)
    return m.end()


def _read_core(s: str, pos: int, *, decimal_comma: bool) -> tuple[int | float, int] | None:
    """The number itself, with a decimal comma or a `× 10^n` / `^n` power; (value, end) or None."""
    m = _CORE.match(s, pos)
    if m is None or m.end() == pos:
        return None
    if m.group("fn") or m.group("fn1"):
        return _fraction(m.group("fn") or m.group("fn1"), m.group("fd") or m.group("fd1")), m.end()
    if m.group("sn"):
        return _fraction(m.group("sn"), m.group("sd")), m.end()
    int_part, dec, exp = m.group("int"), m.group("dec"), m.group("exp")
    if int_part is None and dec is None:
        return None  # a lone "e5"
    digits = (int_part or "0").replace(",", "").replace(" ", "").replace("\u2009", "")
    end = m.end()
    if decimal_comma and dec is None and exp is None and int_part is not None and int_part.isdigit():
        dc = _DECIMAL_COMMA.match(s, end)
        if dc is not None and (len(dc.group(1)) != 3 or int_part.startswith("0")):
            dec, end = dc.group(1), dc.end()
    if len(digits) + len(dec or "") > _MAX_DIGITS:
        return None
    if exp is None:
        sci = _read_power(_SCI, s, end)
        if sci is not None:
            return _apply_power(digits, dec, sci[0]), sci[1]
        if dec is None and digits == "10":  # a bare power of ten: 10^{6}
            bare = _read_power(_BARE_POWER, s, end)
            if bare is not None:
                return _apply_power("1", None, bare[0]), bare[1]
        if dec is None:
            return int(digits), end
    return float(f"{digits}.{dec or 0}e{exp or 0}"), end


def _read_power(pattern: re.Pattern[str], s: str, pos: int) -> tuple[int, int] | None:
    m = pattern.match(s, pos)
    if m is None:
        return None
    exponent = int(m.group(1) or m.group(2) or m.group(3))
    if abs(exponent) > _MAX_EXP:
        return None
    return exponent, m.end()


def _apply_power(digits: str, dec: str | None, exponent: int) -> int | float:
    if dec is None and exponent >= 0:
        scale: int = 10**exponent  # an int to a non-negative int power is an int (typeshed says Any)
        return int(digits) * scale
    return float(f"{digits}.{dec or 0}e{exponent}")


def _fraction(num: str, den: str) -> float:
    d = float(den)
    return float(num) / d if d else math.nan  # nan is refused in _finish


def _take_suffixes(s: str, pos: int, parts: _Parts) -> int:
    """Scale, percent and a trailing currency, each at most once, in that order."""
    if parts.scale is None:
        pos = _take_scale(s, pos, parts)
    if not parts.percent:
        m = _PERCENT.match(s, pos)
        if m is not None:
            parts.percent, pos = True, m.end()
    if parts.currency is None:
        m = _CURRENCY_SUFFIX.match(s, pos)
        if m is not None:
            parts.currency, pos = m.group(1), m.end()
            if parts.scale is None:
                pos = _take_scale(s, pos, parts)
    return pos


def _take_scale(s: str, pos: int, parts: _Parts) -> int:
    m = _SCALE_WORD.match(s, pos)
    if m is not None:
        parts.scale = m.group(1).lower()
        return m.end()
    m = _CJK_SCALE.match(s, pos)
    if m is not None:
        parts.scale = _CJK_SCALES[m.group(1)]
        return m.end()
    m = _SCALE_ABBR.match(s, pos)
    if m is not None:
        parts.scale = _ABBREVIATIONS[m.group(1)]
        return m.end()
    if parts.currency is not None:
        m = _SCALE_LETTER.match(s, pos)
        if m is not None:
            parts.scale = _LETTERS_AFTER_CURRENCY[m.group(1).lower()]
            return m.end()
    return pos


def _read_unit(rest: str) -> str | bool | None:
    """The trailing unit text; None when there is none; False when the rest is not a unit."""
    unit = rest.strip().rstrip(_TRAIL_PUNCT).strip()
    if not unit:
        return None
    if len(unit) > 48 or unit[0] in _UNIT_BAD_START or unit.lower() in _NOT_UNITS:
        return False
    probe = _UNIT_EXPONENT.sub("", unit) if "^" in unit else unit
    if any(c.isdigit() for c in probe) or "=" in unit:
        return False
    if unit.split(None, 1)[0].lower() in _NOT_UNITS:
        return False
    return unit


# ---------------------------------------------------------------- numbers inside prose

_CJK = "\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef"  # CJK scripts and punctuation, full-width forms
_PROSE_NUMBER = re.compile(
    r"(?<![.,])"
    rf"(?<![^\W{_CJK}])"  # not glued to a word ("AZYUK2A" holds no number), but a CJK character is no word
    # boundary: Chinese writes "为327.0亿元" without spaces
    r"(?:\\[dtc]?frac\{-?\d+(?:\.\d+)?\}\{-?\d+(?:\.\d+)?\}"
    r"|\((?:[$€£¥₹]\s?)?(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+\.\d+)\)"  # (1,234) (134.12): accounting
    r"|[-\u2212]?(?:[$€£¥₹]\s?)?"
    r"(?:\d{1,3}(?:,\d{3}(?!\d))+(?:\.\d+)?|\d+(?:\.\d+|,\d{1,2}(?![\d,)\]]))?|\.\d+)"
    r"(?:[eE][+-]?\d+(?!\w))?(?:/\d+(?![\d,]|\.\d))?(?:\s?(?:%|\\%))?"
    r")"
)
_PROSE_SCALE = re.compile(rf"\s(?:thousand|million|billion|trillion)(?![A-Za-z])|\s?(?:{_CJK_SCALE_WORDS})", re.I)
_LAST_TRIES = 8
_DIGIT = re.compile(r"\d")
_FIRST_WINDOW = 512
_WINDOW_MARGIN = 64


def find_numbers(text: str) -> Iterator[tuple[int, int, ParsedNumber]]:
    """Numbers in prose, left to right, as (start, end, ParsedNumber); a following scale word is kept.

    Accounting parentheses count only with a thousands comma or a decimal point ("(1,234)",
    "(134.12)"): a bare "(3)" is more often an equation number than a negative. Linear: one regex
    pass whose quantifiers cannot backtrack into each other. Full-width digits count (positions are
    those of `text`: the half-width copy has the same length).
    """
    text = _half_width(text)
    for m in _PROSE_NUMBER.finditer(text):
        parsed = _parse_match(text, m)
        if parsed is not None:
            yield parsed


def last_number(text: str) -> tuple[int, int, ParsedNumber] | None:
    """The rightmost number in prose (see find_numbers).

    Scans windows from the end, growing fourfold (linear overall), and parses only the last few
    candidates. A match that starts within _WINDOW_MARGIN of a window's start might be the tail of a
    longer number, so it is trusted only once the window reaches the start of the text.
    """
    text = _half_width(text)
    n = len(text)
    window = _FIRST_WINDOW
    while True:
        lo = max(0, n - window)
        if _DIGIT.search(text, lo) is None:  # cheap pre-scan: no digit, no number
            if not lo:
                return None
            window *= 4
            continue
        tail: deque[re.Match[str]] = deque(_PROSE_NUMBER.finditer(text, lo), maxlen=_LAST_TRIES)
        for m in reversed(tail):
            if lo and m.start() < lo + _WINDOW_MARGIN:
                break
            parsed = _parse_match(text, m)
            if parsed is not None:
                return parsed
        if not lo:
            return None
        window *= 4


def _parse_match(text: str, m: re.Match[str]) -> tuple[int, int, ParsedNumber] | None:
    start, end = m.span()
    sm = _PROSE_SCALE.match(text, end)
    if sm is not None:
        end = sm.end()
    parsed = parse_number(text[start:end])
    return (start, end, parsed) if parsed is not None else None
