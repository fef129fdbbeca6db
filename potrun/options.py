"""Options given by name from outside Python's own argument checks: a trainer's config (verl's
`reward_kwargs`), a reward's keywords, a service's JSON body. An unknown name is a `UsageError` that
names it and the closest known one: a typo (`shapped: true`, `timout: 1`) must never be dropped in
silence, where it changes every reward of a training run and says nothing."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any

from potrun.types import UsageError

__all__ = ["check_batch", "check_options", "unknown_option"]

SHOWN_KEY_CHARS = 60  # a hostile body's key is quoted this far at most


def unknown_option(name: Any, known: Iterable[str], where: str) -> UsageError:
    """The error for an unknown option `name` of `where` ("verl's reward_kwargs", "the body of /v1/score")."""
    choices = sorted(set(known))
    shown = repr(name if not isinstance(name, str) else name[:SHOWN_KEY_CHARS])
    close = difflib.get_close_matches(name, choices, n=1, cutoff=0.6) if isinstance(name, str) else []
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return UsageError(f"{where} has no option {shown}{hint} (known: {', '.join(choices) or 'none'})")


def check_options(given: Mapping[Any, Any] | Iterable[Any], known: Iterable[str], where: str) -> None:
    """Raise `unknown_option` for the first name of `given` (a mapping's keys, or names) not in `known`."""
    allowed = set(known)
    for name in given:
        if name not in allowed:
            raise unknown_option(name, allowed, where)


def check_batch(where: str, **batches: Any) -> None:
    """Each of `batches` (name -> value) is a batch of items: sized and iterable (a list, a tuple, a
    NumPy array: verl hands its columns as arrays), not a text or a mapping, whose items would be read
    one character or one key at a time. Otherwise a UsageError naming it."""
    for name, value in batches.items():
        if isinstance(value, (str, bytes, Mapping)) or not (hasattr(value, "__len__") and hasattr(value, "__iter__")):
            raise UsageError(f"{where}: {name} must be a list, one item per sample, not {type(value).__name__}")
