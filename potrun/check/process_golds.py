"""Process golds for `potrun check`: checklists of intermediate values, and checker programs.

Two gold forms that judge more than a final number (DocPuzzle, FineReason):

- A **checklist** (record field `checklist`): intermediate values that must appear in the reasoning,
  as a list of numbers, {"value": v} or {"min": a, "max": b} items (`potrun.check.scoring.ChecklistItem`).
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
`checker_report`) and the checklist's outcome (`checklist_outcome`). `potrun.check.pipeline` runs the
programs.
"""

from __future__ import annotations

import ast
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from potrun.check.scoring import ChecklistItem, check_checklist
from potrun.extractors import extract_program, find_numbers
from potrun.types import Entry, ExecResult, InputError, Isolation, Status, UsageError, Value, json_safe

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
MAX_PROGRAM_CHARS = 100_000  # a program read for its literal containers (`listed_literals`)
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
    # Numbers a program only wrote inside a literal list, tuple, set or dict (candidates it holds, not
    # values it computed): not evidence for a checklist (`listed_literals`).
    listed: frozenset[float] = frozenset()


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
    listed = listed_literals(first_output) if items is not None and first_mode != "cot" else frozenset()
    return ProcessGold(items, tuple(specs) if specs is not None else (), checker, numbers, listed)


def _read_checklist(specs: Any, field_name: str) -> tuple[ChecklistItem, ...]:
    if not isinstance(specs, list):
        raise ProcessGoldError(field_name, 'must be a list of numbers, {"value": v} or {"min": a, "max": b} items')
    items = []
    for position, spec in enumerate(specs):
        try:
            items.append(ChecklistItem.from_spec(spec))
        except UsageError as exc:
            raise ProcessGoldError(field_name, f"item {position}: {exc}") from None
    return tuple(items)


def listed_literals(output: str) -> frozenset[float]:
    """The numbers the output's program writes only as elements of a literal list, tuple, set or dict
    (`cands = [12.5, 13.0, ...]`): what it holds without computing it. A number also written elsewhere
    (`x = 12.5`, `y = x * 2 + 12.5`) is not among them. Bounded: a program over MAX_PROGRAM_CHARS is
    not read (its captured values still face the spray limit)."""
    program = extract_program(output).source
    if program is None or len(program) > MAX_PROGRAM_CHARS:
        return frozenset()
    try:
        tree = ast.parse(program)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return frozenset()
    listed: set[float] = set()
    elsewhere: set[float] = set()
    stack: list[tuple[ast.AST, bool]] = [(tree, False)]
    while stack:
        node, inside = stack.pop()
        constant = node.value if isinstance(node, ast.Constant) else None
        if type(constant) in (int, float) and abs(constant) < 1e300:  # type: ignore[arg-type]
            (listed if inside else elsewhere).add(float(constant))  # type: ignore[arg-type]
        container = isinstance(node, (ast.List, ast.Tuple, ast.Set, ast.Dict))
        stack.extend((child, inside or container) for child in ast.iter_child_nodes(node))
    return frozenset(listed - elsewhere)


# A number in an enumeration ("0, 1, 2, 3, ...") is listed, not stated: at least LISTED_RUN numbers in a
# row with nothing but separators between them are not evidence for a checklist item.
LISTED_RUN = 4
_SEPARATORS = frozenset(" \t\n,;、，；/|")


def observed_in_text(text: str) -> tuple[float, ...]:
    """The numbers written in a chain-of-thought output: each as written ("12.5%" is 12.5) and, when
    it carries a percent sign or a scale word, also scaled (0.125; "3.5 million" is 3500000). Numbers
    in an enumeration (LISTED_RUN or more in a row, only separators between them) are left out: a
    statement ties a value to a step, a list of candidates ties it to nothing."""
    spans = list(itertools.islice(find_numbers(text), MAX_TEXT_NUMBERS))
    listed = _enumerated(text, [(start, end) for start, end, _ in spans])
    found: dict[float, None] = {}
    for count, (_, _, parsed) in enumerate(spans):
        if count in listed:
            continue
        try:
            numbers = (float(parsed.value), float(parsed.scaled()))
        except (ArithmeticError, ValueError):
            continue
        for number in numbers:
            if math.isfinite(number):
                found[number] = None
    return tuple(found)


def _enumerated(text: str, spans: list[tuple[int, int]]) -> set[int]:
    """The positions (in `spans`) of numbers in a run of LISTED_RUN or more with only separators between."""
    listed: set[int] = set()
    run_start = 0
    for k in range(1, len(spans) + 1):
        joined = k < len(spans) and all(ch in _SEPARATORS for ch in text[spans[k - 1][1] : spans[k][0]])
        if not joined:
            if k - run_start >= LISTED_RUN:
                listed.update(range(run_start, k))
            run_start = k
    return listed


# -- checklists ------------------------------------------------------------------------------------------


def checklist_outcome(
    process: ProcessGold, mode: str, outcome: ExecResult, rel_tol: float | None = None
) -> tuple[bool, list[Any]]:
    """(passed, the items missing as written) for the first sample: its captured numbers for a
    program, the numbers in its text for chain of thought. `rel_tol`: the comparator's, when given."""
    assert process.checklist is not None
    if mode == "cot":
        observed: tuple[float, ...] = process.text_numbers or ()
    else:  # what the program computed: not the candidates it only wrote into a literal container
        observed = tuple(x for x in outcome.captured or () if x not in process.listed)
    tolerance = {} if rel_tol is None else {"rel_tol": rel_tol}
    verdict = check_checklist(observed, process.checklist, **tolerance, reject_spray=True)
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
