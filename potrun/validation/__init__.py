"""`potrun validate`: check a file of gold programs the way DocMath-Eval's annotation tool did, at scale.

    gold record --map fields--> program --parse--> conventions (warnings)
                                        --sandbox, run 1 (hash seed 0)--> value --is it a number?--
                                        --sandbox, run 2 (hash seed 1)--> same value? (determinism)
                                        --compare with the recorded answer--> ValidationReport

Every record gets exactly one `ValidationReport`, in input order, listing every problem found. Records
stream through (nothing is loaded whole) and one warm pair of sandboxes serves them all: run 2 only
happens for programs whose run 1 produced a value, on a second pool whose workers have another hash
seed, so a gold whose answer depends on set or dict order (or on the process) is caught.

Problem codes (stable; `severity` is fixed per code):

=====================  ========  ======================================================================
code                   severity  meaning
=====================  ========  ======================================================================
bad_record             error     the record cannot be validated: invalid JSON, not an object, the
                                 program field missing, or not a string (or a list of one string)
syntax_error           error     the program does not parse
runtime_error          error     it raised an exception (type and message; line where it was raised)
timeout                error     it ran past the CPU-time limit (or the wall-clock safety net)
memory_limit           error     it went over the memory limit
output_limit           error     it printed (or returned) more than the output limit
crashed                error     its process died (a signal, os._exit)
policy_violation       error     the policy refused it (only with policy="restricted")
sandbox_error          error     potrun's own machinery failed, even after a retry
no_answer              error     it ran, but gave no answer (solution() returned None, no `ans`, ...)
not_a_number           error     the answer is not an int or a float (bool, str, list, complex, ...)
not_finite             error     the answer is NaN or an infinity
nondeterministic       error     two runs (other worker, other hash seed) gave different results
wrong_answer           error     the executed value does not match the recorded answer (`compare`)
no_solution_function   warning   no top-level `def solution():` without parameters
variables_not_first    warning   the program does not start by defining its variables (name = value)
no_comment             warning   the program has no `#` comment
print_only_answer      warning   the answer is printed, not returned
import_not_allowed     warning   an import outside the restricted allowlist: the gold would not run
                                 under policy="restricted"
slow                   warning   it used more than `slow_fraction` (default 0.1) of its CPU time limit
unreadable_by_scorer   error     `benchmark="docmath"`: DocMath-Eval's scorer cannot read the answer's type
                                 (get_acc asserts int, float, float64 or bool: a numpy.int64, float32 or
                                 Decimal gold scores 0 for every prediction), or cannot call solution()
=====================  ========  ======================================================================

A record whose only error is `wrong_answer` is `fixable`: the program is fine and the recorded answer
is what is wrong (`potrun validate --fix-answers OUT` writes a copy with the executed value in place).
"""

from __future__ import annotations

import ast
import io
import itertools
import json
import math
import sys
import time
import tokenize
from collections import Counter, deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

from potrun.check.records import ANSWER_FIELDS, ID_FIELDS, PROGRAM_FIELDS, Record, first_present, read_records
from potrun.policies import DENIED_ATTRIBUTES, module_allowed
from potrun.sandbox.api import Sandbox, SandboxConfig
from potrun.sandbox.wire.protocol import RunRequest
from potrun.types import (
    DEFAULT_MEMORY_MB,
    DEFAULT_TIMEOUT_S,
    ENTRY_FUNCTIONS,
    BadRecord,
    Entry,
    ExecResult,
    Status,
    UsageError,
    Value,
    json_safe,
)

ERROR, WARNING = "error", "warning"

# code -> (severity, meaning): the table above, as data.
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
BENCHMARKS = ("docmath",)  # benchmarks whose scorer's reading of a gold validate checks

SLOW_FRACTION = 0.1

