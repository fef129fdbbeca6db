"""Comparators: is a value the gold answer?

`compare(value, gold, *, preset="default", **options) -> Verdict(correct, reason)` is pure: no I/O,
no timeouts, no processes, and it never evaluates a program's or a model's text with `eval`.
`value` is what a program returned after the sandbox turned it into plain data (None, bool, int,
float incl. nan/inf, str, list), or an extracted final-answer string.

Presets (the registry `PRESETS`)
--------------------------------
``default``     potrun's own rules, strict and documented below.
``pot``         Program-of-Thoughts `tool.finqa_equal` after `tool.floatify_ans` (the GSM8K/SVAMP/FinQA
                program runs); `cot=True` takes `run_finqa_cot.py`'s text path instead.
``docmath``     DocMath-Eval `utils/evaluation_utils.get_acc` (`normalize` + `compare_two_numbers`).
``tatqa``       TAT-QA exact match (`eval_tatqa/tatqa_metric.TaTQAEmAndF1`, EM only), scale aware.
``longdocurl``  LongDocURL `utils/utils_score_v3.eval_score` with its Integer/Float/String/List/None
                formats, after the `eval()` its pipeline applies to the extracted answer.
``mathqa-rel``  Qwen2.5-Math `evaluation/grader.math_equal` without sympy: string, choice, numeric
                (`numeric_equal`, rel_tol 1e-4, ×100 and ÷100), bracket, list, matrix and equation
                rules; a numeric evaluator stands in for `symbolic_equal`.

GSM8K-format golds (every preset): a gold string that holds the marker "####" (openai/gsm8k's
`answer`, lm-evaluation-harness's `target`: "...reasoning...\n#### 72") is the text after its LAST
marker, as lm-evaluation-harness's gsm8k task reads it (its exact_match drops everything up to the
last "#### ", "," and "$"; a final "." is dropped too): "#### 1,234" is "1234", "#### -3.5" is "-3.5"
(`gsm8k_gold`). The presets then judge that text as they judge any gold string, except two that
judge a number gold apart from a string: `pot` (`finqa_equal` compares a string gold as a string)
gets the float PoT's GSM8K data stores (72.0: its precision rule depends on it), `longdocurl` the
int or float as written (its Integer/Float format). No peer's own data has such golds, so no
reproduced score changes.

Each preset's function docstring names the peer function it reproduces and its known leniencies.
Peer presets re-implement the peer's own (sometimes buggy) text normalisation; they do not use
potrun's number parser. Where a peer would `eval()` a string, a literal/arithmetic evaluator stands
in (`_safe_eval`): literals, tuples/lists/sets/dicts, + - * / // % ** ^ & | <<, a few pure
builtins and `math` functions; anything else counts as "eval raised", as in the peer.

Default rules (preset "default")
--------------------------------
Gold forms, recognised in this order:

1. None, or a string "not answerable" / "unanswerable" / "none" / "n/a" / "no answer" (any case):
   correct iff the value is None or one of those strings.
2. bool, or a string yes/no/true/false: correct iff the value is a bool or a yes/no/true/false
   string of the same truth. A number is never a bool (1 is not True).
3. A range: a dict {"min": a, "max": b} (either bound may be missing; bounds are numbers or
   number strings), a string containing "between A and B", or a bracketed interval "[A, B]",
   "[A, B)", "(A, B]" (a fully open "(A, B)" is not a range: it is more often a pair). Correct
   iff the value is a number inside it; a closed bound also accepts a value equal to it under the
   number rule.
4. A multiple-choice letter "A".."E" or "(A)".."(E)": the value must be that letter, optionally in
   parentheses or followed by a period, any case.
5. A number: int, float, or a string that `potrun.extractors.numbers.parse_number` reads as one
   number ("12.50", "12.5%", "$3.5 million", "(1,234)", "\\frac{3}{4}").
6. A list (or tuple): the value must be a list of the same length whose elements match in order
   under these same rules; `unordered=True` matches them as a multiset.
7. Any other string: the value must be a string equal after NFKC, casefold, trimming, collapsing
   whitespace, and dropping surrounding quotes and a final period.

The number rule. Let v be the value (a number, or a string parse_number reads) and g the gold,
both *as written*: "12.5%" is 12.5 with a percent sign, "3.5 million" is 3.5 with a scale word.

- NaN never equals anything (either side). inf equals only inf of the same sign.
- A bool value never equals a number. The sign always matters.
- v equals g iff `|v - g| <= max(rel_tol * max(|v|, |g|), abs_tol)` (math.isclose; rel_tol=1e-4,
  abs_tol=0.0 by default: a gold of 0 needs an exact 0), OR the gold is a string written with d >= 1
  digits after its decimal point and `|v - g| <= 0.5 * 10**-d`, computed in decimal on the shortest
  repr of v ("12.50" accepts 12.495 ... 12.505; "12" states no precision and gets only rel_tol).
- Two whole numbers (ints, or floats without a fraction, below 2**53) get no rel_tol: they must be
  equal (or within abs_tol). rel_tol is for floating-point noise, and 1538754 is not 1538832 even
  though they are within 1e-4 of each other (a real SVAMP case).
- Percent: the % sign is a unit; numbers are compared as written (12.5% equals 12.5). 0.125 vs 12.5
  (or vs "12.5%") is wrong unless `percent=True`, which also accepts v*100 and v/100.
- Scale words: not applied unless `scale=True` ("3.5 million" vs 3500000 is wrong; with
  scale=True both sides are multiplied out and the gold's stated precision scales with it).
  Without it, scale words that appear on both sides must be the same word. Units and currency
  symbols are ignored ("42 dollars" equals 42).
- `abs_value=True` compares |v| (the PoT SVAMP runner took abs() of every result).

Options of the default: rel_tol, abs_tol, percent, scale, abs_value, unordered.
Unknown presets and options raise `potrun.types.UsageError`; any data gives a Verdict.
"""

from __future__ import annotations

import ast
import math
import numbers
import operator
import re
import string
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from types import MappingProxyType
from typing import Any

from potrun.extractors.numbers import ParsedNumber, parse_number
from potrun.types import UsageError, Value, Verdict

__all__ = [
    "GSM8K_MARKER",
    "PRESETS",
    "GoldRange",
    "Preset",
    "compare",
    "compare_many",
    "gsm8k_gold",
    "longdocurl_score",
    "parse_range",
    "read_answer",
]


# ================================================================== registry and entry points


@dataclass(frozen=True, eq=False)
class Preset:
    """A named comparator: the function that judges, the options it takes, and what it reproduces."""

    name: str
    judge: Callable[..., Verdict]
    defaults: Mapping[str, Any]
    reproduces: str
    leniencies: tuple[str, ...] = ()
    # How the preset takes a GSM8K-format gold's answer text (module docstring): as text by default.
    gsm8k_answer: Callable[[str], Any] = str
    # What the preset reads in an answer text (`read_answer`); None: it compares the text as it is.
    read: Callable[..., Value] | None = None

    def __call__(self, value: Any, gold: Any, **options: Any) -> Verdict:
        unknown = sorted(set(options) - set(self.defaults))
        if unknown:
            raise UsageError(
                f"preset {self.name!r} takes no option {', '.join(unknown)}; "
                f"it takes: {', '.join(sorted(self.defaults)) or 'none'}"
            )
        if isinstance(gold, str):
            answer = gsm8k_gold(gold)
            if answer is not None:
                gold = self.gsm8k_answer(answer)
        return self.judge(value, gold, **{**self.defaults, **options})


def compare(value: Any, gold: Any, *, preset: str = "default", **options: Any) -> Verdict:
    """Judge `value` against `gold` with the named preset (see the module docstring)."""
    try:
        chosen = PRESETS[preset]
    except (KeyError, TypeError):
        raise UsageError(f"unknown preset {preset!r}; known: {', '.join(PRESETS)}") from None
    return chosen(value, gold, **options)


def compare_many(
    value: Any,
    gold: Any,
    presets: Sequence[str],
    *,
    options: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Verdict]:
    """One verdict per preset, in the order given (`potrun check --compare A,B`).

    `options` maps a preset name to the options for that preset only.
    """
    options = options or {}
    return {name: compare(value, gold, preset=name, **options.get(name, {})) for name in presets}


# ================================================================== GSM8K-format golds

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


def _gsm8k_number(answer: str) -> Any:
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


