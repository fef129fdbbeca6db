"""Scoring many samples: pass@k, majority vote (self-consistency), and process checklists.

All pure functions, like the comparators they build on (`potrun.comparators`).

- `pass_at_k(n, c, k)`: the unbiased estimator 1 - C(n-c, k) / C(n, k) of Chen et al. (2021),
  computed as the product 1 - prod_{i=n-c+1..n} (1 - k/i), which never forms a large binomial.
- `majority_vote(values, gold, preset=...)`: self-consistency. Values that are equal under the
  comparator vote together; the group with the most votes wins; a tie goes to the group whose first
  member came first. The voted value is that first member. None, NaN and not-executed results do
  not vote (an ExecResult votes only when its status is ok).
- `check_checklist(observed, checklist)`: a process check. Every required intermediate value must
  appear among the numbers a program produced (within tolerance, or inside a range item). An item
  stated in a unit with a scale (13.1亿元, "$3.5 million") is found as written or multiplied out.
- `parse_checklist(text)`: a free-text checklist (DocPuzzle's, mostly Chinese) read into the answer's
  range and the required values; the requirements it cannot read as numbers are kept as `unparsed`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from potrun.comparators import GoldRange, compare, parse_range
from potrun.comparators.default import DEFAULTS
from potrun.extractors.numbers import find_numbers, parse_number
from potrun.types import ExecResult, Status, UsageError, Value

__all__ = [
    "ChecklistItem",
    "ChecklistResult",
    "ParsedChecklist",
    "check_checklist",
    "majority_vote",
    "parse_checklist",
    "pass_at_k",
]


def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that at least one of k samples drawn from n (c of them correct) is correct."""
    for name, x in (("n", n), ("c", c), ("k", k)):
        if isinstance(x, bool) or not isinstance(x, int):
            raise UsageError(f"{name} must be an int, not {type(x).__name__}")
    if n < 1 or not 0 <= c <= n or not 1 <= k <= n:
        raise UsageError(f"need 1 <= k <= n and 0 <= c <= n; got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


def _votes(value: Any) -> tuple[bool, Any]:
    """(whether it votes, the value it votes with)."""
    if isinstance(value, ExecResult):
        if value.status is not Status.OK:
            return False, None
        value = value.value
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return False, None
    return True, value


def majority_vote(
    values: Iterable[Value | ExecResult],
    gold: Any,
    *,
    preset: str = "default",
    **options: Any,
) -> tuple[Value, bool]:
    """(voted value, whether it is correct against `gold`); (None, False) when nothing votes.

    Grouping uses the same comparator as scoring: a value joins the first group whose first member
    it equals under `compare(value, first_member, preset=preset, **options)`. With `abs_value`, the
    numbers vote by their absolute value, as the PoT SVAMP runner did.
    """
    groups: list[tuple[Any, int]] = []  # (first member, count), in order of first occurrence
    for raw in values:
        votes, value = _votes(raw)
        if not votes:
            continue
        if options.get("abs_value") and isinstance(value, (int, float)) and not isinstance(value, bool):
            value = abs(value)
        for i, (first, count) in enumerate(groups):
            if compare(value, first, preset=preset, **options).correct:
                groups[i] = (first, count + 1)
                break
        else:
            groups.append((value, 1))
    if not groups:
        return None, False
    best = max(range(len(groups)), key=lambda i: (groups[i][1], -i))  # most votes, then earliest
    voted = groups[best][0]
    return voted, compare(voted, gold, preset=preset, **options).correct


@dataclass(frozen=True, slots=True)
class ChecklistItem:
    """One required intermediate value: a number (`value`) or a range (`low`..`high`, inclusive).

    `scale_factor`: the scale of the unit its numbers are written in (1e8 for 亿元, 1e6 for "million"),
    so that 13.1 (亿元) is also found as 1.31e9 ("RMB 1.31 billion" multiplied out)."""

    value: float | None = None
    low: float | None = None
    high: float | None = None
    name: str = ""
    scale_factor: float = 1.0

    def __post_init__(self) -> None:
        if self.value is None and self.low is None and self.high is None:
            raise UsageError("a checklist item needs a value or a range")
        if self.value is not None and (self.low is not None or self.high is not None):
            raise UsageError("a checklist item is a value or a range, not both")

    @classmethod
    def from_spec(cls, spec: ChecklistItem | float | int | str | Mapping[str, Any]) -> ChecklistItem:
        """Accepts an item, a number, a number or range string ("12.5%", "between 18 and 21": numbers
        as written, a scale word not applied), or a dict with `value`, or `min`/`max` (also
        `low`/`high`), an optional `name` and an optional `unit` ("亿元": the scale its numbers are in,
        applied). A spec that is none of these is a UsageError that says why."""
        try:
            return cls._from_spec(spec)
        except (TypeError, ValueError, OverflowError) as exc:  # float("n/a"), float(10**400), float({})
            raise UsageError(f"checklist item: {str(exc)[:200]}") from None  # (float()'s quotes the whole text)

    @classmethod
    def _from_spec(cls, spec: ChecklistItem | float | int | str | Mapping[str, Any]) -> ChecklistItem:
        if isinstance(spec, ChecklistItem):
            return spec
        if isinstance(spec, bool):
            raise UsageError("a bool is not a checklist value")
        if isinstance(spec, (int, float)):
            return cls(value=float(spec))
        if isinstance(spec, str):
            return _item_from_text(spec, name="")
        if isinstance(spec, Mapping):
            name = str(spec.get("name", ""))
            if "value" in spec:
                v = spec["value"]
                if isinstance(v, str):
                    return _item_from_text(v, name)
                return cls(value=float(v), name=name, scale_factor=unit_scale(str(spec.get("unit", ""))))
            low = spec.get("min", spec.get("low"))
            high = spec.get("max", spec.get("high"))
            factor = unit_scale(str(spec.get("unit", "")))
            return cls(low=_to_float(low), high=_to_float(high), name=name, scale_factor=factor)
        raise UsageError(f"cannot read a checklist item from {type(spec).__name__}")

    def describe(self) -> str:
        what = f"{self.value:g}" if self.value is not None else f"[{self.low}, {self.high}]"
        if self.scale_factor != 1.0:
            what += f" (x{self.scale_factor:g})"
        return f"{self.name} = {what}" if self.name else what

    def scaled(self) -> ChecklistItem:
        """The same item multiplied out of its unit's scale (13.1 亿 -> 1.31e9)."""
        f = self.scale_factor

        def times(x: float | None) -> float | None:
            return None if x is None else x * f

        return ChecklistItem(times(self.value), times(self.low), times(self.high), self.name)


def unit_scale(unit: str) -> float:
    """The scale a unit text carries: "亿元" -> 1e8, "million dollars" -> 1e6, "元" or "" -> 1.0."""
    parsed = parse_number("1 " + unit) if unit.strip() else None
    return parsed.scale_factor if parsed is not None else 1.0


def _to_float(x: Any) -> float | None:
    if x is None:
        return None
    if isinstance(x, str):
        parsed = parse_number(x)
        if parsed is None:
            raise UsageError(f"checklist bound {x[:80]!r} is not a number")
        return float(parsed.value)
    return float(x)


def _item_from_text(text: str, name: str) -> ChecklistItem:
    rng: GoldRange | None = parse_range(text)
    if rng is not None:
        return ChecklistItem(
            low=None if rng.low is None else float(rng.low.value),
            high=None if rng.high is None else float(rng.high.value),
            name=name,
        )
    parsed = parse_number(text)
    if parsed is None:
        raise UsageError(f"checklist item {text[:80]!r} is neither a number nor a range")
    return ChecklistItem(value=float(parsed.value), name=name)


@dataclass(frozen=True, slots=True)
class ChecklistResult:
    """`passed` iff nothing is `missing`; `missing` keeps the checklist's order."""

    passed: bool
    missing: tuple[ChecklistItem, ...]
    spray: bool = False  # refused whole: far more distinct values than the checklist could need

    def __bool__(self) -> bool:
        return bool(self.passed)  # `if check_checklist(...):` asks whether it passed


def _present(item: ChecklistItem, observed: Sequence[float], rel_tol: float, abs_tol: float) -> bool:
    """Found as written, or multiplied out of its unit's scale."""
    if item.scale_factor != 1.0 and _present_as_written(item.scaled(), observed, rel_tol, abs_tol):
        return True
    return _present_as_written(item, observed, rel_tol, abs_tol)


def _present_as_written(item: ChecklistItem, observed: Sequence[float], rel_tol: float, abs_tol: float) -> bool:
    if item.value is not None:
        return any(math.isclose(o, item.value, rel_tol=rel_tol, abs_tol=abs_tol) for o in observed)
    lo = -math.inf if item.low is None else item.low
    hi = math.inf if item.high is None else item.high
    return any(
        (lo <= o <= hi)
        or math.isclose(o, lo, rel_tol=rel_tol, abs_tol=abs_tol)
        or math.isclose(o, hi, rel_tol=rel_tol, abs_tol=abs_tol)
        for o in observed
    )


# Evidence that is a spray does not pass: a checklist of k items needs at most k values, and a
# reasoning that computes them shows some more (its givens, its steps); one that shows more distinct
# values than SPRAY_FLOOR and SPRAY_PER_ITEM per item allow (a program holding list(range(1000)), a
# chain of thought that lists 0..999) would pass any checklist by saying every number.
SPRAY_FLOOR = 64
SPRAY_PER_ITEM = 16


def spray_limit(items: int) -> int:
    """The most distinct observed values a checklist of `items` items accepts as evidence."""
    return max(SPRAY_FLOOR, SPRAY_PER_ITEM * items)


def check_checklist(
    observed_numbers: Iterable[float],
    checklist: Sequence[ChecklistItem | float | Mapping[str, Any] | str],
    rel_tol: float = DEFAULTS.rel_tol,
    abs_tol: float = DEFAULTS.abs_tol,
    *,
    reject_spray: bool = False,
) -> ChecklistResult:
    """Check that each required intermediate value appears among `observed_numbers`.

    An item is found when some observed number is within `rel_tol`/`abs_tol` of its value
    (math.isclose; the default comparator's tolerance unless given), or inside its inclusive range,
    as written or multiplied out of its scale (`ChecklistItem.scale_factor`).
    Items are checked independently: one observed number may satisfy several items. bools and NaN
    among the observed numbers are ignored. `reject_spray`: more distinct observed values than
    `spray_limit` allows fail the whole checklist (`spray`), whatever they contain. A bad argument
    is a UsageError.
    """
    for name, given in (("observed_numbers", observed_numbers), ("checklist", checklist)):
        if isinstance(given, (str, bytes, Mapping)) or not hasattr(given, "__iter__"):
            raise UsageError(f"{name} must be a list, not {type(given).__name__}")
    for name, tol in (("rel_tol", rel_tol), ("abs_tol", abs_tol)):
        if type(tol) not in (int, float) or not 0 <= tol < math.inf:
            shown = f"{tol!r}" if type(tol) is float else f"a {type(tol).__name__}"
            raise UsageError(f"{name} must be a finite number >= 0, not {shown}")
    observed = []
    for o in observed_numbers:
        if isinstance(o, (int, float)) and not isinstance(o, bool):
            try:
                f = float(o)
            except OverflowError:
                f = math.inf if o > 0 else -math.inf
            if not math.isnan(f):
                observed.append(f)
    items = [ChecklistItem.from_spec(spec) for spec in checklist]
    if reject_spray and items and len(set(observed)) > spray_limit(len(items)):
        return ChecklistResult(passed=False, missing=tuple(items), spray=True)
    missing = tuple(item for item in items if not _present(item, observed, rel_tol, abs_tol))
    return ChecklistResult(passed=not missing, missing=missing)


# ------------------------------------------------------------------ free-text checklists

APPROX_REL_TOL = 0.03  # a value the checklist calls approximate (约为13.1亿元, "about 551"): within 3%

_SENTENCE_END = re.compile(r"[。；;！？!?\n]+|\.(?=\s|$)")
_CLAUSE_SEP = re.compile(r"[，,、]?(?:以及|并且|and also)|[，,]")
_ABOUT_THE_ANSWER = re.compile(r"答案|视为正确|正确|answer|correct", re.I)
_APPROX_BEFORE = re.compile(r"(?:约为|约合|约|大约|大概|近|approximately|about|around|roughly|≈|~)\s*$", re.I)
_APPROX_AFTER = re.compile(r"\S{0,3}?左右")


@dataclass(frozen=True, slots=True)
class ParsedChecklist:
    """A free-text checklist as read: the answer's range (None when it states none), the values a
    response must contain, and the requirements that hold no number (kept, to report: potrun cannot
    check "必须给出现货价=基差+期货价的关系")."""

    answer_range: GoldRange | None
    items: tuple[ChecklistItem, ...]
    unparsed: tuple[str, ...]


def parse_checklist(text: str) -> ParsedChecklist:
    """Read a free-text checklist ("允许计算误差，答案在2.21%到2.54%之间均视为正确。回答必须包含…约为13.1亿元").

    Sentence by sentence: one that states a range and speaks of the answer ("答案在A到B之间均视为正确",
    "an answer between 18% and 21% is correct") is the answer's range; in any other, each clause's
    numbers are required values, with their units' scale (亿元); a value called approximate (约, 左右,
    about) is a range of ±APPROX_REL_TOL; a year that only dates another number ("2020年…551亿元") is
    not required. A clause without a number is `unparsed`.
    """
    answer_range: GoldRange | None = None
    items: list[ChecklistItem] = []
    unparsed: list[str] = []
    for sentence in _SENTENCE_END.split(text):
        rng = parse_range(sentence)
        if rng is not None and answer_range is None and _ABOUT_THE_ANSWER.search(sentence):
            answer_range = rng
            continue
        for clause in _CLAUSE_SEP.split(sentence):
            clause = clause.strip()
            if not clause:
                continue
            required = _required_values(clause)
            if required:
                items += required
            else:
                unparsed.append(clause)
    return ParsedChecklist(answer_range, tuple(items), tuple(unparsed))


def _required_values(clause: str) -> list[ChecklistItem]:
    found = list(find_numbers(clause))
    dated = [_is_year(parsed.value) for _, _, parsed in found]
    if not all(dated):  # years beside other numbers date them: "2020年锂电池市场规模约为551亿元"
        found = [number for number, year in zip(found, dated, strict=True) if not year]
    return [_required_value(clause, start, end, parsed.value, parsed.scale_factor) for start, end, parsed in found]


def _is_year(value: int | float) -> bool:
    return isinstance(value, int) and 1900 <= value <= 2100


def _required_value(clause: str, start: int, end: int, value: int | float, scale_factor: float) -> ChecklistItem:
    v = float(value)
    if _APPROX_BEFORE.search(clause, 0, start) or _APPROX_AFTER.match(clause, end):
        low, high = sorted((v * (1 - APPROX_REL_TOL), v * (1 + APPROX_REL_TOL)))
        return ChecklistItem(low=low, high=high, name=clause, scale_factor=scale_factor)
    return ChecklistItem(value=v, name=clause, scale_factor=scale_factor)
