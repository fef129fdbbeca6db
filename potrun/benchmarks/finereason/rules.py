"""What FineReason's four puzzles share: the official classes of a proposed next state, the walk every
puzzle's state transition takes (back to the parent from a dead end, else one move forward that is
not the explored dead end), the record's state fields, and the bounds that keep one record's rules
from hanging a run.

The rules run in the parent on untrusted text (the model's state) and untrusted records (the
puzzle): a record whose puzzle is malformed is a `PuzzleError` (its field named: a bad_record), and
one whose checking would cost more than the bounds allow is a `RulesTooCostly` (a bad_record too).
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

VALID = "1"  # the official class of a valid next state (scoring.py counts it as 1.0)
PARSING_ERROR = "parsing error"  # get_answer found no state it could read
SIBLING = "sibling"
BACKTRACKING_FAILURE = "backtracking failure"
UNSOLVABLE_CHILD = "unsolvable child"
INVALID_MOVE = "invalid move"

# A proposed state's text longer than this is not parsed (no real state of these puzzles comes near
# it): its class is a parsing error.
MAX_STATE_CHARS = 200_000


class PuzzleError(ValueError):
    """A record's puzzle the official rules cannot read (the field is named in the message)."""


class Unreadable(Exception):
    """The proposed state's text is not a state the official code could read (a parsing error)."""


class RulesTooCostly(Exception):
    """Checking this record's state would take more work than the bounds allow."""


@dataclass(frozen=True)
class Transition:
    """A state transition's states: the parent, the current state and its explored unsolvable child,
    and whether the current state is a dead end (`backtrack`). Each puzzle adds its `move` rule."""

    parent: Any
    current: Any
    child: Any
    backtrack: bool

    def move(self, previous: Any, proposed: Any) -> str:
        """Gives "1" when `proposed` is one valid move from `previous`, else the official error class."""
        raise NotImplementedError

    def walk(self, state: Any) -> str:
        """The official class of `state` as the next state. From a dead end only the parent is
        right; a valid move from the parent is a sibling. From a solvable state a valid move is right
        unless it is the explored unsolvable child; otherwise the class is what `move` says."""
        if self.backtrack:
            if state == self.parent:
                return VALID
            return SIBLING if self.move(self.parent, state) == VALID else BACKTRACKING_FAILURE
        verdict = self.move(self.current, state)
        if verdict != VALID:
            return verdict
        return UNSOLVABLE_CHILD if state == self.child else VALID


def literal(text: str) -> Any:
    """The Python literal a state's text spells (as the official `ast.literal_eval`); Unreadable when
    it is not one (or too long to parse)."""
    if len(text) > MAX_STATE_CHARS:
        raise Unreadable("state too long")
    try:
        return ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as exc:
        raise Unreadable(f"not a literal: {type(exc).__name__}") from None


def field(record_part: Mapping[str, Any], name: str, where: str = "inputs") -> Any:
    """`record_part[name]`, or a PuzzleError naming the missing field."""
    if name not in record_part:
        raise PuzzleError(f"record has no {where}.{name}")
    return record_part[name]


def backtracking(status: str) -> bool:
    """True when the current state is a dead end: the next state must go back to the parent."""
    if status not in ("Solvable", "Unsolvable"):
        raise PuzzleError(f"outputs.current_status is {status!r}, not Solvable or Unsolvable")
    return status == "Unsolvable"


def int_list(value: Any, name: str, length: int | None = None) -> list[int]:
    """`value` as a list of ints (of `length`), or a PuzzleError naming the field."""
    if not isinstance(value, list) or not all(type(item) is int for item in value):
        raise PuzzleError(f"inputs.{name} is not a list of integers")
    if length is not None and len(value) != length:
        raise PuzzleError(f"inputs.{name} has {len(value)} entries, not {length}")
    return value


def decoded(value: Any, name: str) -> Any:
    """A field the states files store as a JSON string (`graph`, `clues`), decoded; else as it is."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        raise PuzzleError(f"inputs.{name} is a string that is not JSON") from None


_NESTED_OPEN = re.compile(r"\[\s*\[")
_NESTED_CLOSE = re.compile(r"\]\s*\]")


def last_flat_list(text: str) -> str | None:
    """The last match of the official `\\[[^\\]]*\\]` (a "[" to the first "]" after it), found in
    linear time: the regex itself retries every "[" to the end of a text without "]"."""
    found, position = None, 0
    while (start := text.find("[", position)) >= 0 and (end := text.find("]", start + 1)) >= 0:
        found, position = text[start : end + 1], end + 1
    return found


def last_nested_list(text: str) -> str | None:
    """The last match of the official `\\[\\s*\\[.*?\\]\\s*\\]` (a "[[" to the first "]]" after it,
    blanks allowed between the brackets), found in linear time as `last_flat_list` is."""
    found, position = None, 0
    while (opening := _NESTED_OPEN.search(text, position)) and (closing := _NESTED_CLOSE.search(text, opening.end())):
        found, position = text[opening.start() : closing.end()], closing.end()
    return found
