"""A budget of work for reading one record's answer text in potrun's own process (a leaf module).

Every reader of model text in the parent (extractors, number readers, comparators and their `eval()`
stand-in) bounds each operation's cost from its inputs before it runs; the budget bounds their sum: a
record's extraction and comparison together may spend at most RECORD_UNITS units (about one
elementary step each: a character scanned, a digit or element made, a cell of an edit distance). It
lives in a context variable, so it holds in whatever thread the record is read (a trainer's reward
threads, the service's scoring threads), with no signal and no timer: `OverBudget` is raised at the
first charge past it, and a comparator turns it into a wrong verdict ("not judged").

    with record_budget():      # a fresh budget, unless one is already open (then that one counts)
        charge(len(text))

The pipeline opens one `Budget` per record (`spending`) around its extraction and again around its
judging, wherever each runs: a record with many samples, many golds or many checklist items shares
one budget, never one per comparison. Each comparison is charged COMPARE_UNITS_PER_CHAR for each
character of what it reads (`size`) before it starts, on top of what its operations charge.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from itertools import islice

__all__ = [
    "COMPARE_UNITS_PER_CHAR",
    "RECORD_UNITS",
    "Budget",
    "OverBudget",
    "charge",
    "record_budget",
    "size",
    "spending",
]

RECORD_UNITS = 50_000_000  # far above any real answer's reading (~10^3-10^5), far below a second's worth
# A comparison's rules pass over its texts a few dozen times (normalisations, regexes, number reads):
# 32 units a character lets one record read ~1.5 million characters in all, ~1-3 s at the slowest
# preset's measured rate (TAT-QA's emulation: ~1 s for 500k characters).
COMPARE_UNITS_PER_CHAR = 32


class OverBudget(BaseException):
    """A record's reading spent its budget: the text is hostile, or absurdly long. A BaseException, so
    that no `except Exception` of a peer's emulated code reads on past it: the preset's entry catches it
    (a wrong verdict, "not judged")."""


@dataclass
class Budget:
    remaining: int


_current: ContextVar[Budget | None] = ContextVar("potrun_record_budget", default=None)


def charge(units: int) -> None:
    """Spend `units` of the open budget (none open: nothing to count); OverBudget past it."""
    budget = _current.get()
    if budget is not None:
        budget.remaining -= units
        if budget.remaining < 0:
            raise OverBudget(f"reading this text would take more than {RECORD_UNITS:,} steps")


@contextmanager
def spending(budget: Budget) -> Iterator[Budget]:
    """Count what runs inside against `budget` (a record's, opened again in whatever thread reads it)."""
    token = _current.set(budget)
    try:
        yield budget
    finally:
        _current.reset(token)


def size(value: object, limit: int = RECORD_UNITS) -> int:
    """About how many characters reading `value` takes (a text's length, an int's digits, a
    container's items' sizes), counted with bounded work: the walk stops once past `limit`."""
    total, stack = 0, [value]
    while stack and total <= limit:
        item = stack.pop()
        if isinstance(item, (str, bytes)):
            total += len(item)
        elif isinstance(item, int):
            total += 1 + item.bit_length() // 3
        elif isinstance(item, (list, tuple, set, frozenset, dict)):
            total += 1 + len(item)  # at least a step an item; those within the limit are walked
            items = item.items() if isinstance(item, dict) else item
            stack.extend(islice(items, max(0, limit - total)))
        else:
            total += 1
    return total


@contextmanager
def record_budget(units: int = RECORD_UNITS) -> Iterator[Budget]:
    """Open a budget of `units` for what runs inside; nested, the outer budget is the one that counts."""
    budget = _current.get()
    if budget is not None:
        yield budget
        return
    budget = Budget(units)
    token = _current.set(budget)
    try:
        yield budget
    finally:
        _current.reset(token)