def _gsm8k_float(answer: str) -> Any:
    """A GSM8K answer as the float PoT's GSM8K data stores ("answer": 18.0), else the text.

    The float matters: finqa_equal rounds to the precision str() prints, so 1.98 equals 2.0 (one
    decimal) but not 2 (five)."""
    try:
        return float(answer)
    except ValueError:
        return answer


# ================================================================== shared helpers


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _isclose(a: float, b: float, rel_tol: float, abs_tol: float) -> bool:
    try:
        return math.isclose(a, b, rel_tol=rel_tol, abs_tol=abs_tol)
    except (OverflowError, TypeError):  # an int too large for a float
        return a == b


def _fmt(x: Any) -> str:
    text = repr(x)
    return text if len(text) <= 60 else text[:57] + "..."


# ================================================================== default preset: gold forms


@dataclass(frozen=True, slots=True)
class _Num:
    """A number as written: value, scale word and factor, percent sign, stated decimals."""

    value: int | float
    scale: str | None = None
    factor: float = 1.0
    percent: bool = False
    decimals: int | None = None  # digits after the decimal point, when the gold states them


@dataclass(frozen=True, slots=True)
class GoldRange:
    """An interval gold. Missing bounds are None (unbounded)."""

    low: _Num | None
    high: _Num | None
    low_closed: bool = True
    high_closed: bool = True

    def describe(self) -> str:
        lo = "-inf" if self.low is None else _fmt(self.low.value)
        hi = "inf" if self.high is None else _fmt(self.high.value)
        return f"{'[' if self.low_closed else '('}{lo}, {hi}{']' if self.high_closed else ')'}"


@dataclass(frozen=True, slots=True)
class _Letter:
    letter: str


@dataclass(frozen=True, slots=True)
class _Text:
    text: str  # normalised


_NOT_ANSWERABLE = frozenset({"not answerable", "unanswerable", "none", "n/a", "no answer"})
_YES = frozenset({"yes", "true"})
_NO = frozenset({"no", "false"})
_LETTER = re.compile(r"^\(?([A-Ea-e])\)?\.?$")
_GOLD_LETTER = re.compile(r"^\(?([A-E])\)?$")
_EXPONENT_WRITTEN = re.compile(r"\d[eE][+-]?\d|\^|\\frac|/|×|\\times")
_DECIMALS = re.compile(r"\d[\d,\u2009 ]*[.,](\d+)")
_BETWEEN = re.compile(
    r"\bbetween\s+(?P<lo>.+?)\s+and\s+(?P<hi>\S+(?:\s+(?:thousand|million|billion|trillion|percent))?)",
    re.I,
)
_INTERVAL = re.compile(
    r"^\s*(?P<open>[\[(])\s*(?P<lo>[^,;\[\]()]+?)\s*[,;]\s*(?P<hi>[^,;\[\]()]+?)\s*(?P<close>[\])])\s*$"
)


def _norm_text(s: str) -> str:
    s = unicodedata.normalize("NFKC", s).casefold().strip()
    s = " ".join(s.split())
    if len(s) >= 2 and s[0] == s[-1] and s[0] in "\"'`":
        s = s[1:-1].strip()
    return s[:-1].rstrip() if s.endswith(".") else s


def _num_from_parsed(parsed: ParsedNumber, text: str | None) -> _Num:
    decimals = None
    if text is not None and isinstance(parsed.value, float) and not _EXPONENT_WRITTEN.search(text):
        m = _DECIMALS.search(text)
        if m is not None:
            decimals = len(m.group(1))
    return _Num(parsed.value, parsed.scale, parsed.scale_factor, parsed.percent, decimals)


def _bound(x: Any) -> _Num | None:
    if x is None:
        return None
    if _is_number(x):
        return _Num(x)
    if isinstance(x, str):
        parsed = parse_number(x)
        if parsed is not None:
            return _num_from_parsed(parsed, x)
    raise ValueError(f"range bound {x!r} is not a number")


def parse_range(text: str) -> GoldRange | None:
    """A range written in text ("an answer between 18% and 21% is correct", "[18, 21]"), or None."""
    m = _INTERVAL.match(text)
    if m is not None and "[" in text:  # "(a, b)" is more often a pair than an open interval
        lo, hi = parse_number(m.group("lo")), parse_number(m.group("hi"))
        if lo is not None and hi is not None:
            return GoldRange(
                _num_from_parsed(lo, m.group("lo")),
                _num_from_parsed(hi, m.group("hi")),
                m.group("open") == "[",
                m.group("close") == "]",
            )
    m = _BETWEEN.search(text)
    if m is not None:
        lo_text = m.group("lo").strip()
        hi_text = m.group("hi").strip().rstrip(".,;:!?")
        lo, hi = parse_number(lo_text), parse_number(hi_text)
        if lo is not None and hi is not None:
            low, high = _num_from_parsed(lo, lo_text), _num_from_parsed(hi, hi_text)
            if low.scale is None and high.scale is not None:  # "between 3 and 4 million"
                low = _Num(low.value, high.scale, high.factor, low.percent or high.percent, low.decimals)
            return GoldRange(low, high)
    return None


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
    """What a gold string means: None, bool, GoldRange, _Letter, _Num or _Text (cached: golds repeat)."""
    norm = _norm_text(text)
    if norm in _NOT_ANSWERABLE:
        return None
    if norm in _YES:
        return True
    if norm in _NO:
        return False
    rng = parse_range(text)
    if rng is not None:
        return rng
    m = _GOLD_LETTER.match(text.strip())
    if m is not None:
        return _Letter(m.group(1))
    parsed = parse_number(text)
    if parsed is not None:
        return _num_from_parsed(parsed, text)
    return _Text(norm)


# ================================================================== reading an answer text

# How the default rules read a value that is text (a chain-of-thought answer): one function per form,
# used by the judges below and by `read_answer`, so what `potrun check` shows as a chain-of-thought
# result's value is what the comparator compared. The forms are disjoint: no text is two of them.


def _read_truth(text: str) -> bool | None:
    """yes/true -> True, no/false -> False (any case, after normalisation), else None."""
    norm = _norm_text(text)
    return True if norm in _YES else False if norm in _NO else None


def _read_letter(text: str) -> str | None:
    """A choice letter "B", "(b)", "B." -> "B", else None."""
    m = _LETTER.match(text.strip())
    return m.group(1).upper() if m is not None else None


def _read_default(text: str, **_options: Any) -> Value:
    """The default rules' reading (`read_answer`): a bool, a choice letter, the number as written, or
    the text itself (a phrase, a list written out, "not answerable": compared as text)."""
    truth = _read_truth(text)
    if truth is not None:
        return truth
    letter = _read_letter(text)
    if letter is not None:
        return letter
    number = parse_number(text)  # as written, with its percent, scale and unit apart
    return number.value if number is not None else text


def read_answer(text: str, *, preset: str = "default", **options: Any) -> Value:
    """What `preset` reads in an answer text, before it compares it with a gold.

    default: a yes/no/true/false text is a bool, "(B)"/"b." the letter "B", a number text the number
    as written, without percent or scale ("1{,}234.5" -> 1234.5, "25%" -> 25, "$3.5 million" -> 3.5:
    `percent=True` and `scale=True` apply them when comparing, and abs_value the absolute value);
    anything else stays the text. pot: `tool.floatify_ans` of the text (a float, else the text), or
    with `cot=True` the last number after "answer is" (`_pot_cot_prediction`). The other presets
    normalise the text their own way when comparing: the text is returned unchanged.
    """
    try:
        chosen = PRESETS[preset]
    except (KeyError, TypeError):
        raise UsageError(f"unknown preset {preset!r}; known: {', '.join(PRESETS)}") from None
    if chosen.read is None:
        return text
    return chosen.read(text, **{**chosen.defaults, **options})


# ================================================================== default preset: judging


@dataclass(frozen=True, slots=True)
class _Opts:
    rel_tol: float
    abs_tol: float
    percent: bool
    scale: bool
    abs_value: bool
    unordered: bool


def _judge_default(
    value: Any,
    gold: Any,
    *,
    rel_tol: float,
    abs_tol: float,
    percent: bool,
    scale: bool,
    abs_value: bool,
    unordered: bool,
) -> Verdict:
    """potrun's strict default (module docstring, "Default rules")."""
    if rel_tol < 0 or abs_tol < 0:
        raise UsageError("rel_tol and abs_tol must be >= 0")
    opts = _Opts(float(rel_tol), float(abs_tol), bool(percent), bool(scale), bool(abs_value), bool(unordered))
    return _judge(value, gold, opts)


