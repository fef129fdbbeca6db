"""FineReason (DAMO-NLP-SG/FineReason): state checking and state transition on Sudoku, graph
coloring, Game of 24 and logic grid puzzles, judged by the official rules, re-implemented.

A file is what the official `main.py` writes, `{data}_{puzzle}_{task}_{model}.jsonl` (e.g.
`outputs/sudoku_states_sudoku_state_checking_mixed-models.jsonl`): each line a `Sample` with
`inputs` (the puzzle and its states), `outputs.current_status` (the current state's label),
`prompt` and `raw_output`. The puzzle and task come from the file name, else from the record's prompt.

- State checking: correct when the official `get_answer` reading of `raw_output` (`answers`) is the
  label. Metrics: accuracy, and precision, recall and F1 with "Unsolvable" (a dead end found) as
  the positive class, beside the confusion counts.
- State transition: the state found in `raw_output` is classified by the puzzle's rules ("1" is a
  valid next state; else the official error class: "sibling", "backtracking failure", "unsolvable
  child", "invalid move", "parsing error", ...); correct when "1". Metrics: accuracy and the count of
  each class.

`strict` reads the model more rightly (the Answer line; the state in every shape `answers` lists)
and the metrics count the records whose verdict differs from the official one. Nothing runs in the
sandbox; the rules run in the parent, bounded (`rules`, `gridpuzzle`, `clues`): a record past the
bounds, or with a malformed puzzle, is a bad_record naming why.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from potrun.benchmarks import base
from potrun.benchmarks.finereason.answers import (
    official_state_text,
    official_status,
    strict_state_text,
    strict_status,
)
from potrun.benchmarks.finereason.game24 import Game24
from potrun.benchmarks.finereason.graphcoloring import GraphColoring
from potrun.benchmarks.finereason.gridpuzzle import GridPuzzle
from potrun.benchmarks.finereason.rules import VALID, PuzzleError, RulesTooCostly
from potrun.benchmarks.finereason.sudoku import Sudoku
from potrun.check.pipeline import Plan, RecordResult
from potrun.check.records import Record
from potrun.types import BadRecord

SANDBOX: dict[str, Any] = {}  # nothing runs in the sandbox

PUZZLES = ("sudoku", "graphcoloring", "game24", "gridpuzzle")
STATE_CHECKING, STATE_TRANSITION = "state_checking", "state_transition"
POSITIVE = "Unsolvable"  # state checking's positive class: a dead end recognised
_FILE_NAME = re.compile(rf"({'|'.join(PUZZLES)})_({STATE_CHECKING}|{STATE_TRANSITION}|e2e)")
# What each official prompter's prompt says, to tell a record's puzzle and task when the file name does not
_PROMPT_PUZZLES = (
    ("sudoku", "Sudoku"),
    ("game24", "Game of 24"),
    ("gridpuzzle", "logic grid puzzle"),
    ("graphcoloring", "graph represented as an adjacency list"),
)
_PROMPT_TASKS = (
    (STATE_CHECKING, 'End your answer with "Answer: (A)"'),
    (STATE_TRANSITION, 'End your answer with "Next state:'),
)


@dataclass(frozen=True)
class FineReasonRun:
    """The official rules for one file (its puzzle and task, when its name says them)."""

    puzzle: str | None
    task: str | None
    strict: bool = False
    name: str = "finereason"

    def plan(self, item: Record | BadRecord) -> Plan:
        """A bad record's plan (unreadable, a field missing, a malformed or too costly puzzle), else
        the official verdict, judged now: nothing runs in the sandbox."""
        return base.unreadable(item) or self._judged(item)  # type: ignore[arg-type]

    def _judged(self, item: Record) -> Plan:
        try:
            result = self._judge(item)
        except (PuzzleError, RulesTooCostly) as exc:
            return base.bad_record(item.line, str(exc), item.line)
        return base.judged_without_programs(lambda: result)

    def _judge(self, item: Record) -> RecordResult:
        data = item.data
        prompt = data.get("prompt")
        prompt = prompt if isinstance(prompt, str) else ""
        puzzle = self.puzzle or _said(prompt, _PROMPT_PUZZLES, "puzzle")
        task = self.task or _said(prompt, _PROMPT_TASKS, "task")
        if task not in (STATE_CHECKING, STATE_TRANSITION):
            raise PuzzleError(f"{puzzle} {task}: end-to-end puzzles are not judged (state checking and transition are)")
        raw, inputs, outputs = _text(data, "raw_output"), _part(data, "inputs"), _part(data, "outputs")
        status = outputs.get("current_status")
        if not isinstance(status, str):
            raise PuzzleError("record has no outputs.current_status")
        if task == STATE_CHECKING:
            official = official_status(raw, puzzle)
            answer = strict_status(raw, puzzle) if self.strict else official
            correct, official_correct = answer == status, official == status
            gold: str | None = status
        else:
            rules = _rules(puzzle, inputs, outputs, status)
            official = rules.classify(official_state_text(raw))
            answer = rules.classify(strict_state_text(raw)) if self.strict else official
            correct, official_correct = answer == VALID, official == VALID
            gold = None
        fields: dict[str, Any] = {"puzzle": puzzle, "task": task}
        if self.strict:
            fields["official_correct"] = official_correct
        return base.verdict(
            item.line,
            item.line,
            correct=correct,
            gold=gold,
            mode="strict" if self.strict else "official",
            extraction=task,
            answer_text=answer if len(answer) <= 200 else answer[:200] + "...",
            fields=fields,
        )

    def metrics(self, results: Sequence[RecordResult]) -> dict[str, Any]:
        judged = [result for result in results if result.fields and result.correct is not None]
        metrics: dict[str, Any] = {}
        checking = [result for result in judged if result.fields and result.fields["task"] == STATE_CHECKING]
        transition = [result for result in judged if result.fields and result.fields["task"] == STATE_TRANSITION]
        if checking:
            metrics[STATE_CHECKING] = state_checking_metrics(checking)
        if transition:
            metrics[STATE_TRANSITION] = state_transition_metrics(transition)
        if self.strict:
            metrics["differs_from_official"] = sum(
                1 for result in judged if result.fields and result.fields["official_correct"] != result.correct
            )
        return metrics


def for_file(path: str, strict: bool = False) -> FineReasonRun:
    """The rules for a file `main.py` wrote: its puzzle and task from its name, when it has them."""
    named = _FILE_NAME.search(PurePath(path).name)
    return FineReasonRun(named.group(1) if named else None, named.group(2) if named else None, strict)


def state_checking_metrics(results: Sequence[RecordResult]) -> dict[str, Any]:
    """Accuracy, and precision, recall and F1 of "Unsolvable" (the positive class)."""
    counts = Counter((result.answer_text == POSITIVE, result.gold == POSITIVE) for result in results)
    tp, fp, fn, tn = counts[True, True], counts[True, False], counts[False, True], counts[False, False]
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    return {
        "records": len(results),
        "accuracy": sum(1 for result in results if result.correct) / len(results),
        "positive": POSITIVE,
        "precision": precision,
        "recall": recall,
        "f1": 2 * precision * recall / (precision + recall) if precision + recall else 0.0,
        "confusion": {"tp": tp, "fp": fp, "fn": fn, "tn": tn},
        "by_puzzle": _accuracy_by_puzzle(results),
    }


def state_transition_metrics(results: Sequence[RecordResult]) -> dict[str, Any]:
    """Accuracy and the count of each official class of the states proposed ("1" is valid)."""
    return {
        "records": len(results),
        "accuracy": sum(1 for result in results if result.correct) / len(results),
        "classes": dict(Counter(result.answer_text for result in results).most_common()),
        "by_puzzle": _accuracy_by_puzzle(results),
    }


def _accuracy_by_puzzle(results: Sequence[RecordResult]) -> dict[str, float]:
    by_puzzle: dict[str, list[bool]] = {}
    for result in results:
        assert result.fields is not None
        by_puzzle.setdefault(result.fields["puzzle"], []).append(bool(result.correct))
    return {puzzle: sum(verdicts) / len(verdicts) for puzzle, verdicts in sorted(by_puzzle.items())}


def _rules(puzzle: str, inputs: Mapping[str, Any], outputs: Mapping[str, Any], status: str) -> Any:
    if puzzle == "sudoku":
        return Sudoku.from_record(inputs, status)
    if puzzle == "graphcoloring":
        return GraphColoring.from_record(inputs, status)
    if puzzle == "game24":
        return Game24.from_record(inputs, status)
    return GridPuzzle.from_record(inputs, outputs, status)


def _said(prompt: str, phrases: tuple[tuple[str, str], ...], what: str) -> str:
    for name, phrase in phrases:
        if phrase in prompt:
            return name
    raise PuzzleError(f"the file name does not name the {what}, nor does the record's prompt")


def _text(data: Mapping[str, Any], name: str) -> str:
    value = data.get(name)
    if not isinstance(value, str):
        raise PuzzleError(f"record has no {name} text")
    return value


def _part(data: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = data.get(name)
    if not isinstance(value, dict):
        raise PuzzleError(f"record has no {name} object")
    return value
