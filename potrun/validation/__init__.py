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

import itertools
import json
import math
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from potrun.check.records import (
    ANSWER_FIELDS,
    ID_FIELDS,
    PROGRAM_FIELDS,
    Record,
    first_present,
    given_record,
    read_records,
)
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
from potrun.validation.conventions import conventions
from potrun.validation.problems import PROBLEM_CODES, Problem, ValidationReport, _names, problem
from potrun.validation.report import ValidationSummary, render_summary, write_fixed_copy

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


def _items(records: str | Path | Iterable[Any]) -> Iterator[Record | BadRecord]:
    if isinstance(records, (str, Path)):
        return _read(records)
    if isinstance(records, (bytes, Mapping)) or not hasattr(records, "__iter__"):
        raise UsageError(f"records must be a path or an iterable of records, not {type(records).__name__}")
    return (given_record(item, number) for number, item in enumerate(records, start=1))


def _read(path: str | Path) -> Iterator[Record | BadRecord]:
    yield from read_records(path)  # a line that is not UTF-8 is a BadRecord in its place


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
    found, gold.print_line = conventions(program)
    gold.problems.extend(found)
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


__all__ = [
    "PROBLEM_CODES",
    "Problem",
    "ValidationReport",
    "ValidationSummary",
    "render_summary",
    "validate",
    "write_fixed_copy",
]