def _judge(value: Any, gold: Any, opts: _Opts) -> Verdict:
    if isinstance(gold, tuple):
        gold = list(gold)
    if isinstance(value, tuple):
        value = list(value)
    if isinstance(gold, str):
        gold_form: object = _classify_gold_text(gold)
    elif isinstance(gold, Mapping):
        try:
            gold_form = _range_from_dict(gold)
        except ValueError as e:
            return Verdict(False, f"gold not understood: {e}")
    elif gold is None or isinstance(gold, (bool, list)):
        gold_form = gold
    elif _is_number(gold):
        gold_form = _Num(gold)
    elif isinstance(gold, numbers.Real):
        gold_form = _Num(float(gold))
    else:
        return Verdict(False, f"gold of type {type(gold).__name__} is not supported")

    if gold_form is None:
        return _judge_not_answerable(value)
    if isinstance(gold_form, bool):
        return _judge_bool(value, gold_form)
    if isinstance(gold_form, list):
        return _judge_list(value, gold_form, opts)
    if isinstance(gold_form, _Letter):
        return _judge_letter(value, gold_form.letter)
    if isinstance(gold_form, _Text):
        if not isinstance(value, str):
            return Verdict(False, f"gold is text, value is {type(value).__name__}")
        ok = _norm_text(value) == gold_form.text
        return Verdict(ok, "text equal after normalisation" if ok else "text differs")
    # numbers and ranges
    v = _value_number(value)
    if isinstance(v, Verdict):
        return v
    if isinstance(gold_form, GoldRange):
        return _judge_range(v, gold_form, opts)
    assert isinstance(gold_form, _Num)
    return _judge_number(v, gold_form, opts)


def _judge_not_answerable(value: Any) -> Verdict:
    if value is None:
        return Verdict(True, "gold is not answerable and there is no value")
    if isinstance(value, str) and _norm_text(value) in _NOT_ANSWERABLE:
        return Verdict(True, "gold and value both say not answerable")
    return Verdict(False, f"gold is not answerable, value is {_fmt(value)}")


def _judge_bool(value: Any, gold: bool) -> Verdict:
    if isinstance(value, bool):
        v: bool | None = value
    elif isinstance(value, str):
        v = _read_truth(value)
    else:
        return Verdict(False, f"gold is yes/no, value is {type(value).__name__} (a number is not a bool)")
    if v is None:
        return Verdict(False, f"gold is yes/no, value {_fmt(value)} is not")
    return Verdict(v == gold, "same truth value" if v == gold else "opposite truth value")


def _judge_letter(value: Any, letter: str) -> Verdict:
    if not isinstance(value, str):
        return Verdict(False, f"gold is choice {letter}, value is {type(value).__name__}")
    read = _read_letter(value)
    if read is None:
        return Verdict(False, f"gold is choice {letter}, value {_fmt(value)} is not a choice letter")
    ok = read == letter
    return Verdict(ok, f"choice {read} {'=' if ok else '!='} {letter}")


def _judge_list(value: Any, gold: list[Any], opts: _Opts) -> Verdict:
    if not isinstance(value, list):
        return Verdict(False, f"gold is a list, value is {type(value).__name__}")
    if len(value) != len(gold):
        return Verdict(False, f"list lengths differ: {len(value)} vs {len(gold)}")
    if not opts.unordered:
        for i, (v, g) in enumerate(zip(value, gold)):
            verdict = _judge(v, g, opts)
            if not verdict.correct:
                return Verdict(False, f"element {i}: {verdict.reason}")
        return Verdict(True, "lists equal element by element")
    # unordered: a perfect matching in the bipartite graph "value i matches gold j"
    edges = [[j for j, g in enumerate(gold) if _judge(v, g, opts).correct] for v in value]
    match_of_gold: dict[int, int] = {}

    def augment(i: int, seen: set[int]) -> bool:
        for j in edges[i]:
            if j not in seen:
                seen.add(j)
                if j not in match_of_gold or augment(match_of_gold[j], seen):
                    match_of_gold[j] = i
                    return True
        return False

    for i in range(len(value)):
        if not augment(i, set()):
            return Verdict(False, f"element {i} ({_fmt(value[i])}) has no partner in the gold")
    return Verdict(True, "lists equal as multisets")


def _value_number(value: Any) -> _Num | Verdict:
    if value is None:
        return Verdict(False, "no value")
    if isinstance(value, bool):
        return Verdict(False, "value is a bool, gold is a number (a bool is not a number)")
    if _is_number(value):
        return _Num(value)
    if isinstance(value, str):
        parsed = parse_number(value)
        if parsed is None:
            return Verdict(False, f"value {_fmt(value)} is not a number")
        return _num_from_parsed(parsed, None)
    if isinstance(value, list):
        return Verdict(False, "value is a list, gold is a number")
    if isinstance(value, numbers.Real):  # numpy scalars and the like, when called directly
        return _Num(float(value))
    return Verdict(False, f"value of type {type(value).__name__} is not supported")


def _as_float(x: int | float) -> float:
    try:
        return float(x)
    except OverflowError:
        return math.inf if x > 0 else -math.inf


def _scaled_pair(v: _Num, g: _Num, opts: _Opts) -> tuple[float, float, float] | str:
    """(value, gold, precision multiplier) after scale handling, or the reason they cannot match."""
    if opts.scale:
        return _as_float(v.value) * v.factor, _as_float(g.value) * g.factor, g.factor
    if v.scale is not None and g.scale is not None and v.scale != g.scale:
        return f"scale words differ ({v.scale} vs {g.scale}); scale=True converts them"
    return _as_float(v.value), _as_float(g.value), 1.0


def _candidates(x: float, opts: _Opts) -> list[tuple[float, str]]:
    if opts.abs_value:
        x = abs(x)
    out = [(x, "")]
    if opts.percent:
        out += [(x * 100, " after x100 (percent=True)"), (x / 100, " after /100 (percent=True)")]
    return out


def _within_precision(v: float, g: float, decimals: int, factor: float) -> bool:
    try:
        diff = abs(Decimal(repr(v)) - Decimal(repr(g)))
        return diff <= Decimal(5) * Decimal(10) ** (-(decimals + 1)) * Decimal(repr(factor))
    except (InvalidOperation, ValueError):
        return False


_EXACT_INT_LIMIT = 2.0**53  # below it, a whole-number float is an exact integer


def _numbers_equal(v: float, g: float, decimals: int | None, factor: float, opts: _Opts) -> str | None:
    """Why v equals g ("rel_tol", "precision"), or None."""
    if math.isnan(v) or math.isnan(g):
        return None
    if math.isinf(v) or math.isinf(g):
        return "both infinite" if v == g else None
    if v == g:
        return "exactly equal"
    whole = v.is_integer() and g.is_integer() and abs(g) < _EXACT_INT_LIMIT and abs(v) < _EXACT_INT_LIMIT
    if _isclose(v, g, 0.0 if whole else opts.rel_tol, opts.abs_tol):
        return f"equal within abs_tol={opts.abs_tol:g}" if whole else f"equal within rel_tol={opts.rel_tol:g}"
    if decimals is not None and _within_precision(v, g, decimals, factor):
        return f"equal at the gold's stated precision ({decimals} dp)"
    return None


def _judge_number(v: _Num, g: _Num, opts: _Opts) -> Verdict:
    pair = _scaled_pair(v, g, opts)
    if isinstance(pair, str):
        return Verdict(False, pair)
    if type(v.value) is int and type(g.value) is int and max(abs(v.value), abs(g.value)) >= _EXACT_INT_LIMIT:
        if v.value == g.value and (opts.scale is False or v.factor == g.factor):
            return Verdict(True, "exactly equal")
        if not (opts.percent or opts.abs_value or opts.scale):
            return Verdict(False, f"{_fmt(v.value)} != {_fmt(g.value)} (integers beyond 2**53 compare exactly)")
    vf, gf, factor = pair
    if math.isnan(vf):
        return Verdict(False, "value is NaN (NaN never equals anything)")
    if math.isnan(gf):
        return Verdict(False, "gold is NaN (NaN never equals anything)")
    for cand, how in _candidates(vf, opts):
        why = _numbers_equal(cand, gf, g.decimals, factor, opts)
        if why is not None:
            return Verdict(True, why + how)
    hint = ""
    if (
        not opts.percent
        and gf != 0
        and vf != 0
        and (_isclose(vf * 100, gf, opts.rel_tol, 0) or _isclose(vf / 100, gf, opts.rel_tol, 0))
    ):
        hint = " (equal after x100 or /100: percent=True accepts that)"
    elif not opts.scale and (v.scale or g.scale):
        hint = " (scale words are not applied: scale=True applies them)"
    shown = (vf, gf) if opts.scale else (v.value, g.value)
    return Verdict(False, f"{_fmt(shown[0])} != {_fmt(shown[1])}{hint}")


