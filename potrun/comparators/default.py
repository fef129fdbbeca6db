"""The default rules (preset "default"): potrun's own, strict and documented here.

`DefaultOptions` is the one home of their options and defaults; the tolerance other modules use
(checklists, validation) is `DEFAULTS.rel_tol`.

Gold forms (`potrun.comparators.golds.read_gold`), recognised in this order:

1. None, or a string "not answerable" / "unanswerable" / "none" / "n/a" / "no answer" (any case):
   correct iff the value is None or one of those strings.
2. bool, or a string yes/no/true/false (or 是/是的/对, 否/不是/不对): correct iff the value is a bool
   or such a string of the same truth. A number is never a bool (1 is not True).
3. A range: a dict {"min": a, "max": b} (either bound may be missing; bounds are numbers or
   number strings), a string containing "between A and B", or a bracketed interval "[A, B]",
   "[A, B)", "(A, B]" (a fully open "(A, B)" is not a range: it is more often a pair). Correct
   iff the value is a number inside it; a closed bound also accepts a value equal to it under the
   number rule.
4. A multiple-choice letter "A".."E" or "(A)".."(E)": the value must be that letter, optionally in
   parentheses or followed by a period or 项, any case. A multi-select gold "BD" (also "B、D",
   "B, D"): the value must name the same letters, in any order and separation
   (`potrun.extractors.answer.option_letters`).
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
- A whole gold (an int, or a float without a fraction below 2**53) takes a value only within less
  than 0.5 of it (or within abs_tol), besides rel_tol: two whole numbers must be equal, and a value
  with a fraction matches at most one whole gold, the nearest. rel_tol is for floating-point noise:
  1538754 is not 1538832 even though they are within 1e-4 of each other (a real SVAMP case), and
  100000.5 must not match every whole gold from 99991 to 100010 at once (a hedge); an int gold
  beyond 2**53 takes only a value that is that int (or the float nearest it).
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

import functools
import math
import numbers
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from decimal import Decimal, InvalidOperation
from types import MappingProxyType
from typing import Any

from potrun.comparators.common import is_number, shown
from potrun.comparators.golds import (
    NO,
    NOT_ANSWERABLE,
    YES,
    GoldRange,
    Letter,
    Num,
    Text,
    UnreadableGold,
    gsm8k_number,
    norm_text,
    num_from_parsed,
    read_gold,
)
from potrun.comparators.preset import Preset
from potrun.extractors.answer import option_letters, stated_value
from potrun.extractors.numbers import ParsedNumber
from potrun.types import UsageError, Value, Verdict

__all__ = ["DEFAULTS", "PRESET", "DefaultOptions"]


@dataclass(frozen=True, slots=True)
class DefaultOptions:
    """The default rules' options: the only place their defaults, potrun's tolerance among them, live."""

    rel_tol: float = 1e-4
    abs_tol: float = 0.0
    percent: bool = False
    scale: bool = False
    abs_value: bool = False
    unordered: bool = False

    def __post_init__(self) -> None:
        if self.rel_tol < 0 or self.abs_tol < 0:
            raise UsageError("rel_tol and abs_tol must be >= 0")

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> DefaultOptions:
        """The options as a caller gave them, each of its default's type (1 becomes True, 0 a float)."""
        defaults = cls()
        values = {}
        for f in fields(cls):
            kind = type(getattr(defaults, f.name))
            try:
                values[f.name] = kind(options[f.name])
            except (TypeError, ValueError):
                raise UsageError(f"option {f.name}={options[f.name]!r}: not a {kind.__name__}") from None
        return cls(**values)


DEFAULTS = DefaultOptions()


# ------------------------------------------------------------------ reading an answer text

# How the default rules read a value that is text (a chain-of-thought answer): one function per form,
# used by the judges below and by `read_answer`, so what `potrun check` shows as a chain-of-thought
# result's value is what the comparator compared. The forms are disjoint: no text is two of them.


def _read_truth(text: str) -> bool | None:
    """yes/true -> True, no/false -> False (any case, after normalisation), else None."""
    norm = norm_text(text)
    return True if norm in YES else False if norm in NO else None


def _read_letter(text: str) -> str | None:
    """A choice letter "B", "(b)", "B.", "B项" -> "B", or a multi-select answer "B、D" -> "BD", else None."""
    return option_letters(text)


def _read_default(text: str, **_options: Any) -> Value:
    """The default rules' reading (`read_answer`): a bool, a choice letter, the number as written
    (percent, scale and unit apart: "$3.5 million" -> 3.5), a list, or the text itself (a phrase,
    "not answerable": compared as text)."""
    truth = _read_truth(text)
    if truth is not None:
        return truth
    stated = _stated(text)
    return stated.value if isinstance(stated, ParsedNumber) else stated


def _stated(text: str) -> Any:
    """A text value as the answer extractor states it (`stated_value`: "x = 72" its number, as a
    ParsedNumber; "(B) 25 apples" the letter; "[72, 73]" the list), else the text itself."""
    stated = stated_value(text)
    if stated is None:
        return text
    return _listed(stated) if isinstance(stated, tuple) else stated


