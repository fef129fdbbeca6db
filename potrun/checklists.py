"""Process-aware golds for `potrun check`: checklists of intermediate values, and checker programs.

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
  trusted gold code like a gold program. potrun runs `<checker>\\n\\nans = check(<answer>)` under the
  trusted policy in fork isolation, with the same limits (a companion of the run's sandbox:
  `Sandbox.companion`), the answer written as a Python literal of plain data (a chain-of-thought
  answer is its text; a program's answer is its value). The sample is correct iff the checker
  returned True (the bool: 1 is not True). A checker decides `correct` even when the record also has
  a gold answer. The model's text only ever reaches the checker as a string literal: never as code.

Pure helpers (`read_process_gold`, `answer_literal`, `checker_program`, `observed_in_text`) plus
`score_process`, which the pipeline calls once per record that has either field.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from potrun.comparators.default import DEFAULTS
from potrun.extractors import find_numbers
from potrun.scoring import ChecklistItem, check_checklist, majority_vote, pass_at_k
from potrun.types import ExecResult, Status, Value, json_safe

if TYPE_CHECKING:  # the pipeline imports this module; these names are only annotations here
    from potrun.pipeline import CheckOptions, RecordResult
    from potrun.sandbox.api import Sandbox

__all__ = [
    "ProcessGold",
    "answer_literal",
    "checker_program",
    "observed_in_text",
    "read_process_gold",
    "score_process",
]

MAX_TEXT_NUMBERS = 10_000  # numbers read from one chain-of-thought output
MAX_LITERAL_DEPTH = 16
CHECKER_ENTRY = "ans"
CHECKER_POLICY, CHECKER_ISOLATION = "trusted", "fork"


@dataclass(frozen=True, slots=True)
class ProcessGold:
    """What a record asks beyond its final answer."""

    checklist: tuple[ChecklistItem, ...] | None = None
    checklist_specs: tuple[Any, ...] = ()  # the items as written, for `checklist_missing`
    checker: str | None = None  # the checker's source
    text_numbers: tuple[float, ...] | None = None  # numbers of the first sample, when it is chain of thought


class ProcessGoldError(ValueError):
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
        items = _read_checklist(specs, checklist_field)  # type: ignore[arg-type]
    if checker is not None and (not isinstance(checker, str) or "def check" not in checker):
        message = "must be the source of a program that defines check(answer)"
        raise ProcessGoldError(checker_field, message)  # type: ignore[arg-type]
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


# -- checkers --------------------------------------------------------------------------------------------


def answer_literal(value: Value, depth: int = 0) -> str:
    """A Python literal for plain data (None, bool, int, float, str, lists of these); anything else is
    refused. A string becomes its repr: whatever it holds, it stays a string."""
    kind = type(value)
    if value is None or kind is bool or kind is int or kind is str:
        return repr(value)
    if kind is float:
        return repr(value) if math.isfinite(value) else f"float({str(value)!r})"  # type: ignore[arg-type]
    if kind is list or kind is tuple:
        if depth >= MAX_LITERAL_DEPTH:
            raise ValueError("answer nested too deeply for a checker")
        return "[" + ", ".join(answer_literal(item, depth + 1) for item in value) + "]"  # type: ignore[union-attr]
    raise TypeError(f"a checker takes plain data, not {kind.__name__}")


def checker_program(checker: str, answer: Value) -> str:
    """The program that runs a checker on one answer: the checker's source, then `ans = check(...)`."""
    return f"{checker.rstrip()}\n\n\n{CHECKER_ENTRY} = check({answer_literal(answer)})\n"


def run_checker(sandbox: Sandbox, checker: str, answers: Sequence[Value]) -> list[ExecResult]:
    """Run the checker on each answer (distinct answers once), trusted, in fork isolation."""
    programs: dict[str, int] = {}
    keys = []
    for answer in answers:
        program = checker_program(checker, answer)
        keys.append(programs.setdefault(program, len(programs)))
    companion = sandbox.companion(CHECKER_POLICY, CHECKER_ISOLATION)
    results = list(companion.run_many(programs, entry=CHECKER_ENTRY))
    return [results[key] for key in keys]


def accepted(result: ExecResult) -> bool:
    """The checker ran to the end and returned True."""
    return result.status is Status.OK and result.value is True


def _checker_report(result: ExecResult | None) -> dict[str, Any]:
    if result is None:
        return {"status": "not_run", "error": "the sample has no answer to check"}
    report = {"status": result.status.value, "value": json_safe(result.value), "accepted": accepted(result)}
    if result.error is not None:
        report["error_type"], report["error"] = result.error_type, result.error
    return report


# -- scoring a record ------------------------------------------------------------------------------------


def score_process(
    result: RecordResult,
    process: ProcessGold,
    modes: Sequence[str],
    outcomes: Sequence[ExecResult],
    options: CheckOptions,
    sandbox: Sandbox | None,
) -> RecordResult:
    """The record's result with its checker verdicts and checklist outcome applied."""
    changes: dict[str, Any] = {}
    if process.checker is not None:
        changes.update(_apply_checker(result, process.checker, outcomes, options, sandbox))
    if process.checklist is not None and result.scored:
        main, mode = outcomes[0], modes[0]
        observed = (process.text_numbers or ()) if mode == "cot" else (main.captured or ())
        rel_tol = options.compare_options.get("rel_tol", DEFAULTS.rel_tol)
        verdict = check_checklist(observed, process.checklist, rel_tol=rel_tol)
        missing = [spec for spec, item in zip(process.checklist_specs, process.checklist) if item in verdict.missing]
        changes["checklist_passed"] = verdict.passed
        changes["checklist_missing"] = missing
    return replace(result, **changes) if changes else result


def _apply_checker(
    result: RecordResult, checker: str, outcomes: Sequence[ExecResult], options: CheckOptions, sandbox: Sandbox | None
) -> dict[str, Any]:
    if sandbox is None:
        raise ValueError("a record with a checker needs a sandbox to run it")
    runnable = [i for i, outcome in enumerate(outcomes) if outcome.status is Status.OK]
    ran = dict(zip(runnable, run_checker(sandbox, checker, [outcomes[i].value for i in runnable])))
    verdicts = [i in ran and accepted(ran[i]) for i in range(len(outcomes))]
    correct = verdicts[0]
    changes: dict[str, Any] = {
        "correct": correct,
        "verdicts": {preset: correct for preset in options.presets},
        "checker": _checker_report(ran.get(0)),
    }
    if result.samples is not None:
        changes["samples"] = _checked_samples(dict(result.samples), outcomes, verdicts, options)
    return changes


def _checked_samples(
    summary: dict[str, Any], outcomes: Sequence[ExecResult], verdicts: list[bool], options: CheckOptions
) -> dict[str, Any]:
    """pass@k and majority vote with the checker as the judge: answers vote as usual (equal under the
    first preset), and the voted answer is correct iff the checker accepted it."""
    from potrun.pipeline import _options_for  # the pipeline imports this module

    n, correct = len(outcomes), sum(verdicts)
    summary["correct"] = correct
    summary["pass@k"] = {str(k): pass_at_k(n, correct, k) for k in options.ks if k <= n}
    preset = options.presets[0]
    voted, _ = majority_vote(outcomes, None, preset=preset, **_options_for(preset, options))
    first = next((i for i, o in enumerate(outcomes) if o.status is Status.OK and o.value is voted), None)
    summary["majority_value"] = json_safe(voted)
    summary["majority_correct"] = first is not None and verdicts[first]
    return summary