def _judge_range(v: _Num, rng: GoldRange, opts: _Opts) -> Verdict:
    vf = _as_float(v.value) * (v.factor if opts.scale else 1.0)
    if math.isnan(vf):
        return Verdict(False, "value is NaN (NaN never equals anything)")

    def bound(b: _Num | None) -> float | None:
        return None if b is None else _as_float(b.value) * (b.factor if opts.scale else 1.0)

    lo, hi = bound(rng.low), bound(rng.high)
    for cand, how in _candidates(vf, opts):
        above = lo is None or cand > lo or (rng.low_closed and _isclose(cand, lo, opts.rel_tol, opts.abs_tol))
        below = hi is None or cand < hi or (rng.high_closed and _isclose(cand, hi, opts.rel_tol, opts.abs_tol))
        if above and below:
            return Verdict(True, f"{_fmt(cand)} in {rng.describe()}{how}")
    return Verdict(False, f"{_fmt(vf)} not in {rng.describe()}")


# ================================================================== a stand-in for eval()


class _EvalFailed(Exception):
    """The peer's eval() would have raised (or we refuse to compute it)."""


_MAX_EVAL_CHARS = 10_000
_MAX_INT_BITS = 100_000
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
_MATH = {
    "pow": math.pow,
    "sqrt": math.sqrt,
    "exp": math.exp,
    "log": math.log,
    "log10": math.log10,
    "floor": math.floor,
    "ceil": math.ceil,
    "fabs": math.fabs,
}


def _check_size(x: Any) -> Any:
    if isinstance(x, int) and x.bit_length() > _MAX_INT_BITS:
        raise _EvalFailed("integer too large")
    return x


def _check_repetition(a: Any, b: Any) -> None:
    """Refuse "'a' * 10**9": a sequence repeated into something huge."""
    for seq, times in ((a, b), (b, a)):
        sized = isinstance(seq, (str, bytes, list, tuple)) and isinstance(times, int)
        if sized and len(seq) * times > _MAX_EVAL_CHARS:
            raise _EvalFailed("sequence repetition too large")


def _safe_pow(a: Any, b: Any) -> Any:
    big = isinstance(a, int) and isinstance(b, int) and b > 0 and abs(a) > 1 and a.bit_length() * b > _MAX_INT_BITS
    if big:
        raise _EvalFailed("power too large")
    return a**b


def _safe_eval(text: str, *, calls: bool = True) -> Any:
    """What Python's eval(text) gives for literal and arithmetic text; raises _EvalFailed otherwise."""
    if not isinstance(text, str) or len(text) > _MAX_EVAL_CHARS:
        raise _EvalFailed("not evaluated")
    try:
        tree = ast.parse(text.lstrip(" \t"), mode="eval")
    except Exception as e:  # SyntaxError, ValueError (NUL), RecursionError, MemoryError
        raise _EvalFailed(type(e).__name__) from None

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
                raise _EvalFailed("shift too large")
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
                raise _EvalFailed("dict unpacking")
            return {ev(k): ev(v) for k, v in zip(node.keys, node.values)}  # type: ignore[arg-type]
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
                raise _EvalFailed("call")
            args = [ev(a) for a in node.args]
            if any(isinstance(a, str) and len(a) > 100 for a in args):
                raise _EvalFailed("long argument")
            return _check_size(f(*args))
        raise _EvalFailed(type(node).__name__)

    try:
        return ev(tree.body)
    except _EvalFailed:
        raise
    except Exception as e:  # ZeroDivisionError, OverflowError, TypeError, RecursionError ...
        raise _EvalFailed(type(e).__name__) from None


# ================================================================== preset "pot"

_TQ_EXCLUDE_IN_NUM = "'\"\\$€£¥%(),[]"
_TQ_ONE_NUM = re.compile(r"([+-]?\d+(\.\d+)?)|([+-]?\.\d+)")


def _pot_floatify(ans: Any) -> Any:
    """tool.floatify_ans: None->None, dict->first value, bool->itself, list->float(first) or str(first)."""
    if ans is None:
        return None
    if isinstance(ans, dict):
        return list(ans.values())[0] if ans else None  # the peer raises on {}; nothing to score
    if type(ans) is bool:
        return ans
    if isinstance(ans, (list, tuple)):
        if not ans:
            return None
        try:
            return float(ans[0])
        except Exception:
            return str(ans[0])
    try:
        return float(ans)
    except Exception:
        return str(ans)


def _pot_precision(x: Any) -> int:
    text = str(x)
    return len(text.split(".")[-1]) if "." in text else 5


def _pot_finqa_equal(prediction: Any, reference: Any, include_percentage: bool, is_close: bool) -> Verdict:
    if prediction is None:
        return Verdict(False, "no prediction")
    if type(prediction) is bool:
        want = "yes" if prediction else "no"
        ok = reference == want
        return Verdict(ok, f"bool prediction vs {want!r}: {'equal' if ok else 'differs'}")
    if type(reference) is str or type(prediction) is str:
        ok = prediction == reference
        return Verdict(ok, "string equal" if ok else f"string {_fmt(prediction)} != {_fmt(reference)}")
    try:
        golds = [reference / 100, reference, reference * 100] if include_percentage else [reference]
    except Exception as e:
        return Verdict(False, f"finqa_equal raises {type(e).__name__} on this gold")
    for item in golds:
        try:
            if is_close and math.isclose(item, prediction, rel_tol=0.001):
                return Verdict(True, "isclose rel_tol=0.001")
            precision = min(_pot_precision(prediction), _pot_precision(item))
            if round(prediction, precision) == round(item, precision):
                return Verdict(True, f"equal rounded to {precision} dp")
        except Exception:
            continue
    return Verdict(False, f"{_fmt(prediction)} != {_fmt(reference)} at the shorter precision")


def _tq_extract_one_num(s: Any) -> int | float | None:
    cleaned = "".join(ch for ch in str(s) if ch not in _TQ_EXCLUDE_IN_NUM)
    groups = _TQ_ONE_NUM.findall(cleaned)
    if not groups:
        return None
    num = groups[-1][0]
    if num == "":
        return None
    return float(num) if "." in num else int(num)


def _pot_cot_prediction(text: str) -> Any:
    """run_finqa_cot.py: the text after the last 'answer is', its last number, else yes/no."""
    r = text.split("answer is")[-1].strip()
    ans: Any = _tq_extract_one_num(r)
    if not ans:
        low = r.lower()
        if "yes" in low or "true" in low:
            ans = "yes"
        elif "no" in low or "false" in low:
            ans = "no"
    if ans is None or isinstance(ans, str):
        return ans
    try:
        return float(ans)
    except Exception:
        return None


def _read_pot(text: str, *, cot: bool, **_options: Any) -> Value:
    """What `_judge_pot` compares for an answer text (before abs_value)."""
    read = _pot_cot_prediction(text) if cot else _pot_floatify(text)
    return read if read is None or isinstance(read, (bool, int, float, str)) else text


def _judge_pot(
    value: Any,
    gold: Any,
    *,
    include_percentage: bool | None,
    is_close: bool | None,
    abs_value: bool,
    cot: bool,
) -> Verdict:
    """Program-of-Thoughts `tool.finqa_equal(prediction, reference, include_percentage, is_close)`.

    Program runs (default): the value goes through `tool.floatify_ans` first, and the program runs
    call finqa_equal with include_percentage=False, is_close=False (run_gsm8k.py, run_svamp.py).
    `abs_value=True` applies abs() after floatify_ans, as run_svamp.py does. `cot=True` takes
    run_finqa_cot.py's text path instead: the text after the last "answer is", its last number
    (`extract_one_num_from_str`, which drops $ % , ( ) and reads no exponent), else yes/no; CoT runs
    use include_percentage=True, is_close=True, which are then the defaults.

    Leniencies (PEERS.md 9, 4.1.8): both sides are rounded to the *shorter* of the two precisions
    printed by str() (5 when there is no '.'), so 0.12345678 equals gold 0.12; with
    include_percentage a prediction also matches gold/100 and gold*100; strings must be identical;
    a bool prediction matches only the gold strings 'yes'/'no'.
    """
    if cot and isinstance(value, str):
        prediction = _pot_cot_prediction(value)
        incl = True if include_percentage is None else include_percentage
        close = True if is_close is None else is_close
    else:
        prediction = _pot_floatify(value)
        incl = False if include_percentage is None else include_percentage
        close = False if is_close is None else is_close
    if abs_value and prediction is not None:
        if isinstance(prediction, str):
            return Verdict(False, "abs() of a string: the SVAMP runner raises here")
        prediction = abs(prediction)
    return _pot_finqa_equal(prediction, gold, bool(incl), bool(close))