def _listed(value: Any) -> Any:
    return [_listed(item) for item in value] if isinstance(value, tuple) else value


# ------------------------------------------------------------------ judging


def _judge_default(value: Any, gold: Any, **options: Any) -> Verdict:
    """potrun's strict default (this module's docstring)."""
    return _judge(value, gold, _options(options))


def _options(options: Mapping[str, Any]) -> DefaultOptions:
    """DefaultOptions.from_options, made once per distinct set of options (every record of a run
    has the same), where the options can be told apart by value."""
    try:
        return _cached_options(tuple(sorted(options.items())))
    except TypeError:  # an unhashable value: from_options says what is wrong with it, if anything
        return DefaultOptions.from_options(options)


@functools.lru_cache(maxsize=64)
def _cached_options(items: tuple[tuple[str, Any], ...]) -> DefaultOptions:
    return DefaultOptions.from_options(dict(items))


def _isclose(a: float, b: float, rel_tol: float, abs_tol: float) -> bool:
    try:
        return math.isclose(a, b, rel_tol=rel_tol, abs_tol=abs_tol)
    except (OverflowError, TypeError):  # an int too large for a float
        return a == b


def _judge(value: Any, gold: Any, opts: DefaultOptions) -> Verdict:
    if isinstance(value, tuple):
        value = list(value)
    try:
        gold_form = read_gold(gold)
    except UnreadableGold as e:
        return Verdict(False, str(e))

    if gold_form is None:
        return _judge_not_answerable(value)
    if isinstance(gold_form, bool):
        return _judge_bool(value, gold_form)
    if isinstance(value, str) and not isinstance(gold_form, Text):
        value = _stated(value)
    if isinstance(gold_form, list):
        return _judge_list(value, gold_form, opts)
    if isinstance(gold_form, Letter):
        return _judge_letter(value, gold_form.letter)
    if isinstance(gold_form, Text):
        if not isinstance(value, str):
            return Verdict(False, f"gold is text, value is {type(value).__name__}")
        ok = norm_text(value) == gold_form.text
        return Verdict(ok, "text equal after normalisation" if ok else "text differs")
    # numbers and ranges
    v = _value_number(value)
    if isinstance(v, Verdict):
        return v
    if isinstance(gold_form, GoldRange):
        return _judge_range(v, gold_form, opts)
    assert isinstance(gold_form, Num)
    return _judge_number(v, gold_form, opts)


def _judge_not_answerable(value: Any) -> Verdict:
    if value is None:
        return Verdict(True, "gold is not answerable and there is no value")
    if isinstance(value, str) and norm_text(value) in NOT_ANSWERABLE:
        return Verdict(True, "gold and value both say not answerable")
    return Verdict(False, f"gold is not answerable, value is {shown(value)}")


def _judge_bool(value: Any, gold: bool) -> Verdict:
    if isinstance(value, bool):
        v: bool | None = value
    elif isinstance(value, str):
        v = _read_truth(value)
    else:
        return Verdict(False, f"gold is yes/no, value is {type(value).__name__} (a number is not a bool)")
    if v is None:
        return Verdict(False, f"gold is yes/no, value {shown(value)} is not")
    return Verdict(v == gold, "same truth value" if v == gold else "opposite truth value")


def _judge_letter(value: Any, letter: str) -> Verdict:
    if not isinstance(value, str):
        return Verdict(False, f"gold is choice {letter}, value is {type(value).__name__}")
    read = _read_letter(value)
    if read is None:
        return Verdict(False, f"gold is choice {letter}, value {shown(value)} is not a choice letter")
    ok = read == letter
    return Verdict(ok, f"choice {read} {'=' if ok else '!='} {letter}")


def _judge_list(value: Any, gold: list[Any], opts: DefaultOptions) -> Verdict:
    if not isinstance(value, list):
        return Verdict(False, f"gold is a list, value is {type(value).__name__}")
    if len(value) != len(gold):
        return Verdict(False, f"list lengths differ: {len(value)} vs {len(gold)}")
    if not opts.unordered:
        for i, (v, g) in enumerate(zip(value, gold, strict=True)):
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
            return Verdict(False, f"element {i} ({shown(value[i])}) has no partner in the gold")
    return Verdict(True, "lists equal as multisets")


def _value_number(value: Any) -> Num | Verdict:
    if value is None:
        return Verdict(False, "no value")
    if isinstance(value, bool):
        return Verdict(False, "value is a bool, gold is a number (a bool is not a number)")
    if is_number(value):
        return Num(value)
    if isinstance(value, ParsedNumber):  # an answer text's (`_stated`)
        return num_from_parsed(value, None)
    if isinstance(value, str):
        return Verdict(False, f"value {shown(value)} is not a number")
    if isinstance(value, list):
        return Verdict(False, "value is a list, gold is a number")
    if isinstance(value, numbers.Real):  # numpy scalars and the like, when called directly
        return Num(float(value))
    return Verdict(False, f"value of type {type(value).__name__} is not supported")


