"""What `potrun validate` finds: the problem codes (the table in potrun.validation's docstring, as
data), one Problem, and the ValidationReport of one record."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from potrun.types import Value, json_safe

ERROR, WARNING = "error", "warning"


# code -> (severity, meaning): the table of potrun.validation's docstring, as data.
PROBLEM_CODES: Mapping[str, tuple[str, str]] = {
    "bad_record": (ERROR, "the record cannot be validated (invalid JSON, program field missing or not a string)"),
    "syntax_error": (ERROR, "the program does not parse"),
    "runtime_error": (ERROR, "it raised an exception"),
    "timeout": (ERROR, "it ran past the CPU-time limit (or the wall-clock safety net)"),
    "memory_limit": (ERROR, "it went over the memory limit"),
    "output_limit": (ERROR, "it printed or returned more than the output limit"),
    "crashed": (ERROR, "its process died (signal, os._exit)"),
    "policy_violation": (ERROR, "the policy refused it"),
    "sandbox_error": (ERROR, "potrun's own machinery failed"),
    "no_answer": (ERROR, "it ran but gave no answer"),
    "not_a_number": (ERROR, "the answer is not an int or a float"),
    "not_finite": (ERROR, "the answer is NaN or an infinity"),
    "nondeterministic": (ERROR, "two runs gave different results"),
    "wrong_answer": (ERROR, "the executed value does not match the recorded answer"),
    "no_solution_function": (WARNING, "no top-level `def solution():`"),
    "variables_not_first": (WARNING, "the program does not start by defining its variables"),
    "no_comment": (WARNING, "the program has no comment"),
    "print_only_answer": (WARNING, "the answer is printed, not returned"),
    "import_not_allowed": (WARNING, "an import outside the restricted allowlist"),
    "slow": (WARNING, "it ran for a large part of the time limit"),
    "unreadable_by_scorer": (ERROR, "the benchmark's official scorer cannot read the answer"),
}


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with a gold: `line` is the program's line where it applies, or None."""

    code: str
    severity: str
    message: str
    line: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "severity": self.severity, "message": self.message, "line": self.line}


@dataclass(frozen=True, slots=True)
class ValidationReport:
    """The verdict on one gold record; `to_json()` is one line of `potrun validate`'s output.

    `line` is the record's line in the input file; `value` what the program returned (run 1);
    `answer` the recorded answer (None when the record has none)."""

    id: Any
    line: int
    problems: tuple[Problem, ...] = ()
    value: Value = None
    value_type: str | None = None
    answer: Any = None
    answer_field: str | None = None
    status: str | None = None  # run 1's execution status; None when nothing ran
    entry: str | None = None
    wall_s: float = 0.0

    @property
    def ok(self) -> bool:
        """No error-severity problem (warnings allowed)."""
        return not any(p.severity == ERROR for p in self.problems)

    def __bool__(self) -> bool:
        # "is this gold good?" allows warnings (.ok) or not (.problems): say which
        raise TypeError("a ValidationReport has no truth value: test .ok (no error; warnings allowed) or .problems")

    @property
    def codes(self) -> tuple[str, ...]:
        return tuple(p.code for p in self.problems)

    @property
    def errors(self) -> tuple[Problem, ...]:
        return tuple(p for p in self.problems if p.severity == ERROR)

    @property
    def warnings(self) -> tuple[Problem, ...]:
        return tuple(p for p in self.problems if p.severity == WARNING)

    @property
    def fixable(self) -> bool:
        """The program is fine (warnings aside) and only the recorded answer is wrong."""
        return [p.code for p in self.errors] == ["wrong_answer"]

    def to_json(self) -> dict[str, Any]:
        return {
            "line": self.line,
            "id": self.id,
            "ok": self.ok,
            "problems": [p.to_json() for p in self.problems],
            "value": json_safe(self.value),
            "value_type": self.value_type,
            "answer": self.answer,
            "status": self.status,
            "entry": self.entry,
            "wall_s": round(self.wall_s, 6),
        }


def problem(code: str, message: str, line: int | None = None) -> Problem:
    return Problem(code, PROBLEM_CODES[code][0], message, line)


def _names(value: str | Iterable[str]) -> tuple[str, ...]:
    if isinstance(value, str):
        return tuple(name.strip() for name in value.split(",") if name.strip())
    return tuple(value)