# ================================================================== preset "docmath"

_DM_DROP = ("£", "€", "¥", "million", "billion", "thousand", "US", "USD", "RMB")
_DM_UNIT_AFTER = re.compile(r"([-+]?(?:[\d,]*\.*\d+)) [^0-9 ]+$")
_DM_UNIT_BEFORE = re.compile(r"[^0-9 ]+ ([-+]?(?:[\d,]*\.*\d+))$")
_DM_SHORT_AFTER = re.compile(r"([-+]?(?:[\d,]*\.*\d+))[^\d]{1,2}$")
_DM_SHORT_BEFORE = re.compile(r"[^-+\d]{1,2}((?:[\d,]*\.*\d+))$")
_DM_IS_NUMBER = re.compile(r"^[-+]?(\d{1,3}(,\d{3})*|(\d+))(\.\d+)?$")
_DM_POW10 = re.compile(r"10\^(-?\d+)")
_DM_OPTION = re.compile(r"\([a-d]\)")


def _dm_normalize(prediction: str) -> Any:
    """DocMath `normalize()`: strip units, money words, %, $; map yes/no; then eval (0 if it fails)."""
    p = prediction.strip().rstrip(".")
    for money in _DM_DROP:
        p = p.replace(money, "")
    if "=" in p:
        p = p.split("=")[-1].strip()
    if "≈" in p:
        p = p.split("≈")[-1].strip()
    for ch in ("`", "%", "$", "°"):
        p = p.replace(ch, "")
    if p in ("true", "yes", "false", "no"):
        p = "True" if p in ("true", "yes") else "False"
    if "True" in p or "False" in p:
        p = "True" if "True" in p else "False"
    if "approximately" in p:
        p = p.replace("approximately", "").strip()
    if " or " in p:
        p = p.split(" or ")[0]
    for pattern in (_DM_UNIT_AFTER, _DM_UNIT_BEFORE, _DM_SHORT_AFTER, _DM_SHORT_BEFORE):
        if pattern.match(p):
            p = pattern.search(p).group(1)  # type: ignore[union-attr]
    if "10^" in p:
        p = _DM_POW10.sub(r"math.pow(10, \1)", p)
    p = p.replace(" x ", "*").replace(" × ", "*")
    if _DM_IS_NUMBER.match(p):
        p = p.replace(",", "")
    if any(opt in p for opt in ("(a)", "(b)", "(c)", "(d)")):
        p = '"' + _DM_OPTION.search(p).group(0) + '"'  # type: ignore[union-attr]
    if not p:
        p = "0"
    try:
        result = _safe_eval(p)
    except _EvalFailed:
        result = 0
    if isinstance(result, (set, tuple)):
        result = list(result)
        if isinstance(result[0], complex):  # IndexError on an empty tuple: get_acc scores 0
            result = [x.real for x in result]
    elif isinstance(result, complex):
        result = result.real
    return result


def _dm_round_up(x: float, decimals: int) -> float:
    factor = 10**decimals
    return math.ceil(x * factor) / factor


def _dm_within_eps(pred: float, gt: float) -> bool:
    eps = abs(gt) * 0.0015
    return gt - eps <= pred <= gt + eps


def _dm_compare_two_numbers(p: Any, gt: Any) -> bool:
    """DocMath `compare_two_numbers`; raises where the peer raises (get_acc then scores 0)."""
    if isinstance(p, (int, float)):  # bool too: it is an int
        pass
    elif isinstance(p, (list, bool, str, tuple, complex, dict)):
        return False
    else:
        raise ValueError(p)
    v1, v2 = max(abs(gt), abs(p)), min(abs(gt), abs(p))
    if v1 != 0 and v2 != 0 and int(math.log10(v1 / v2)) == math.log10(v1 / v2):
        return True
    if v2 <= v1 / 50 and _dm_within_eps(v2 * 100, v1):
        return True
    if v2 <= v1 / 500 and _dm_within_eps(v2 * 1000, v1):
        return True
    if v2 <= v1 / 50000 and _dm_within_eps(v2 * 100000, v1):
        return True
    if _dm_round_up(v1, 3) == _dm_round_up(v2, 3):
        return True
    return _dm_within_eps(p, gt)


def _judge_docmath(value: Any, gold: Any, *, cot: bool | None) -> Verdict:
    """DocMath-Eval `get_acc(prediction, gt, cot)` with `compare_two_numbers` (utils/evaluation_utils.py).

    cot=None picks the peer's path from the value: a string is an extracted CoT answer
    (`normalize()`, and evaluation.py scores 0 when it contains "none"); anything else is an executed
    `solution()` result, converted with float(). A string gold is converted with float(), as the
    CoT evaluator does; a gold must be int, float or bool (the peer asserts).

    Leniencies (PEERS.md 9, 4.1.1-2): absolute values are compared, so the sign never matters; any
    exact power-of-ten ratio matches (5 vs 50, 3.5 vs 3500000); x100, x1000, x100000 within 0.15%;
    both sides rounded *up* to 3 dp (1.2341 vs 1.234); 0.15% relative eps; a prediction that does
    not evaluate becomes 0 (so "abc" matches gold 0); any text containing "True"/"False" is a bool;
    million/billion/thousand are deleted, not multiplied; True counts as 1. NaN matches any nonzero
    gold (max/min with NaN keep the gold). eval() is emulated for literals and arithmetic only.
    """
    if isinstance(gold, str):
        try:
            gold = float(gold)
        except ValueError:
            return Verdict(False, "docmath: gold is not a number")
    if not (isinstance(gold, (int, float))):
        return Verdict(False, f"docmath: gold of type {type(gold).__name__} (the peer asserts int/float/bool)")
    use_cot = isinstance(value, str) if cot is None else cot
    if use_cot and isinstance(value, str) and "none" in value.lower():
        return Verdict(False, "docmath: the extracted answer says none")
    try:
        if use_cot:
            if not isinstance(value, str):
                return Verdict(False, "docmath: normalize() needs a string")
            prediction = _dm_normalize(value)
        else:
            prediction = float(value)
        if isinstance(gold, bool):
            ok = prediction == gold
        elif isinstance(prediction, (str, int, float, bool, list)):
            ok = _dm_compare_two_numbers(prediction, gold)
        else:
            ok = False
    except Exception as e:
        return Verdict(False, f"docmath: get_acc catches {type(e).__name__} and scores 0")
    return Verdict(bool(ok), f"docmath: {_fmt(prediction)} {'matches' if ok else 'does not match'} {_fmt(gold)}")


# ================================================================== preset "tatqa"


def _tq_scale_to_num(scale: str) -> float:
    s = scale.lower()
    for word, num in (
        ("hundred", 100),
        ("thousand", 1000),
        ("million", 1000000),
        ("billion", 1000000000),
        ("percent", 0.01),
    ):
        if word in s:
            return num
    return 1


def _tq_clean_num(text: str) -> str:
    return "".join(ch for ch in str(text) if ch not in _TQ_EXCLUDE_IN_NUM)


def _tq_is_number(text: str) -> bool:
    try:
        words = " ".join(_tq_clean_num(w) for w in text.split()).split()
        if not words:
            return False
        num = float(words[0])
        if math.isnan(num):
            return False
        if len(words) >= 2 and _tq_scale_to_num(words[1]) == 1:
            return False
        return True
    except ValueError:
        return False


_TQ_NEGATIVE = re.compile(r"(\([\d.\s]+\))")
_TQ_PERCENT = re.compile(r"([\d.\s]+%)")
_TQ_WORD_SCALE = re.compile(r"([\d.]+\s?[a-zA-Z]+)")
_TQ_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCT = set(string.punctuation)


def _tq_to_number(text: str) -> float | None:
    num = _tq_extract_one_num(text)
    if num is None:
        return None
    m = _TQ_WORD_SCALE.search(text)
    scale = _tq_scale_to_num(m.group(0).lower()) if m else 1
    negative = -1 if _TQ_NEGATIVE.findall(text.strip()) else 1
    percent = 0.01 if _TQ_PERCENT.findall(text.strip()) else 1
    return round(num * scale * negative * percent, 4)