_LIMITS = frozenset({Status.TIMEOUT, Status.MEMORY_LIMIT, Status.SANDBOX_ERROR})
_STATUS_CODES = {
    Status.SYNTAX_ERROR: "syntax_error",
    Status.POLICY_VIOLATION: "policy_violation",
    Status.ERROR: "runtime_error",
    Status.TIMEOUT: "timeout",
    Status.MEMORY_LIMIT: "memory_limit",
    Status.OUTPUT_LIMIT: "output_limit",
    Status.CRASHED: "crashed",
    Status.SANDBOX_ERROR: "sandbox_error",
    Status.NO_ANSWER: "no_answer",
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


# -- the API ---------------------------------------------------------------------------------------


def validate(
    records: str | Path | Iterable[Record | BadRecord | Mapping[str, Any]],
    *,
    program_field: str | Iterable[str] = PROGRAM_FIELDS,
    answer_field: str | Iterable[str] = ANSWER_FIELDS,
    id_field: str | Iterable[str] = ID_FIELDS,
    compare: str = "default",
    compare_options: Mapping[str, Any] | None = None,
    slow_fraction: float = SLOW_FRACTION,
    ignore: Iterable[str] = (),
    sandbox: Sandbox | None = None,
    recheck: Sandbox | None = None,
    policy: str = "trusted",
    timeout: float = DEFAULT_TIMEOUT_S,
    memory_mb: int = DEFAULT_MEMORY_MB,
    workers: int | None = None,
    benchmark: str | None = None,
    **sandbox_options: Any,
) -> Iterator[ValidationReport]:
    """Validate gold programs; yield one ValidationReport per record, in input order.

    `records`: a path (JSON Lines or a JSON array, streamed), or an iterable of `Record`s,
    `BadRecord`s or plain dicts (numbered from 1). Fields are mapped as in `potrun check`: each
    `*_field` is a name or several, the first present one is used. A program field may also hold a
    list of exactly one program (the PoT files' `generated`).

    Sandboxes: by default validate starts two pools (the given `policy`, `timeout`, `memory_mb`,
    `workers` and any other `Sandbox` option), with hash seeds 0 and 1, and closes them at the end.
    Pass `sandbox` (and `recheck`, a second Sandbox, ideally with another `hash_seed`) to use your
    own; they are started if needed and left open. With `sandbox` alone, each program runs twice
    on it (other worker, same hash seed).

    `benchmark="docmath"`: each gold that runs is also run the way DocMath-Eval's evaluation.py runs
    it, and flagged `unreadable_by_scorer` when its scorer cannot read the answer's type.

    `ignore`: problem codes to leave out. `slow_fraction`: a run that used more than this fraction of
    the CPU time limit (`timeout`) is reported as `slow`.

    Bad options raise UsageError and an unreadable file InputError at the call; the reports come
    as the returned iterator is consumed.
    """
    settings = _Settings(
        program_fields=_names(program_field),
        answer_fields=_names(answer_field),
        id_fields=_names(id_field),
        compare=compare,
        compare_options=dict(compare_options or {}),
        slow_fraction=slow_fraction,
        ignore=frozenset(ignore),
        benchmark=benchmark,
    )
    items = _items(records)
    first = next(items, None)  # an unreadable file fails here, before any sandbox starts
    if first is None:
        return iter(())
    owned: list[Sandbox] = []  # built here (cheap: nothing starts before the first record) so that
    if sandbox is None:  # bad sandbox options fail at the call; started and closed by the iterator
        given = dict(policy=policy, timeout=timeout, memory_mb=memory_mb, workers=workers, **sandbox_options)
        config = SandboxConfig.from_options(given, "validate")
        sandbox = Sandbox.from_config(config)
        owned.append(sandbox)
        if recheck is None:
            recheck = Sandbox.from_config(replace(config, hash_seed=config.hash_seed + 1))
            owned.append(recheck)
    return _validate(itertools.chain([first], items), settings, sandbox, recheck, owned)


def _validate(
    items: Iterator[Record | BadRecord],
    settings: _Settings,
    sandbox: Sandbox,
    recheck: Sandbox | None,
    owned: list[Sandbox],
) -> Iterator[ValidationReport]:
    try:
        yield from _validate_items(items, sandbox, recheck, settings)
    finally:
        for box in owned:
            box.close()


@dataclass(frozen=True, slots=True)
class _Settings:
    program_fields: tuple[str, ...]
    answer_fields: tuple[str, ...]
    id_fields: tuple[str, ...]
    compare: str
    compare_options: Mapping[str, Any]
    slow_fraction: float
    ignore: frozenset[str]
    benchmark: str | None = None

    def __post_init__(self) -> None:
        from potrun.comparators import PRESETS

        if self.compare not in PRESETS:
            raise UsageError(f"unknown comparator preset {self.compare!r}; known: {', '.join(PRESETS)}")
        unknown = sorted(self.ignore - set(PROBLEM_CODES))
        if unknown:
            raise UsageError(f"unknown problem code {', '.join(unknown)}; known: {', '.join(PROBLEM_CODES)}")
        if self.benchmark is not None and self.benchmark not in BENCHMARKS:
            raise UsageError(f"validate knows no benchmark {self.benchmark!r}; known: {', '.join(BENCHMARKS)}")
        if not self.program_fields:
            raise UsageError("a program field is needed")
        if type(self.slow_fraction) not in (int, float) or not 0 < self.slow_fraction <= 1:
            raise UsageError("slow_fraction must be in (0, 1]")
        accepted = PRESETS[self.compare].defaults
        extra = sorted(set(self.compare_options) - set(accepted))
        if extra:
            raise UsageError(f"preset {self.compare!r} takes no option {', '.join(extra)}")


def _names(value: str | Iterable[str]) -> tuple[str, ...]:
    if isinstance(value, str):
        return tuple(name.strip() for name in value.split(",") if name.strip())
    return tuple(value)


def _items(records: str | Path | Iterable[Any]) -> Iterator[Record | BadRecord]:
    if isinstance(records, (str, Path)):
        return _read(records)
    if isinstance(records, (bytes, Mapping)) or not hasattr(records, "__iter__"):
        raise UsageError(f"records must be a path or an iterable of records, not {type(records).__name__}")
    return (_as_item(item, number) for number, item in enumerate(records, start=1))


def _read(path: str | Path) -> Iterator[Record | BadRecord]:
    yield from read_records(path)  # a line that is not UTF-8 is a BadRecord in its place


def _as_item(item: Any, number: int) -> Record | BadRecord:
    if isinstance(item, (Record, BadRecord)):
        return item
    if isinstance(item, Mapping):
        return Record(number, dict(item))
    return BadRecord(number, f"a record must be a mapping, not {type(item).__name__}")


# -- one record ------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Gold:
    """A record after field mapping and static analysis, waiting for its runs."""

    line: int
    id: Any
    source: str | None = None
    answer: Any = None
    answer_field: str | None = None
    problems: list[Problem] = field(default_factory=list)  # bad_record, or the static warnings
    print_line: int | None = None  # the first print() call, for print_only_answer


def _validate_items(
    items: Iterator[Record | BadRecord], box: Sandbox, recheck: Sandbox | None, settings: _Settings
) -> Iterator[ValidationReport]:
    pending: deque[_Gold] = deque()

    def golds() -> Iterator[_Gold]:
        for item in items:
            gold = _prepare(item, settings)
            pending.append(gold)
            yield gold

    if recheck is None or recheck is box:
        # One pool: each program twice in a row (the pool spreads them over its workers).
        def requests() -> Iterator[RunRequest | None]:
            for gold in golds():
                if gold.source is None:
                    yield None
                else:
                    yield box.request(gold.source)
                    yield box.request(gold.source)
                    yield from _scorer_request(gold, box, settings)

        results = box.run_requests(requests())
        for first in results:
            gold = pending.popleft()
            second = next(results) if first is not None else None
            scored = next(results) if first is not None and settings.benchmark else None
            yield _finish(gold, first, second, box, settings, scored)
        return

    # Two pools: run 2 is asked for as run 1's results arrive, only for programs that gave a value.
    second_box: Sandbox = recheck

    held: deque[tuple[_Gold, ExecResult | None, ExecResult | None]] = deque()

    def first_requests() -> Iterator[RunRequest | None]:
        for gold in golds():
            yield box.request(gold.source) if gold.source is not None else None
            yield from _scorer_request(gold, box, settings)

    def second_requests() -> Iterator[RunRequest | None]:
        firsts = iter(box.run_requests(first_requests()))
        for first in firsts:
            gold = pending.popleft()
            scored = next(firsts) if first is not None and settings.benchmark else None
            held.append((gold, first, scored))
            rerun = first is not None and first.status is Status.OK and gold.source is not None
            yield second_box.request(gold.source) if rerun and gold.source is not None else None

    for second in second_box.run_requests(second_requests()):
        gold, first, scored = held.popleft()
        yield _finish(gold, first, second, box, settings, scored)


def _prepare(item: Record | BadRecord, settings: _Settings) -> _Gold:
    """Map the record's fields; parse the program and check the annotation conventions."""
    if isinstance(item, BadRecord):
        return _Gold(item.line, None, problems=[problem("bad_record", item.message)])
    data = item.data
    id_name = first_present(data, settings.id_fields)
    gold = _Gold(item.line, data[id_name] if id_name is not None else item.line)
    answer_name = first_present(data, settings.answer_fields)
    if answer_name is not None:
        gold.answer, gold.answer_field = data[answer_name], answer_name
    program_name = first_present(data, settings.program_fields)
    if program_name is None:
        names = "/".join(repr(name) for name in settings.program_fields)
        gold.problems.append(problem("bad_record", f"no program field ({names})"))
        return gold
    program = data[program_name]
    if isinstance(program, list) and len(program) == 1:
        program = program[0]
    if not isinstance(program, str):
        what = f"a list of {len(program)}" if isinstance(program, list) else f"a {type(program).__name__}"
        gold.problems.append(
            problem("bad_record", f"field {program_name!r} must be a program (a string, or a list of one), not {what}")
        )
        return gold
    gold.source = program
    gold.problems.extend(_conventions(gold, program))
    return gold


def _scorer_request(gold: _Gold, box: Sandbox, settings: _Settings) -> Iterator[RunRequest]:
    """The run of the gold the way the benchmark's scorer runs it (`benchmark`), beside run 1."""
    if settings.benchmark and gold.source is not None:
        from potrun.benchmarks.docmath import gold_type_program

        yield box.request(gold_type_program(gold.source), Entry.SOLUTION)


def _finish(
    gold: _Gold,
    first: ExecResult | None,
    second: ExecResult | None,
    box: Sandbox,
    settings: _Settings,
    scored: ExecResult | None = None,
) -> ValidationReport:
    """Combine the static findings, the two runs and the scorer's run into the record's report."""
    if first is None:
        return _report(gold, gold.problems, None, settings)
    found = list(_execution_problems(first))
    if not found and second is not None:
        if second.status in _LIMITS:  # a limit reached on run 2 is that limit, not a different answer
            found += [
                replace(p, message=f"run 2: {p.message} (run 1 took {first.wall_s:.2f} s)")
                for p in _execution_problems(second)
            ]
        else:
            found += _determinism_problems(first, second)
    if not found and gold.answer_field is not None:
        found += _answer_problems(first.value, gold.answer, gold.answer_field, settings)
    if scored is not None and first.status is Status.OK:
        from potrun.benchmarks.docmath import unreadable_gold

        why = unreadable_gold(scored)
        if why is not None:
            found.append(problem("unreadable_by_scorer", f"DocMath-Eval: {why}"))
    warnings = list(gold.problems)
    if first.entry == Entry.STDOUT and not any(p.code == "print_only_answer" for p in warnings):
        warnings.append(
            problem(
                "print_only_answer",
                "the answer was read from the last printed line; return it instead",
                gold.print_line,
            )
        )
    limit = box.limits.timeout_s  # CPU seconds, which decide a timeout
    took = max(first.cpu_s, second.cpu_s if second is not None else 0.0)
    if first.status is not Status.TIMEOUT and took > settings.slow_fraction * limit:
        warnings.append(problem("slow", f"used {took:.2f} s of CPU, {took / limit:.0%} of the {limit:g} s limit"))
    return _report(gold, found + warnings, first, settings)


def _report(gold: _Gold, found: list[Problem], run: ExecResult | None, settings: _Settings) -> ValidationReport:
    kept = tuple(p for p in found if p.code not in settings.ignore)
    return ValidationReport(
        id=gold.id,
        line=gold.line,
        problems=kept,
        value=run.value if run is not None else None,
        value_type=run.value_type if run is not None else None,
        answer=gold.answer,
        answer_field=gold.answer_field,
        status=str(run.status) if run is not None else None,
        entry=run.entry if run is not None else None,
        wall_s=run.wall_s if run is not None else 0.0,
    )


# -- execution -------------------------------------------------------------------------------------


def _execution_problems(run: ExecResult) -> Iterator[Problem]:
    """Did it run without error and return an int or a float?"""
    if run.status is not Status.OK:
        if run.status is Status.NO_ANSWER and run.error_type == "Unconvertible":
            yield problem("not_a_number", f"the answer is not a number: {run.error}")
            return
        code = _STATUS_CODES[run.status]
        detail = run.error or str(run.status)
        if run.status is Status.NO_ANSWER and run.entry in ENTRY_FUNCTIONS:
            detail = f"{run.entry}() returned None"
        if run.status is Status.ERROR and run.error_type:
            detail = f"{run.error_type}: {run.error}" if run.error else run.error_type
        yield problem(code, detail, run.line)
        return
    value = run.value
    if type(value) is float and not math.isfinite(value):
        yield problem("not_finite", f"the answer is {json_safe(value)}")
    elif type(value) not in (int, float):
        yield problem("not_a_number", f"the answer is a {run.value_type}, not an int or a float: {_show(value)}")


def _determinism_problems(first: ExecResult, second: ExecResult) -> list[Problem]:
    if _outcome(first) == _outcome(second):
        return []
    return [
        problem(
            "nondeterministic",
            f"run 1 gave {_describe(first)}, run 2 (another worker and hash seed) gave {_describe(second)}",
        )
    ]


def _outcome(run: ExecResult) -> tuple[Any, ...]:
    value = run.value
    if isinstance(value, float) and type(value) is float:  # exact, and NaN equals NaN
        return (run.status, run.value_type, ("float", value.hex()))
    return (run.status, run.value_type, json.dumps(value) if isinstance(value, list) else value)


def _describe(run: ExecResult) -> str:
    return _show(run.value) if run.status is Status.OK else f"{run.status} ({run.error or ''})".replace(" ()", "")


def _answer_problems(value: Value, answer: Any, answer_field: str, settings: _Settings) -> list[Problem]:
    from potrun.comparators import compare

    verdict = compare(value, answer, preset=settings.compare, **settings.compare_options)
    if verdict.correct:
        return []
    reason = f": {verdict.reason}" if verdict.reason else ""
    return [
        problem(
            "wrong_answer",
            f"returns {_show(value)}, the recorded {answer_field} is {_show(answer)} ({settings.compare}{reason})",
        )
    ]


def _show(value: Any, limit: int = 80) -> str:
    text = json.dumps(json_safe(value), ensure_ascii=False) if not isinstance(value, float) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# -- conventions (static, on the parent's side: parsing never runs anything) ------------------------


def _conventions(gold: _Gold, source: str) -> list[Problem]:
    """DocMath-Eval's annotation conventions, as warnings. A program that does not parse gets none:
    the sandbox reports its syntax error."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    found: list[Problem] = []
    solution = _solution_function(tree)
    if solution is None:
        found.append(
            problem(
                "no_solution_function",
                "no top-level `def solution():`; the annotation convention is a `solution()` that returns the answer",
            )
        )
    elif _has_parameters(solution):
        found.append(
            problem(
                "no_solution_function",
                "`solution` takes parameters; the convention is `def solution():`",
                solution.lineno,
            )
        )
    body = solution.body if solution is not None else tree.body
    first = _first_statement(body)
    if first is None or not _defines_variable(first):
        where = first.lineno if first is not None else (solution.lineno if solution is not None else None)
        found.append(
            problem(
                "variables_not_first",
                "the program should start by defining its variables (name = value), then compute",
                where,
            )
        )
    if not _has_comment(source):
        found.append(problem("no_comment", "no comment: say what the variables are and what is computed"))
    prints = [node for node in ast.walk(tree) if isinstance(node, ast.Call) and _is_print_call(node)]
    gold.print_line = min(node.lineno for node in prints) if prints else None
    if prints and solution is not None and not _returns_value(solution):
        found.append(
            problem("print_only_answer", "solution() prints but returns no value; return the answer", gold.print_line)
        )
    found.extend(_import_problems(tree))
    return found


def _solution_function(tree: ast.Module) -> ast.FunctionDef | None:
    found = None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == Entry.SOLUTION:
            found = node  # the last definition wins, as at run time
    return found


def _has_parameters(function: ast.FunctionDef) -> bool:
    args = function.args
    return bool(args.posonlyargs or args.args or args.vararg or args.kwonlyargs or args.kwarg)


def _first_statement(body: list[ast.stmt]) -> ast.stmt | None:
    """The first statement that is not a docstring, an import, `global` or `pass`."""
    for index, statement in enumerate(body):
        if (
            index == 0
            and isinstance(statement, ast.Expr)
            and isinstance(statement.value, ast.Constant)
            and isinstance(statement.value.value, str)
        ):
            continue
        if isinstance(statement, (ast.Import, ast.ImportFrom, ast.Global, ast.Nonlocal, ast.Pass)):
            continue
        return statement
    return None


def _defines_variable(statement: ast.stmt) -> bool:
    """`name = <literal>` (numbers, strings, lists of them, simple arithmetic on them)."""
    if isinstance(statement, ast.Assign):
        targets, value = statement.targets, statement.value
    elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
        targets, value = [statement.target], statement.value
    else:
        return False
    return all(_is_name_target(t) for t in targets) and _is_literal(value)


def _is_name_target(node: ast.expr) -> bool:
    if isinstance(node, (ast.Tuple, ast.List)):
        return all(_is_name_target(e) for e in node.elts)
    return isinstance(node, ast.Name)


def _is_literal(node: ast.expr, depth: int = 0) -> bool:
    if depth > 50:
        return False
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.UnaryOp):
        return _is_literal(node.operand, depth + 1)
    if isinstance(node, ast.BinOp):
        return _is_literal(node.left, depth + 1) and _is_literal(node.right, depth + 1)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return all(_is_literal(e, depth + 1) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(k is not None and _is_literal(k, depth + 1) for k in node.keys) and all(
            _is_literal(v, depth + 1) for v in node.values
        )
    return False


def _has_comment(source: str) -> bool:
    try:
        return any(token.type == tokenize.COMMENT for token in tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):
        return "#" in source


def _is_print_call(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print"


def _returns_value(function: ast.FunctionDef) -> bool:
    """A `return <expr>` in the function itself (not in a nested function) that is not `return None`."""
    stack: list[ast.AST] = list(function.body)
    while stack:
        node = stack.pop()
        if (
            isinstance(node, ast.Return)
            and node.value is not None
            and not (isinstance(node.value, ast.Constant) and node.value.value is None)
        ):
            return True
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        stack.extend(ast.iter_child_nodes(node))
    return False


def _import_problems(tree: ast.Module) -> Iterator[Problem]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if not module_allowed(alias.name):
                    yield _import_problem(f"import {alias.name}", node.lineno)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level or not module_allowed(module):
                yield _import_problem(f"from {'.' * node.level}{module} import ...", node.lineno)
                continue
            denied = DENIED_ATTRIBUTES.get(module.split(".")[0], frozenset())
            for alias in node.names:
                if alias.name in denied:
                    yield _import_problem(f"from {module} import {alias.name}", node.lineno)


def _import_problem(what: str, line: int) -> Problem:
    return problem(
        "import_not_allowed",
        f"`{what}` is outside the restricted allowlist: the gold would not run under policy='restricted'",
        line,
    )


# -- the run's summary and the fixed copy ---------------------------------------------------------


@dataclass
class ValidationSummary:
    """Counts as reports stream by; `render_summary` prints them as a table."""

    total: int = 0
    with_errors: int = 0
    with_warnings_only: int = 0
    clean: int = 0
    problems: Counter[str] = field(default_factory=Counter)  # problems by code
    records: Counter[str] = field(default_factory=Counter)  # records by code
    fixable: list[tuple[int, int, Any, Any, Value]] = field(default_factory=list)  # ordinal, line, id, answer, value
    started: float = field(default_factory=time.perf_counter)
    elapsed_s: float = 0.0

    def add(self, report: ValidationReport) -> None:
        self.total += 1
        if not report.problems:
            self.clean += 1
        elif report.ok:
            self.with_warnings_only += 1
        else:
            self.with_errors += 1
        self.problems.update(report.codes)
        self.records.update(set(report.codes))
        if report.fixable:
            self.fixable.append((self.total, report.line, report.id, report.answer, report.value))

    def finish(self) -> ValidationSummary:
        self.elapsed_s = time.perf_counter() - self.started
        return self

    def to_json(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "with_errors": self.with_errors,
            "with_warnings_only": self.with_warnings_only,
            "clean": self.clean,
            "problems": dict(self.problems),
            "records": dict(self.records),
            "fixable": len(self.fixable),
            "elapsed_s": round(self.elapsed_s, 3),
        }


def render_summary(summary: ValidationSummary, stream: TextIO | None = None) -> None:
    """The problems by code, errors first (rich, to stderr by default)."""
    from rich.console import Console
    from rich.table import Table

    console = Console(file=stream if stream is not None else sys.stderr, highlight=False)
    rate = summary.total / summary.elapsed_s if summary.elapsed_s else 0.0
    console.print(
        f"[bold]potrun validate[/]: {summary.total} records: {summary.with_errors} with errors, "
        f"{summary.with_warnings_only} with warnings only, {summary.clean} clean "
        f"({summary.elapsed_s:.1f} s, {rate:.0f} records/s)",
        soft_wrap=True,
    )
    if not summary.problems:
        return
    table = Table(title="problems by code", title_justify="left")
    table.add_column("code")
    table.add_column("severity")
    table.add_column("records", justify="right")
    table.add_column("problems", justify="right")
    for code, (severity, _) in PROBLEM_CODES.items():
        if summary.problems[code]:
            style = "red" if severity == ERROR else "yellow"
            table.add_row(f"[{style}]{code}[/]", severity, str(summary.records[code]), str(summary.problems[code]))
    console.print(table)


def write_fixed_copy(
    path: str | Path, out: str | Path, fixes: Mapping[int, Value], answer_fields: Iterable[str]
) -> int:
    """Copy a gold file to `out`, replacing the recorded answer of the given records.

    `fixes` maps a record's ordinal (1 for the first record; in JSON Lines, its line) to its new
    answer. JSON Lines are copied line for line (only fixed lines are re-serialised); a JSON array is
    written back as an array of its records (an element that is not an object is left out).
    Returns the number of records changed."""
    names = _names(answer_fields)
    if Path(out).resolve() == Path(path).resolve():
        raise UsageError("the fixed copy must not overwrite the input file")
    changed = 0
    with open(path, encoding="utf-8") as handle:
        is_array = handle.read(64).lstrip()[:1] == "["
    with open(out, "w", encoding="utf-8") as sink:
        if not is_array:
            with open(path, encoding="utf-8") as handle:
                for number, text in enumerate(handle, start=1):
                    if number in fixes:
                        data = json.loads(text)
                        data[first_present(data, names)] = fixes[number]
                        text = json.dumps(data, ensure_ascii=False) + "\n"
                        changed += 1
                    sink.write(text)
            return changed
        sink.write("[")
        separator = "\n"
        for ordinal, item in enumerate(read_records(path), start=1):
            if isinstance(item, BadRecord):
                continue  # not an object: nothing to validate, and nothing faithful to copy
            data = item.data
            if ordinal in fixes:
                data[first_present(data, names)] = fixes[ordinal]  # type: ignore[index]
                changed += 1
            sink.write(separator + json.dumps(data, ensure_ascii=False))
            separator = ",\n"
        sink.write("\n]\n")
    return changed


__all__ = [
    "PROBLEM_CODES",
    "Problem",
    "ValidationReport",
    "ValidationSummary",
    "render_summary",
    "validate",
    "write_fixed_copy",
]
