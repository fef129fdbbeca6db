"""Where FineReason's answers are read in a model's raw output.

State checking, as the official `get_answer`: the last "(A)" or "(B)" anywhere in the text decides;
without one, the text after the last "Answer:" is searched for the puzzle's words ("Solvable" /
"Unsolvable", or "Colorable" / "Uncolorable" for graph coloring), then for a capital A or B
anywhere in it; failing all that the prediction is the raw text itself. With `strict`, the letter
on the last "Answer:" line decides first (a note naming the other letter after it does not).

State transition: the official code reads the state in the text after the last "Next state:"
(`official_state_text`). With `strict` the state is the first bracketed list after the last of
"Next state:", "S(i+1) =" or "final answer is" (bold, a code fence or a line break between them
allowed), or the last bracketed list in the text when none is written; what a closed `<think>` block
holds is not read (`strict_state_text`).
"""

from __future__ import annotations

import re
from collections import deque

from potrun.benchmarks.finereason.rules import MAX_STATE_CHARS

SOLVABLE, UNSOLVABLE = "Solvable", "Unsolvable"
WORDS = {"graphcoloring": ("Colorable", "Uncolorable")}  # the others ask for Solvable / Unsolvable
_LETTER = re.compile(r"\(([AB])\)")
_ANSWER_LINE = re.compile(r"Answer:\s*\**\s*\(?([AB])\b")
_STATE_MARKER = re.compile(r"Next state:|S\(i\s*\+\s*1\)\s*=|final answer is", re.IGNORECASE)
NEXT_STATE = "Next state:"


def official_status(raw: str, puzzle: str) -> str:
    """The official state-checking prediction: "Solvable", "Unsolvable" or the raw text."""
    last = _last_match(_LETTER, raw)
    if last is not None:
        return SOLVABLE if last.group(1) == "A" else UNSOLVABLE
    yes, no = WORDS.get(puzzle, (SOLVABLE, UNSOLVABLE))
    answer = raw.rpartition("Answer:")[2]
    for word, status in ((yes, SOLVABLE), (no, UNSOLVABLE), ("A", SOLVABLE), ("B", UNSOLVABLE)):
        if word in answer:
            return status
    return raw


def strict_status(raw: str, puzzle: str) -> str:
    """The letter on the last "Answer:" line outside a <think> block; the official reading without one."""
    text = _after_thinking(raw)
    last = _last_match(_ANSWER_LINE, text)
    if last is not None:
        return SOLVABLE if last.group(1) == "A" else UNSOLVABLE
    return official_status(text, puzzle)


def official_state_text(raw: str) -> str:
    """The text the official rules read the next state in: after the last "Next state:"."""
    return raw.rpartition(NEXT_STATE)[2]


def strict_state_text(raw: str) -> str:
    """The bracketed list potrun reads as the next state (empty when there is none)."""
    text = _after_thinking(raw)
    last = _last_match(_STATE_MARKER, text)
    if last is not None:
        start = text.find("[", last.end())
        return _balanced(text, start) if start >= 0 else ""
    end = text.rfind("]")
    return _balanced_before(text, end) if end >= 0 else ""


def _last_match(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    found = deque(pattern.finditer(text), maxlen=1)
    return found[0] if found else None


def _after_thinking(raw: str) -> str:
    """The text after a closed <think> block (all of it when there is none)."""
    return raw.rpartition("</think>")[2]


def _balanced(text: str, start: int) -> str:
    """The bracketed list opening at `start` (to its matching "]", or the rest of the text)."""
    depth = 0
    for index in range(start, min(len(text), start + MAX_STATE_CHARS)):
        depth += {"[": 1, "]": -1}.get(text[index], 0)
        if depth == 0:
            return text[start : index + 1]
    return text[start:]


def _balanced_before(text: str, end: int) -> str:
    """The bracketed list closing at `end`."""
    depth = 0
    for index in range(end, max(-1, end - MAX_STATE_CHARS), -1):
        depth += {"]": 1, "[": -1}.get(text[index], 0)
        if depth == 0:
            return text[index : end + 1]
    return text[: end + 1]