def _tq_normalize_answer(text: str) -> str:
    parts = []
    for token in text.split(" "):
        t = token.lower()
        if not _tq_is_number(t):
            t = "".join(ch for ch in t if ch not in _PUNCT)
        if _tq_is_number(t):
            t = str(_tq_to_number(t))
        t = " ".join(_TQ_ARTICLES.sub(" ", t).split())
        if t.strip():
            parts.append(t)
    return " ".join(parts).strip()


def _tq_answer_str(answers: list[Any], scale: str) -> list[str]:
    out = []
    for ans in sorted(answers):
        text = str(ans)
        if _tq_is_number(text):
            num = _tq_to_number(text)
            if num is None:
                if scale:
                    text = f"{text} {scale}"
            elif "%" in text:
                text = "%.4f" % num
            else:
                text = "%.4f" % (round(num, 2) * _tq_scale_to_num(scale))
        elif scale:
            text = f"{text} {scale}"
        out.append(text)
    return [" ".join(out)]


def _tq_add_percent_pred(strings: list[str], pred_scale: str, pred: list[Any]) -> list[str]:
    if len(pred) > 1:
        return strings
    text = str(pred[0])
    if not pred_scale and "%" not in text and _tq_is_number(text):
        num = _tq_to_number(text)
        if num is not None:
            strings.append("%.4f" % num)
    return strings


def _judge_tatqa(
    value: Any,
    gold: Any,
    *,
    gold_scale: str | None,
    pred_scale: str,
    answer_type: str | None,
) -> Verdict:
    """TAT-QA exact match: `TaTQAEmAndF1.__call__` in Program-of-Thoughts eval_tatqa/tatqa_metric.py.

    The gold is the dataset's `answer` with `gold_scale` ("", thousand, million, billion, percent)
    and `answer_type` (span, multi-span, arithmetic, count; default: span for a list gold, else
    arithmetic), or a dict {"answer": ..., "scale": ..., "answer_type": ...}; options win over the
    dict. `pred_scale` is the scale the model gave (default ""). Numbers are printed '%.4f' after
    round(x, 2) x scale on each side; a bare prediction also gets its unrounded '%.4f' form
    (`add_percent_pred`), so 0.2212 matches 22.12 percent. EM only (F1 is not a verdict).

    Leniencies and defects (PEERS.md 9, 4.2.3): both sides are rounded to 2 dp before scaling, so
    123.201 equals 123.2; multi-span answers are sorted, so order never matters; "(134.12)" is
    negative but "(1,234)" is +1234 (the regex has no comma); a prediction that is falsy (0, "",
    [], None) scores 0 even when the gold is 0; text is compared after lowercasing and dropping
    punctuation and articles; "1e6" reads as 6 (the number regex has no exponent).
    """
    if isinstance(gold, Mapping):
        if "answer" not in gold:
            return Verdict(False, "tatqa: a dict gold needs 'answer'")
        gold_scale = gold.get("scale", "") if gold_scale is None else gold_scale
        answer_type = gold.get("answer_type") if answer_type is None else answer_type
        gold = gold["answer"]
    gold_scale = gold_scale or ""
    pred_scale = pred_scale or ""
    if answer_type is None:
        answer_type = "span" if isinstance(gold, (list, tuple)) else "arithmetic"
    if not value:
        return Verdict(False, "tatqa: an empty or zero prediction scores 0")
    try:
        if answer_type in ("span", "multi-span"):
            if not isinstance(gold, (list, tuple)):
                return Verdict(False, "tatqa: a span gold must be a list (the peer asserts)")
            gold_answers = list(gold)
        elif answer_type == "count":
            gold_answers = [str(int(gold))]
        else:
            gold_answers = [str(gold)]
        if not gold_answers:
            return Verdict(False, "tatqa: empty gold")
        gold_strings = _tq_answer_str(gold_answers, gold_scale)
        preds = value if isinstance(value, list) else [value]
        pred_strings = _tq_add_percent_pred(_tq_answer_str(preds, pred_scale), pred_scale, preds)
    except Exception as e:
        return Verdict(False, f"tatqa: the metric raises {type(e).__name__} here")
    gold_norm = {_tq_normalize_answer(g) for g in gold_strings}
    for p in pred_strings:
        if _tq_normalize_answer(p) in gold_norm:
            return Verdict(True, f"tatqa: EM on {_fmt(_tq_normalize_answer(p))}")
    shown = [_tq_normalize_answer(p) for p in pred_strings]
    return Verdict(False, f"tatqa: {_fmt(shown)} vs {_fmt(sorted(gold_norm))}")


# ================================================================== preset "longdocurl"

_LD_SUFFIXES = (
    "kg",
    "mm",
    "m",
    "meters",
    "acres",
    "minutes",
    "mile",
    "miles",
    "million",
    "thousand",
    "billion",
)
_LD_PARENS = re.compile(r"\s*\([^)]*\)")
_LD_QUOTES = re.compile(r"^['\"]|['\"]$")
_LD_INT_COMMAS = re.compile(r"\d+,\s*\d+", re.DOTALL)
_LD_EXACT = (
    re.compile(r"\b\d+(-\d+|\s\d+)?\b"),
    re.compile(r"\b\d{4}[-\s]\d{2}[-\s]\d{2}\b"),
    re.compile(r"\b\d{4}[-\s]\d{2}\b"),
    re.compile(r"[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}"),
)


def _ld_clean(s: Any) -> str:
    """get_clean_string: lower, drop commas, character-set rstrip of unit words, drop (...), $ £ %."""
    s = str(s).lower().strip().replace(",", "")
    for suffix in _LD_SUFFIXES:
        if s.endswith(suffix):
            s = s.rstrip(suffix).strip()  # a character-set strip, as in the peer
    s = _LD_PARENS.sub("", s).strip()
    s = _LD_QUOTES.sub("", s).strip()
    s = s.strip().lstrip("$").strip()
    s = s.strip().lstrip("£").strip()
    return s.strip().rstrip("%").strip()


def _ld_is_exact_match(s: str) -> bool:
    return (
        "https://" in s
        or s.endswith((".py", "ipynb"))
        or s.startswith("page")
        or "a.m." in s
        or "p.m." in s
        or any(p.fullmatch(s) for p in _LD_EXACT)
    )


def _levenshtein(a: str, b: str) -> int:
    if len(a) > len(b):
        a, b = b, a
    prev = list(range(len(a) + 1))
    for j, cb in enumerate(b):
        cur = [j + 1]
        for i, ca in enumerate(a):
            cur.append(prev[i] if ca == cb else 1 + min(prev[i], prev[i + 1], cur[-1]))
        prev = cur
    return prev[-1]


def _ld_anls(gt: str, pred: str, threshold: float = 0.5) -> float:
    length = max(len(gt.upper()), len(pred.upper()))
    score = 1.0 - (0.0 if length == 0 else _levenshtein(gt, pred) / length)
    return 0.0 if score <= threshold else score


def _ld_precision(x: Any) -> int:
    text = str(x)
    return len(text.split(".")[-1]) if "." in text else 3


def _ld_is_float_equal(reference: Any, prediction: Any) -> bool:
    """is_float_equal(include_percentage=True, is_close=True); raises where the peer raises."""
    ref = float(str(reference).strip().rstrip("%").strip())
    try:
        pred = float(str(prediction).strip().rstrip("%").strip())
    except Exception:
        return False
    for item in (ref / 100, ref, ref * 100):
        try:
            if math.isclose(item, pred, rel_tol=0.01):
                return True
            precision = max(min(_ld_precision(pred), _ld_precision(item)), 2)
            if round(pred, precision) == round(item, precision):
                return True
        except Exception:
            continue
    return False


def _ld_join_int_commas(s: str) -> str:
    return "".join(part.strip() for part in s.split(",")) if _LD_INT_COMMAS.search(s) else s


def _ld_eval_if_list(x: Any) -> Any:
    if isinstance(x, str) and x.startswith("["):
        try:
            return _safe_eval(x)
        except _EvalFailed:
            return x
    return x


