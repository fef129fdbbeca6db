"""Process golds for `potrun check`: checklists of intermediate values, and checker programs.

Two gold forms that judge more than a final number (DocPuzzle, FineReason):

- A **checklist** (record field `checklist`): intermediate values that must appear in the reasoning,
  as a list of numbers, {"value": v} or {"min": a, "max": b} items (`potrun.scoring.ChecklistItem`).
  For a program, they are looked for among the numbers its variables held: the sandbox captures the
  entry function's locals, the answer and the module's globals (`Sandbox.request(capture=True)`,
  plain finite floats converted inside the runner, at most 1,000). For chain of thought, among the
  numbers written in the output (`find_numbers`: each as written, and scaled when it carries a
  percent sign or a scale word). Only the record's first sample is checked. The record then reports
  `checklist_passed` and `checklist_missing`, and the summary `checklist_accuracy`: correct AND
  checklist passed, over the records with a checklist.
- A **checker** (record field `checker`): the source of a program `def check(answer) -> bool`,
  trusted gold code like a gold program. The pipeline runs `<checker>\\n\\nans = check(<answer>)`
  under CHECKER_POLICY in CHECKER_ISOLATION, with the run's limits (a companion of the sandbox it
  holds: `Sandbox.companion`), the answer written as a Python literal of plain data (a
  chain-of-thought answer is its text; a program's answer is its value). The sample is correct iff
  the checker returned True (the bool: 1 is not True). A checker decides `correct` even when the
  record also has a gold answer. The model's text only ever reaches the checker as a string literal:
  never as code.

Everything here is pure (no sandbox, no I/O): reading the fields (`read_process_gold`), the checker's
program text (`answer_literal`, `checker_programs`), reading its results (`accepted`,
`checker_report`) and the checklist's outcome (`checklist_outcome`). `potrun.pipeline` runs the
programs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from potrun.extractors import find_numbers
from potrun.scoring import ChecklistItem, check_checklist
from potrun.types import Entry, ExecResult, InputError, Isolation, Status, Value, json_safe

__all__ = [
    "CHECKER_ENTRY",
    "CHECKER_ISOLATION",
    "CHECKER_POLICY",
    "ProcessGold",
    "ProcessGoldError",
    "accepted",
    "answer_literal",
    "checker_program",
    "checker_programs",
    "checker_report",
    "checklist_outcome",
    "observed_in_text",
    "read_process_gold",
]

MAX_TEXT_NUMBERS = 10_000  # numbers read from one chain-of-thought output
MAX_LITERAL_DEPTH = 16
CHECKER_ENTRY = Entry.ANS
CHECKER_POLICY = "trusted"  # a checker is gold code, like a gold program
CHECKER_ISOLATION = Isolation.FORK


@dataclass(frozen=True, slots=True)
class ProcessGold:
    """What a record asks beyond its final answer."""

    checklist: tuple[ChecklistItem, ...] | None = None
    checklist_specs: tuple[Any, ...] = ()  # the items as written, for `checklist_missing`
    checker: str | None = None  # the checker's source
    text_numbers: tuple[float, ...] | None = None  # numbers of the first sample, when it is chain of thought


class ProcessGoldError(InputError):
    """A checklist or checker field is malformed: the record is a bad_record."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(message)
        self.field_name = field_name


# -- reading a record -----------------------------------------------------------------------------------


def read_process_gold(
    data: Mapping[str, Any],
    first_output: str,
    first_mode: str,
    checklist_field: str | None,
    checker_field: str | None,
) -> ProcessGold | None:
    """The record's checklist and checker, or None when it has neither (absent or null fields).
    Raises ProcessGoldError when one is malformed."""
    specs = data.get(checklist_field) if checklist_field else None
    checker = data.get(checker_field) if checker_field else None
    if specs is None and checker is None:
        return None
    items = None
    if specs is not None:
        assert checklist_field is not None  # a field was read
        items = _read_checklist(specs, checklist_field)
    if checker is not None and (not isinstance(checker, str) or "def check" not in checker):
        assert checker_field is not None
        raise ProcessGoldError(checker_field, "must be the source of a program that defines check(answer)")
    numbers = observed_in_text(first_output) if items is not None and first_mode == "cot" else None
    return ProcessGold(items, tuple(specs) if specs is not None else (), checker, numbers)


