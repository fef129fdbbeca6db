"""Scoring many samples: pass@k, majority vote (self-consistency), and process checklists.

All pure functions, like the comparators they build on (`potrun.comparators`).

- `pass_at_k(n, c, k)`: the unbiased estimator 1 - C(n-c, k) / C(n, k) of Chen et al. (2021),
  computed as the product 1 - prod_{i=n-c+1..n} (1 - k/i), which never forms a large binomial.
- `majority_vote(values, gold, preset=...)`: self-consistency. Values that are equal under the
  comparator vote together; the group with the most votes wins; a tie goes to the group whose first
  member came first. The voted value is that first member. None, NaN and not-executed results do
  not vote (an ExecResult votes only when its status is ok).
- `check_checklist(observed, checklist)`: a process check. Every required intermediate value must
  appear among the numbers a program produced (within tolerance, or inside a range item).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from potrun.comparators import GoldRange, compare, parse_range
from potrun.comparators.default import DEFAULTS
from potrun.extractors.numbers import parse_number
from potrun.types import ExecResult, Status, Value

__all__ = ["ChecklistItem", "ChecklistResult", "check_checklist", "majority_vote", "pass_at_k"]


def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that at least one of k samples drawn from n (c of them correct) is correct."""
    for name, x in (("n", n), ("c", c), ("k", k)):
        if isinstance(x, bool) or not isinstance(x, int):
            raise TypeError(f"{name} must be an int, not {type(x).__name__}")
    if n < 1 or not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n and 0 <= c <= n; got n={n}, c={c}, k={k}")
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
    """One required intermediate value: a number (`value`) or a range (`low`..`high`, inclusive)."""

    value: float | None = None
    low: float | None = None
    high: float | None = None
    name: str = ""

    def __post_init__(self) -> None:
        if self.value is None and self.low is None and self.high is None:
            raise ValueError("a checklist item needs a value or a range")
        if self.value is not None and (self.low is not None or self.high is not None):
            raise ValueError("a checklist item is a value or a range, not both")

    @classmethod
    def from_spec(cls, spec: ChecklistItem | float | int | str | Mapping[str, Any]) -> ChecklistItem:
        """Accepts an item, a number, a number or range string ("12.5%", "between 18 and 21"),
        or a dict with `value`, or `min`/`max` (also `low`/`high`), and an optional `name`."""
        if isinstance(spec, ChecklistItem):
            return spec
        if isinstance(spec, bool):
            raise TypeError("a bool is not a checklist value")
        if isinstance(spec, (int, float)):
            return cls(value=float(spec))
        if isinstance(spec, str):
            return _item_from_text(spec, name="")
        if isinstance(spec, Mapping):
            name = str(spec.get("name", ""))
            if "value" in spec:
                v = spec["value"]
                return _item_from_text(v, name) if isinstance(v, str) else cls(value=float(v), name=name)
            low = spec.get("min", spec.get("low"))
            high = spec.get("max", spec.get("high"))
            return cls(low=_to_float(low), high=_to_float(high), name=name)
        raise TypeError(f"cannot read a checklist item from {type(spec).__name__}")

    def describe(self) -> str:
        what = f"{self.value:g}" if self.value is not None else f"[{self.low}, {self.high}]"
        return f"{self.name} = {what}" if self.name else what


def _to_float(x: Any) -> float | None:
    if x is None:
        return None
    if isinstance(x, str):
        parsed = parse_number(x)
        if parsed is None:
            raise ValueError(f"checklist bound {x!r} is not a number")
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
        raise ValueError(f"checklist item {text!r} is neither a number nor a range")
    return ChecklistItem(value=float(parsed.value), name=name)


@dataclass(frozen=True, slots=True)
class ChecklistResult:
    """`passed` iff nothing is `missing`; `missing` keeps the checklist's order."""

    passed: bool
    missing: tuple[ChecklistItem, ...]


def _present(item: ChecklistItem, observed: Sequence[float], rel_tol: float, abs_tol: float) -> bool:
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


def check_checklist(
    observed_numbers: Iterable[float],
    checklist: Sequence[ChecklistItem | float | Mapping[str, Any] | str],
    rel_tol: float = DEFAULTS.rel_tol,
    abs_tol: float = DEFAULTS.abs_tol,
) -> ChecklistResult:
    """Check that each required intermediate value appears among `observed_numbers`.

    An item is found when some observed number is within `rel_tol`/`abs_tol` of its value
    (math.isclose; the default comparator's tolerance unless given), or inside its inclusive range.
    Items are checked independently: one observed number may satisfy several items. bools and NaN
    among the observed numbers are ignored.
    """
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
    missing = tuple(item for item in items if not _present(item, observed, rel_tol, abs_tol))
    return ChecklistResult(passed=not missing, missing=missing)