def longdocurl_score(value: Any, gold: Any, answer_format: str) -> float:
    """LongDocURL `eval_score(gt, pred, answer_type)` (utils/utils_score_v3.py): a score in [0, 1]."""
    gt, pred = gold, value
    if answer_format == "Integer":
        try:
            gt = _ld_join_int_commas(_ld_clean(str(gt)))
            gt = int(gt)
        except Exception:
            pass
        try:
            pred = int(_ld_join_int_commas(_ld_clean(str(pred))))
        except Exception:
            pred = ""
        return float(gt == pred)
    if answer_format == "Float":
        gt = _ld_join_int_commas(_ld_clean(str(gt)))
        pred = _ld_join_int_commas(_ld_clean(str(pred)))
        try:
            gt = float(gt)
        except Exception:
            pass
        try:
            pred = float(pred)
        except Exception:
            pred = str(pred)
        try:
            return float(_ld_is_float_equal(gt, pred))
        except Exception:
            return 0.0
    if answer_format in ("String", "None"):
        gt, pred = _ld_clean(gt), _ld_clean(pred)
        return float(gt == pred) if _ld_is_exact_match(gt) else _ld_anls(gt, pred)
    # List (and any other format name, as in the peer's else branch)
    gt, pred = _ld_eval_if_list(gt), _ld_eval_if_list(pred)
    gts = gt if isinstance(gt, list) else [gt]
    preds = pred if isinstance(pred, list) else [pred]
    if not gts:
        return 0.0  # the peer raises IndexError on an empty gold list
    if not preds:
        preds = [""]
    if isinstance(gts[0], dict):
        gts = ["-".join(str(v) for v in d.values()) for d in gts]
    if isinstance(preds[0], dict):
        preds = ["-".join(str(v) for v in d.values()) for d in preds]
    gts = [_ld_clean(a) for a in gts]
    preds = [_ld_clean(a) for a in preds]
    if _isfloat(gts[0]) or _ld_is_exact_match(gts[0]):
        return float("-".join(gts) == "-".join(preds))
    greedy = [max(_ld_anls(g, p) for p in preds) for g in gts]
    return sum(greedy) / len(gts) * min(1, len(gts) / len(preds)) ** 0.5


def _isfloat(x: str) -> bool:
    try:
        float(x)
        return True
    except Exception:
        return False


def _ld_infer_format(gold: Any) -> str:
    if gold is None:
        return "None"
    if _is_number(gold):
        return "Integer" if isinstance(gold, int) else "Float"
    if isinstance(gold, (list, tuple)):
        return "List"
    return "String"


def _judge_longdocurl(
    value: Any,
    gold: Any,
    *,
    answer_format: str | None,
    eval_pred: bool,
    min_score: float,
) -> Verdict:
    """LongDocURL `eval_score(gt, pred, answer_type)` from utils/utils_score_v3.py (score_v3).

    `answer_format`: Integer, Float, String, List or None (the dataset's field; inferred from the
    gold when omitted: None -> "None", int -> Integer, float -> Float, list -> List, else String).
    A gold None means "Not answerable". With `eval_pred` (default, as the pipeline does) a string
    prediction is first eval()'d, a set becoming a list; "Fail to extract" scores 0. LongDocURL
    averages a score in [0, 1] (ANLS for text); the verdict is correct iff score >= min_score
    (default 1.0: exact after cleaning). `longdocurl_score()` gives the score itself.

    Leniencies and defects (PEERS.md 6, 7, 9 4.1.9, 4.2.6): Float uses rel_tol=0.01 and also
    accepts gold/100 and gold*100, and rounds both sides to max(min(decimals), 2); units are
    removed with a character-set rstrip ("5 million" equals "5"); commas are dropped, so "2,50"
    is 250; parenthesised text is deleted, so "(1,234)" is empty; eval() turns "1,234" into the
    tuple (1, 234), which then scores 0; numeric lists are compared in order by "-".join.
    """
    if eval_pred and value == "Fail to extract":
        return Verdict(False, "longdocurl: extraction failed")
    fmt = answer_format or _ld_infer_format(gold)
    if gold is None:
        gold = "Not answerable"
    if eval_pred and isinstance(value, str):
        try:
            evaluated = _safe_eval(value)
            value = list(evaluated) if isinstance(evaluated, set) else evaluated
        except _EvalFailed:
            pass
    score = longdocurl_score(value, gold, fmt)
    ok = score >= min_score
    return Verdict(ok, f"longdocurl {fmt}: score {score:.4g}{'' if ok else f' < {min_score:g}'}")


# ================================================================== preset "mathqa-rel"


def _qw_parse_digits(num: Any) -> float | None:
    text = str(num).replace(",", "")
    try:
        return float(text)
    except ValueError:
        if text.endswith("%"):
            text = text[:-1]
            if text.endswith("\\"):
                text = text[:-1]
            try:
                return float(text) / 100
            except ValueError:
                pass
    return None


def _qw_choice_clean(pred: str) -> str:
    pred = pred.strip("\n").rstrip(".").rstrip("/").strip(" ").lstrip(":")
    letters = re.findall(r"\b(A|B|C|D|E)\b", pred.upper())
    last = letters[-1] if letters else pred.strip().strip(".")
    return last.rstrip(".").rstrip("/")


def _qw_numeric_equal(prediction: float, reference: float) -> bool:
    return math.isclose(reference, prediction, rel_tol=1e-4)


def _qw_numerical_equal(prediction: str, reference: str, include_percentage: bool, is_close: bool) -> bool:
    pred, ref = _qw_parse_digits(prediction), _qw_parse_digits(reference)
    if pred is None or ref is None:
        return False
    for item in [ref / 100, ref, ref * 100] if include_percentage else [ref]:
        if _qw_numeric_equal(pred, item) if is_close else item == pred:
            return True
    return False


_QW_LIST = re.compile(r"(\(|\[).+(\)|\])")
_PMATRIX_START = "\\begin{pmatrix}"
_PMATRIX_END = "\\end{pmatrix}"


def _qw_is_matrix(s: str) -> bool:
    starts = s.startswith(("\\begin{pmatrix}", "\\begin{bmatrix}"))
    return starts and s.endswith(("\\end{pmatrix}", "\\end{bmatrix}"))


def _qw_str_to_pmatrix(s: str) -> str:
    rows = re.findall(r"\{.*,.*\}", s.strip())
    return ", ".join(_PMATRIX_START + m.strip("{}").replace(",", "\\") + _PMATRIX_END for m in rows)


def _qw_math_equal(prediction: str, reference: str, incl: bool, close: bool, depth: int = 0) -> bool:
    """Qwen2.5-Math `math_equal`, with `_latex_number` standing in for sympy's symbolic_equal."""
    if depth > 20:
        return False
    if prediction.strip().lower() == reference.strip().lower():
        return True
    if reference in ("A", "B", "C", "D", "E") and _qw_choice_clean(prediction) == reference:
        return True
    if _qw_numerical_equal(prediction, reference, incl, close):
        return True
    if not prediction:
        return False
    reference, prediction = reference.strip(), prediction.strip()
    if "pmatrix" in prediction and "pmatrix" not in reference:
        reference = _qw_str_to_pmatrix(reference)
    pred_str, ref_str = prediction, reference

    def wrapped(x: str, left: str, right: str) -> bool:
        return x.startswith(left) and x.endswith(right)

    if (wrapped(pred_str, "[", "]") and not wrapped(ref_str, "(", ")")) or (
        wrapped(pred_str, "(", ")") and not wrapped(ref_str, "[", "]")
    ):
        pred_str, ref_str = pred_str.strip("[]()"), ref_str.strip("[]()")
    for bracket in "{}()":
        pred_str, ref_str = pred_str.replace(bracket, ""), ref_str.replace(bracket, "")
    if pred_str.lower() == ref_str.lower():
        return True
    if _QW_LIST.match(prediction) and _QW_LIST.match(reference):
        pred_parts, ref_parts = prediction[1:-1].split(","), reference[1:-1].split(",")
        return len(pred_parts) == len(ref_parts) and all(
            _qw_math_equal(p, r, incl, close, depth + 1) for p, r in zip(pred_parts, ref_parts)
        )
    if _qw_is_matrix(prediction) and _qw_is_matrix(reference):
        return _qw_matrices_equal(prediction, reference, incl, close, depth)
    if prediction.count("=") == 1 and reference.count("=") == 1:
        p_left, p_right = prediction.split("=")
        r_left, r_right = reference.split("=")
        pe, re_ = f"{p_left.strip()} - ({p_right.strip()})", f"{r_left.strip()} - ({r_right.strip()})"
        return _qw_symbolic_equal(pe, re_) or _qw_symbolic_equal(f"-({pe})", re_)
    if prediction.count("=") == 1 and len(prediction.split("=")[0].strip()) <= 2 and "=" not in reference:
        return _qw_math_equal(prediction.split("=")[1], reference, incl, close, depth + 1)
    if reference.count("=") == 1 and len(reference.split("=")[0].strip()) <= 2 and "=" not in prediction:
        return _qw_math_equal(prediction, reference.split("=")[1], incl, close, depth + 1)
    return _qw_symbolic_equal(prediction, reference)