def _read_checklist(specs: Any, field_name: str) -> tuple[ChecklistItem, ...]:
    if not isinstance(specs, list):
        raise ProcessGoldError(field_name, 'must be a list of numbers, {"value": v} or {"min": a, "max": b} items')
    items = []
    for position, spec in enumerate(specs):
        try:
            items.append(ChecklistItem.from_spec(spec))
        except (TypeError, ValueError, OverflowError) as exc:
            raise ProcessGoldError(field_name, f"item {position}: {exc}") from None
    return tuple(items)


def observed_in_text(text: str) -> tuple[float, ...]:
    """The numbers written in a chain-of-thought output: each as written ("12.5%" is 12.5) and, when
    it carries a percent sign or a scale word, also scaled (0.125; "3.5 million" is 3500000)."""
    found: dict[float, None] = {}
    for count, (_, _, parsed) in enumerate(find_numbers(text)):
        if count >= MAX_TEXT_NUMBERS:
            break
        try:
            numbers = (float(parsed.value), float(parsed.scaled()))
        except (ArithmeticError, ValueError):
            continue
        for number in numbers:
            if math.isfinite(number):
                found[number] = None
    return tuple(found)


# -- checklists ------------------------------------------------------------------------------------------


def checklist_outcome(
    process: ProcessGold, mode: str, outcome: ExecResult, rel_tol: float | None = None
) -> tuple[bool, list[Any]]:
    """(passed, the items missing as written) for the first sample: its captured numbers for a
    program, the numbers in its text for chain of thought. `rel_tol`: the comparator's, when given."""
    assert process.checklist is not None
    observed = (process.text_numbers or ()) if mode == "cot" else (outcome.captured or ())
    tolerance = {} if rel_tol is None else {"rel_tol": rel_tol}
    verdict = check_checklist(observed, process.checklist, **tolerance)
    written = zip(process.checklist_specs, process.checklist, strict=True)
    missing = [spec for spec, item in written if item in verdict.missing]
    return verdict.passed, missing


# -- checkers --------------------------------------------------------------------------------------------


def answer_literal(value: Value, depth: int = 0) -> str:
    """A Python literal for plain data (None, bool, int, float, str, lists of these); anything else is
    refused. A string becomes its repr: whatever it holds, it stays a string."""
    if value is None or type(value) in (bool, int, str):
        return repr(value)
    if isinstance(value, float) and type(value) is float:
        return repr(value) if math.isfinite(value) else f"float({str(value)!r})"
    if type(value) in (list, tuple):
        if depth >= MAX_LITERAL_DEPTH:
            raise ValueError("answer nested too deeply for a checker")
        return "[" + ", ".join(answer_literal(item, depth + 1) for item in value) + "]"  # type: ignore[union-attr]
    raise TypeError(f"a checker takes plain data, not {type(value).__name__}")


def checker_program(checker: str, answer: Value) -> str:
    """The program that runs a checker on one answer: the checker's source, then `ans = check(...)`."""
    return f"{checker.rstrip()}\n\n\n{CHECKER_ENTRY} = check({answer_literal(answer)})\n"


def checker_programs(checker: str, answers: Sequence[Value]) -> tuple[list[str], list[int]]:
    """The distinct programs that check `answers` (an answer given twice is checked once), and for
    each answer the position of its program."""
    positions: dict[str, int] = {}
    keys = [positions.setdefault(checker_program(checker, answer), len(positions)) for answer in answers]
    return list(positions), keys


def accepted(result: ExecResult) -> bool:
    """The checker ran to the end and returned True."""
    return result.status is Status.OK and result.value is True


def checker_report(result: ExecResult | None) -> dict[str, Any]:
    """The record's `checker` field: how the checker fared on the first sample."""
    if result is None:
        return {"status": "not_run", "error": "the sample has no answer to check"}
    report = {"status": result.status.value, "value": json_safe(result.value), "accepted": accepted(result)}
    if result.error is not None:
        report["error_type"], report["error"] = result.error_type, result.error
    return report