def _as_float(x: int | float) -> float:
    try:
        return float(x)
    except OverflowError:
        return math.inf if x > 0 else -math.inf


def _scaled_pair(v: Num, g: Num, opts: DefaultOptions) -> tuple[float, float, float] | str:
    """(value, gold, precision multiplier) after scale handling, or the reason they cannot match."""
    if opts.scale:
        return _as_float(v.value) * v.factor, _as_float(g.value) * g.factor, g.factor
    if v.scale is not None and g.scale is not None and v.scale != g.scale:
        return f"scale words differ ({v.scale} vs {g.scale}); scale=True converts them"
    return _as_float(v.value), _as_float(g.value), 1.0


def _candidates(x: float, opts: DefaultOptions) -> list[tuple[float, str]]:
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
_NEAREST_WHOLE = 0.5  # a whole gold takes a value only nearer than this (besides abs_tol)


def _is_whole(gold: Num) -> bool:
    """Whether a gold is a whole number: an int (of any size), or a float without a fraction below
    2**53 (beyond it every float is whole, and floats there are approximate)."""
    value = gold.value
    if isinstance(value, int):
        return True
    return math.isfinite(value) and value.is_integer() and abs(value) < _EXACT_INT_LIMIT


def _numbers_equal(
    v: float, g: float, decimals: int | None, factor: float, whole_gold: bool, opts: DefaultOptions
) -> str | None:
    """Why v equals g ("rel_tol", "precision"), or None."""
    if math.isnan(v) or math.isnan(g):
        return None
    if math.isinf(v) or math.isinf(g):
        return "both infinite" if v == g else None
    if v == g:
        return "exactly equal"
    if _isclose(v, g, 0.0, opts.abs_tol):
        return f"equal within abs_tol={opts.abs_tol:g}"
    nearest = not whole_gold or abs(v - g) < _NEAREST_WHOLE * factor
    if nearest and _isclose(v, g, opts.rel_tol, opts.abs_tol):
        return f"equal within rel_tol={opts.rel_tol:g}"
    if decimals is not None and _within_precision(v, g, decimals, factor):
        return f"equal at the gold's stated precision ({decimals} dp)"
    return None


def _judge_number(v: Num, g: Num, opts: DefaultOptions) -> Verdict:
    pair = _scaled_pair(v, g, opts)
    if isinstance(pair, str):
        return Verdict(False, pair)
    if type(v.value) is int and type(g.value) is int and max(abs(v.value), abs(g.value)) >= _EXACT_INT_LIMIT:
        if v.value == g.value and (opts.scale is False or v.factor == g.factor):
            return Verdict(True, "exactly equal")
        if not (opts.percent or opts.abs_value or opts.scale):
            return Verdict(False, f"{shown(v.value)} != {shown(g.value)} (integers beyond 2**53 compare exactly)")
    vf, gf, factor = pair
    if math.isnan(vf):
        return Verdict(False, "value is NaN (NaN never equals anything)")
    if math.isnan(gf):
        return Verdict(False, "gold is NaN (NaN never equals anything)")
    whole_gold = _is_whole(g)
    for cand, how in _candidates(vf, opts):
        why = _numbers_equal(cand, gf, g.decimals, factor, whole_gold, opts)
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
    compared = (vf, gf) if opts.scale else (v.value, g.value)
    return Verdict(False, f"{shown(compared[0])} != {shown(compared[1])}{hint}")


def _judge_range(v: Num, rng: GoldRange, opts: DefaultOptions) -> Verdict:
    vf = _as_float(v.value) * (v.factor if opts.scale else 1.0)
    if math.isnan(vf):
        return Verdict(False, "value is NaN (NaN never equals anything)")

    def bound(b: Num | None) -> float | None:
        return None if b is None else _as_float(b.value) * (b.factor if opts.scale else 1.0)

    if math.isinf(vf):  # inside a one-sided range, but no question's answer is infinite
        return Verdict(False, f"value is {shown(vf)}: an infinite value is in no range")
    lo, hi = bound(rng.low), bound(rng.high)
    for cand, how in _candidates(vf, opts):
        above = lo is None or cand > lo or (rng.low_closed and _isclose(cand, lo, opts.rel_tol, opts.abs_tol))
        below = hi is None or cand < hi or (rng.high_closed and _isclose(cand, hi, opts.rel_tol, opts.abs_tol))
        if above and below:
            return Verdict(True, f"{shown(cand)} in {rng.describe()}{how}")
    return Verdict(False, f"{shown(vf)} not in {rng.describe()}")


PRESET = Preset(
    "default",
    _judge_default,
    MappingProxyType(asdict(DEFAULTS)),
    "potrun's strict rules (potrun.comparators.default)",
    gsm8k_answer=gsm8k_number,  # GSM8K's answers are exact: "#### 0.5" states no precision
    read=_read_default,
)