def _qw_matrices_equal(prediction: str, reference: str, incl: bool, close: bool, depth: int) -> bool:
    def rows(s: str) -> list[str]:
        inner = s[len(_PMATRIX_START) : -len(_PMATRIX_END)]
        return [line.strip() for line in inner.split("\\\\") if line.strip()]

    pred_rows, ref_rows = rows(prediction), rows(reference)
    if len(pred_rows) != len(ref_rows):
        return False
    for p_row, r_row in zip(pred_rows, ref_rows):
        p_cells, r_cells = p_row.split("&"), r_row.split("&")
        if len(p_cells) != len(r_cells):
            return False
        if not all(_qw_math_equal(p, r, incl, close, depth + 1) for p, r in zip(p_cells, r_cells)):
            return False
    return True


def _qw_symbolic_equal(a: str, b: str) -> bool:
    x, y = _latex_number(a), _latex_number(b)
    return x is not None and y is not None and _qw_numeric_equal(x, y)


_LATEX_PLAIN = (
    ("\\left", ""),
    ("\\right", ""),
    ("\\!", ""),
    ("\\,", ""),
    ("\\;", ""),
    ("\\dfrac", "\\frac"),
    ("\\tfrac", "\\frac"),
    ("\\cfrac", "\\frac"),
    ("\\times", "*"),
    ("\\cdot", "*"),
    ("\\div", "/"),
    ("\\pi", "(3.141592653589793)"),
    ("$", ""),
)


def _latex_group(s: str, i: int) -> tuple[str, int] | None:
    """The `{...}` group (or single character) at s[i]: (content, index after it)."""
    while i < len(s) and s[i] == " ":
        i += 1
    if i >= len(s):
        return None
    if s[i] != "{":
        return s[i], i + 1
    depth = 0
    for j in range(i, len(s)):
        depth += {"{": 1, "}": -1}.get(s[j], 0)
        if depth == 0:
            return s[i + 1 : j], j + 1
    return None


def _latex_to_python(s: str, depth: int = 0) -> str | None:
    if depth > 20:
        return None
    out, i = [], 0
    while i < len(s):
        if s.startswith("\\frac", i):
            num = _latex_group(s, i + 5)
            den = num and _latex_group(s, num[1])
            if not num or not den:
                return None
            a, b = _latex_to_python(num[0], depth + 1), _latex_to_python(den[0], depth + 1)
            if a is None or b is None:
                return None
            out.append(f"(({a})/({b}))")
            i = den[1]
        elif s.startswith("\\sqrt", i):
            arg = _latex_group(s, i + 5)
            if not arg:
                return None
            a = _latex_to_python(arg[0], depth + 1)
            if a is None:
                return None
            out.append(f"(({a})**0.5)")
            i = arg[1]
        elif s[i] == "^":
            arg = _latex_group(s, i + 1)
            if not arg:
                return None
            a = _latex_to_python(arg[0], depth + 1)
            if a is None:
                return None
            out.append(f"**({a})")
            i = arg[1]
        elif s[i] in "{}":
            out.append("(" if s[i] == "{" else ")")
            i += 1
        elif s[i] == "\\":
            return None
        else:
            out.append(s[i])
            i += 1
    return "".join(out)


def _latex_number(text: str) -> float | None:
    """The value of a purely numeric expression (LaTeX or plain), or None."""
    s = text.strip()
    if len(s) > 500:
        return None
    for old, new in _LATEX_PLAIN:
        s = s.replace(old, new)
    expr = _latex_to_python(s)
    if expr is None or any(c.isalpha() and c not in "eE" for c in expr):
        return None
    try:
        result = _safe_eval(expr, calls=False)
    except _EvalFailed:
        return None
    if isinstance(result, bool) or not isinstance(result, (int, float)):
        return None
    try:
        result = float(result)
    except OverflowError:
        return None
    return result if math.isfinite(result) else None


def _qw_text(x: Any) -> str:
    return x if isinstance(x, str) else str(x)


def _judge_mathqa_rel(value: Any, gold: Any, *, include_percentage: bool, is_close: bool) -> Verdict:
    """Qwen2.5-Math `evaluation/grader.math_equal(prediction, reference, include_percentage, is_close)`.

    Reproduced: case-insensitive string equality; choice letters A-E via `choice_answer_clean`;
    `is_numerical_equal` with `parse_digits` (commas dropped, a trailing % or \\% is /100) and
    `numeric_equal` = math.isclose(rel_tol=1e-4, abs_tol=0); include_percentage (default True)
    also tries gold/100 and gold*100; bracket stripping; element-wise lists and pmatrices;
    `x = 5` against 5. Not reproduced: sympy's `symbolic_equal`; a numeric evaluator stands in for
    it (\\frac, \\sqrt, ^, \\times, \\cdot, \\pi and arithmetic), so expressions with variables fail.
    Non-string values are compared as str(value), as the pipeline compares printed output.

    Leniencies (PEERS.md 6, 7, 9 4.1.5): ×100 and ÷100 ("2,50" reads 250, which is 2.5×100); no
    absolute tolerance (1e-9 vs 0 is wrong); bracket types are ignored ("[0,1]" equals "(0,1)").
    The strip_string/extraction steps of Qwen's pipeline (w2n, unit removal) are not part of it.
    """
    if value is None or gold is None:
        return Verdict(False, "mathqa-rel: None never matches")
    ok = _qw_math_equal(_qw_text(value), _qw_text(gold), bool(include_percentage), bool(is_close))
    return Verdict(ok, f"mathqa-rel: {_fmt(value)} {'equals' if ok else 'differs from'} {_fmt(gold)}")


# ================================================================== the registry

_DEFAULT_OPTIONS = MappingProxyType(
    {"rel_tol": 1e-4, "abs_tol": 0.0, "percent": False, "scale": False, "abs_value": False, "unordered": False}
)

PRESETS: Mapping[str, Preset] = MappingProxyType(
    {
        "default": Preset(
            "default",
            _judge_default,
            _DEFAULT_OPTIONS,
            "potrun's strict rules (module docstring)",
            read=_read_default,
        ),
        "pot": Preset(
            "pot",
            _judge_pot,
            MappingProxyType({"include_percentage": None, "is_close": None, "abs_value": False, "cot": False}),
            "Program-of-Thoughts tool.finqa_equal after tool.floatify_ans",
            ("rounds both sides to the shorter precision", "include_percentage: gold/100, gold*100"),
            gsm8k_answer=_gsm8k_float,
            read=_read_pot,
        ),
        "docmath": Preset(
            "docmath",
            _judge_docmath,
            MappingProxyType({"cot": None}),
            "DocMath-Eval utils/evaluation_utils.get_acc + compare_two_numbers",
            ("absolute values", "any power-of-ten ratio", "unparseable -> 0", "ceil to 3 dp", "0.15% eps"),
        ),
        "tatqa": Preset(
            "tatqa",
            _judge_tatqa,
            MappingProxyType({"gold_scale": None, "pred_scale": "", "answer_type": None}),
            "Program-of-Thoughts eval_tatqa/tatqa_metric.TaTQAEmAndF1 (EM)",
            ("round to 2 dp before scaling", "(1,234) is positive", "falsy prediction scores 0"),
        ),
        "longdocurl": Preset(
            "longdocurl",
            _judge_longdocurl,
            MappingProxyType({"answer_format": None, "eval_pred": True, "min_score": 1.0}),
            "LongDocURL utils/utils_score_v3.eval_score",
            ("Float rel_tol 0.01 and x100 /100", "character-set rstrip of units", "ordered numeric lists"),
            gsm8k_answer=_gsm8k_number,
        ),
        "mathqa-rel": Preset(
            "mathqa-rel",
            _judge_mathqa_rel,
            MappingProxyType({"include_percentage": True, "is_close": True}),
            "Qwen2.5-Math evaluation/grader.math_equal (numeric rules; no sympy)",
            ("x100 and /100", "bracket types ignored", "no absolute tolerance"),
        ),
    }
)
