"""What every comparator module shares: what counts as a number, and how a value shows in a reason."""

from __future__ import annotations

from typing import Any


def is_number(x: Any) -> bool:
    """An int or a float, and not a bool (True is an int to Python, never a number to a comparator)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def shown(x: Any) -> str:
    """`x` as a verdict's reason shows it: its repr, cut to 60 characters."""
    text = repr(x)
    return text if len(text) <= 60 else text[:57] + "..."
