"""`potrun check` as a library: records in, one scored result per record out, in input order.

    record --map fields--> samples --extract--> program | answer --sandbox--> value --compare--> verdict

Records stream through: nothing is loaded whole, and results come back in input order while the
sandbox works ahead. Every input line gets exactly one result: scored, skipped (no program field),
no_gold (a separate gold file has no gold for its id: not run, since nothing could grade it) or
bad_record (with its line and field).

Field names are field paths (`potrun.check.records.field_value`): `resps.0.0`, `doc.answer`,
`response.body.choices.0.message.content`; a literal key with dots in it is tried first.
"""

from __future__ import annotations

import json
import math
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from functools import partial
from pathlib import Path
from typing import Any, Protocol

from potrun.budget import RECORD_UNITS, Budget, OverBudget, spending
from potrun.check.process_golds import (
    CHECKER_ENTRY,
    CHECKER_ISOLATION,
    CHECKER_POLICY,
    ProcessGold,
    ProcessGoldError,
    accepted,
    checker_programs,
    checker_report,
    checklist_outcome,
    read_process_gold,
)
from potrun.check.records import CODE_FIELDS, GOLD_FIELDS, ID_FIELDS, Record, field_value, first_field, read_records
from potrun.check.scoring import majority_vote, pass_at_k
from potrun.comparators import PRESETS, compare, read_answer
from potrun.extractors import AnswerHow, ProgramHow, classify_output, extract_answer, extract_program
from potrun.options import unknown_option
from potrun.sandbox.api import SandboxLike
from potrun.sandbox.wire.protocol import RunRequest
from potrun.types import BadRecord, ExecResult, InputError, PotrunError, Status, UsageError, Value, json_safe

MODES = ("pot", "cot", "auto")
SKIPPED = "skipped"
BAD_RECORD = "bad_record"
NO_GOLD = "no_gold"
NOT_RUN = (SKIPPED, BAD_RECORD, NO_GOLD)  # statuses of records that were not executed
NO_PROGRAM = "no_program"
TRUNCATED = "truncated"


@dataclass(frozen=True, slots=True)
class CheckOptions:
    """How to read records and score them (the `potrun check` options, as data)."""

    code_fields: tuple[str, ...] = CODE_FIELDS
    gold_fields: tuple[str, ...] = GOLD_FIELDS
    id_fields: tuple[str, ...] = ID_FIELDS
    mode: str = "pot"
    presets: tuple[str, ...] = ("default",)
    compare_options: Mapping[str, Any] = field(default_factory=dict)
    ks: tuple[int, ...] = (1,)
    strict: bool = False
    checklist_field: str | None = "checklist"  # process golds (potrun.check.process_golds); None: not read
    checker_field: str | None = "checker"
    benchmark: BenchmarkRun | None = None  # --benchmark: its rules replace all of the above (potrun.benchmarks)
    by_fields: tuple[str, ...] = ()  # field paths whose values RecordResult.fields carries (`--by`)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise UsageError(f"unknown mode {self.mode!r}; choose one of {', '.join(MODES)}")
        for name in ("code_fields", "gold_fields", "id_fields", "presets", "by_fields"):
            names = getattr(self, name)
            if not isinstance(names, (tuple, list)) or not all(type(item) is str for item in names):
                raise UsageError(f"{name} must be a tuple of names, not {type(names).__name__}")
        if not self.presets:
            raise UsageError("at least one comparator preset is needed")
        if not isinstance(self.compare_options, Mapping):
            raise UsageError(f"compare_options must be a mapping, not {type(self.compare_options).__name__}")
        if self.benchmark is None:  # (a benchmark's own rules name its preset)
            _check_presets_take(self.presets, self.compare_options)
        for preset in self.presets:
            _check_option_kinds(preset, self.compare_options)


def _check_presets_take(presets: Sequence[str], options: Mapping[str, Any]) -> None:
    """Every preset is known, and every option is one that some preset takes: a misspelt preset or
    option would otherwise score every record with the defaults, in silence."""
    for preset in presets:
        if preset not in PRESETS:
            raise UsageError(f"unknown preset {preset!r}; known: {', '.join(PRESETS)}")
    taken = {name for preset in presets for name in PRESETS[preset].defaults}
    for name in options:
        if name not in taken:
            raise unknown_option(name, taken, f"the compare options of {', '.join(presets)}")


def _check_option_kinds(preset: str, options: Mapping[str, Any]) -> None:
    """Each option a preset takes has its default's kind (a number, a flag, a text), checked before the
    first record: `/v1/score` with `"abs_tol": "x"` ended its stream at the first comparison."""
    defaults = PRESETS[preset].defaults if preset in PRESETS else {}
    for name, value in options.items():
        default = defaults.get(name)
        if default is None:
            continue  # no default to take the kind from (the preset reads it as it is)
        kinds = (
            (bool,) if type(default) is bool else (int, float) if type(default) in (int, float) else (type(default),)
        )
        if type(value) not in kinds or (type(value) is float and not math.isfinite(value)):
            raise UsageError(f"option {name!r} of preset {preset!r} must be a {type(default).__name__}, not {value!r}")


@dataclass(frozen=True, slots=True)
class Sample:
    """One model output of a record, after extraction: a program to run, or an answer to compare."""

    mode: str  # pot or cot
    how: ProgramHow | AnswerHow  # the extraction rule that fired
    source: str | None = None  # the program (pot)
    answer: Value = None  # the extracted answer text (cot)
    failure: str | None = None  # no_program / truncated when nothing could be run


@dataclass(slots=True)
class Prepared:
    line: int
    id: Any
    gold: Any = None
    has_gold: bool = False
    samples: list[Sample] = field(default_factory=list)
    outcome: str | None = None  # skipped / bad_record: nothing to run
    message: str | None = None
    process: ProcessGold | None = None  # a checklist or checker (potrun.check.process_golds)
    fields: dict[str, Any] | None = None  # the --by fields' values


@dataclass(frozen=True, slots=True)
class RecordResult:
    """The verdict on one input record; `to_json()` is one line of `--out`."""

    line: int
    id: Any
    status: str
    value: Value = None
    value_type: str | None = None
    gold: Any = None
    correct: bool | None = None
    verdicts: Mapping[str, bool] | None = None
    entry: str | None = None
    mode: str | None = None
    extraction: str | None = None
    error_type: str | None = None
    error: str | None = None
    error_line: int | None = None
    timeout_kind: str | None = None
    wall_s: float = 0.0
    cpu_s: float = 0.0
    isolation: str | None = None  # the tier that ran the (first) program: warm or fork
    samples: Mapping[str, Any] | None = None
    checklist_passed: bool | None = None
    checklist_missing: list[Any] | None = None
    checker: Mapping[str, Any] | None = None
    answer_text: str | None = None  # chain of thought: the answer text extracted (`value` is its reading)
    score: float | None = None  # a benchmark's continuous score in [0, 1] (LongDocURL's); else `correct` as 1.0/0.0
    fields: Mapping[str, Any] | None = None  # the record's fields a summary breaks down by (source, task, ...)

    @property
    def scored(self) -> bool:
        return self.status not in NOT_RUN

    def __bool__(self) -> bool:
        # `correct` is None for a record that was not graded: "is it right?" has three answers here
        raise TypeError("a RecordResult has no truth value: test .correct (None when not graded) or .status")

    def to_json(self) -> dict[str, Any]:
        data = {
            "line": self.line,
            "id": self.id,
            "status": self.status,
            "value": json_safe(self.value),
            "value_type": self.value_type,
            "gold": self.gold,
            "correct": self.correct,
            "entry": self.entry,
            "mode": self.mode,
            "extraction": self.extraction,
            "error_type": self.error_type,
            "error": self.error,
            "error_line": self.error_line,
            "timeout_kind": self.timeout_kind,
            "wall_s": round(self.wall_s, 6),
            "cpu_s": round(self.cpu_s, 6),
            "isolation": self.isolation,
            "answer_text": self.answer_text,
            "score": self.score if self.score is not None else _as_score(self.correct),
        }
        if self.fields is not None:
            data["fields"] = dict(self.fields)
        if self.verdicts is not None and len(self.verdicts) > 1:
            data["verdicts"] = dict(self.verdicts)
        if self.samples is not None:
            data["samples"] = dict(self.samples)
        if self.checklist_passed is not None:
            data["checklist_passed"], data["checklist_missing"] = self.checklist_passed, self.checklist_missing
        if self.checker is not None:
            data["checker"] = dict(self.checker)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any], presets: tuple[str, ...]) -> RecordResult:
        """A RecordResult back from its `to_json()` line (what a summary needs of it): every field the
        line has, by name; `verdicts`, left out of a line when there is one preset, from `correct`."""
        values = {name: data[name] for name in RESULT_FIELDS if name in data}
        _check_line_types(values)
        if values.get("verdicts") is None and data.get("correct") is not None:
            values["verdicts"] = {presets[0]: data["correct"]}
        for name in ("wall_s", "cpu_s"):
            values[name] = float(values.get(name) or 0.0)
        return cls(**values)


# The fields a summary computes with, and the JSON types a line may give them (None aside): a file is
# anyone's, and `"correct": "yes"` ended `potrun report` with a traceback.
_LINE_TYPES: dict[str, tuple[type, ...]] = {
    "correct": (bool,),
    "score": (int, float),
    "wall_s": (int, float),
    "cpu_s": (int, float),
    "verdicts": (dict,),
    "samples": (dict,),
}


def _check_line_types(values: Mapping[str, Any]) -> None:
    for name, kinds in _LINE_TYPES.items():
        value = values.get(name)
        if value is not None and (type(value) not in kinds or (type(value) is float and not math.isfinite(value))):
            raise ValueError(
                f"its {name!r} is not a {' or '.join(kind.__name__ for kind in kinds)}: {str(value)[:40]!r}"
            )
    verdicts = values.get("verdicts") or {}
    if not all(type(verdict) is bool for verdict in verdicts.values()):
        raise ValueError("its 'verdicts' are not all true or false")


def _as_score(correct: bool | None) -> float | None:
    return None if correct is None else float(correct)


RESULT_FIELDS = tuple(result_field.name for result_field in fields(RecordResult))  # in the constructor's order


def load_golds(path: str | Path, id_fields: tuple[str, ...], gold_fields: tuple[str, ...]) -> dict[Any, Any]:
    """A gold file joined on the id field: small enough to hold (one value per question). Any bad line
    is an `InputError`: a gold file with holes would grade records silently against nothing."""
    golds: dict[Any, Any] = {}
    for item in read_records(path):
        if isinstance(item, BadRecord):
            raise InputError(f"{path}: {item}")
        id_found, gold_found = first_field(item.data, id_fields), first_field(item.data, gold_fields)
        if id_found is None or gold_found is None:
            raise InputError(
                f"{path}: line {item.line}: needs an id ({'/'.join(id_fields)}) and a gold ({'/'.join(gold_fields)})"
            )
        golds[_hashable(id_found[1])] = gold_found[1]
    return golds


def check_records(
    records: Iterable[Record | BadRecord],
    sandbox: SandboxLike,
    options: CheckOptions,
    golds: Mapping[Any, Any] | None = None,
) -> Iterator[RecordResult]:
    """Score records; yield one RecordResult per record, in input order."""
    if not isinstance(options, CheckOptions):
        raise UsageError(f"check_records takes its options as a CheckOptions, not {type(options).__name__}")
    if not callable(getattr(sandbox, "run_requests", None)):
        raise UsageError(f"check_records needs a sandbox (a Sandbox, or SandboxLike), not {type(sandbox).__name__}")
    if options.benchmark is not None:
        return run_plans((_guarded_plan(options.benchmark, item) for item in records), sandbox)
    return run_plans((_record_plan(item, options, golds, sandbox) for item in records), sandbox)


@dataclass(frozen=True, slots=True)
class Program:
    """One program a record needs run (`timeout_s`: its CPU limit, when not the sandbox's)."""

    source: str
    entry: str | None = None
    timeout_s: float | None = None
    capture: bool = False  # also send back the numbers its variables held (checklists)


@dataclass(frozen=True, slots=True)
class Plan:
    """One record's work: its programs to run, then `judge` of their results (in the same order).
    `fatal` is set on a bad record that ends a --strict run: nothing after it is sent."""

    programs: tuple[Program, ...]
    judge: Callable[[list[ExecResult]], RecordResult]
    fatal: str | None = None

    @staticmethod
    def settled(result: RecordResult) -> Plan:
        """The plan of a record whose result is known already (a bad record): nothing to run."""
        return Plan((), lambda _results: result)


class BenchmarkRun(Protocol):
    """A benchmark's rules for one input file (`potrun.benchmarks`): each record's plan, and the
    benchmark's own metrics over all the results (the summary's `metrics`)."""

    name: str

    def plan(self, item: Record | BadRecord) -> Plan: ...

    def metrics(self, results: Sequence[RecordResult]) -> dict[str, Any]: ...


def run_plans(plans: Iterable[Plan], sandbox: SandboxLike) -> Iterator[RecordResult]:
    """Run every plan's programs on the sandbox, the next records' while this one's judge waits, and
    yield each plan's verdict in input order."""
    queue: deque[Plan] = deque()

    def requests() -> Iterator[RunRequest | None]:
        for plan in plans:
            queue.append(plan)
            if plan.fatal is not None:
                return
            if not plan.programs:
                yield None
            for program in plan.programs:
                yield _request(sandbox, program)

    results = iter(sandbox.run_requests(requests()))
    for first in results:  # one result per request, and one None per record with nothing to run
        plan = queue.popleft()
        executed = [first] if plan.programs else []
        executed += [next(results) for _ in range(len(plan.programs) - 1)]
        yield plan.judge(executed)  # type: ignore[arg-type]
    for plan in queue:  # only a strict run's first bad record is left: it was never sent
        raise InputError(plan.fatal or "a record was never run")


def _guarded_plan(benchmark: BenchmarkRun, item: Record | BadRecord) -> Plan:
    """A benchmark's plan for one record, where any error its rules raise on that record's data is the
    record's bad_record (its line and the reason), never the end of the run."""

    def failed(exc: Exception) -> RecordResult:
        return RecordResult(item.line, None, BAD_RECORD, error=f"{benchmark.name}: {type(exc).__name__}: {exc}")

    try:
        plan = benchmark.plan(item)
    except Exception as exc:
        return Plan.settled(failed(exc))

    def judge(results: list[ExecResult]) -> RecordResult:
        try:
            return plan.judge(results)
        except Exception as exc:
            return failed(exc)

    return replace(plan, judge=judge)


def _record_plan(
    item: Record | BadRecord, options: CheckOptions, golds: Mapping[Any, Any] | None, sandbox: SandboxLike
) -> Plan:
    """One record's plan, its reading bounded and its failures its own: extraction now and judging
    later (in whatever thread reads the results) spend one budget of the record's (`potrun.budget`),
    however many samples, golds or checklist items it has; a record whose text is past the budget, or
    whose data makes a rule raise, is that record's bad_record, never the end of the others' run (a
    batch of rewards scores each record as it would alone)."""
    budget = Budget(RECORD_UNITS)

    def failed(exc: BaseException) -> RecordResult:
        reason = str(exc)[:200]
        return RecordResult(item.line, None, BAD_RECORD, error=f"not judged: {type(exc).__name__}: {reason}")

    try:
        with spending(budget):
            prepared = prepare(item, options, golds)
    except PotrunError:
        raise  # the caller's to act on (a bad option, a missing extra)
    except (Exception, OverBudget) as exc:
        return Plan.settled(failed(exc))
    plan = _plan(prepared, options, sandbox)

    def judge(results: list[ExecResult]) -> RecordResult:
        try:
            with spending(budget):
                return plan.judge(results)
        except PotrunError:
            raise
        except (Exception, OverBudget) as exc:
            return replace(failed(exc), id=prepared.id, fields=prepared.fields)

    return replace(plan, judge=judge)


def _request(sandbox: SandboxLike, program: Program) -> RunRequest:
    return sandbox.request(program.source, program.entry, capture=program.capture, timeout=program.timeout_s)


def _plan(prepared: Prepared, options: CheckOptions, sandbox: SandboxLike) -> Plan:
    capture = prepared.process is not None and prepared.process.checklist is not None
    programs = tuple(  # a checklist is checked on the first sample: only it is captured
        Program(sample.source, capture=capture and sample is prepared.samples[0])
        for sample in prepared.samples
        if sample.source is not None
    )
    fatal = f"line {prepared.line}: {prepared.message}" if prepared.outcome == BAD_RECORD and options.strict else None
    return Plan(programs, partial(finish, prepared, options=options, sandbox=sandbox), fatal)


def prepare(item: Record | BadRecord, options: CheckOptions, golds: Mapping[Any, Any] | None) -> Prepared:
    """Map a record's fields and extract what each of its samples will run or compare."""
    if isinstance(item, BadRecord):
        return Prepared(item.line, None, outcome=BAD_RECORD, message=item.message)
    data = item.data
    id_found = first_field(data, options.id_fields)
    record_id = id_found[1] if id_found is not None else item.line
    prepared = Prepared(item.line, record_id)
    if options.by_fields:  # a field the record lacks is None: its own group, never a silent drop
        prepared.fields = {name: field_value(data, name, None) for name in options.by_fields}
    code_found = first_field(data, options.code_fields)
    if code_found is None:
        prepared.outcome = SKIPPED
        prepared.message = f"no program field ({'/'.join(options.code_fields)})"
        return prepared
    code_field, outputs = code_found
    outputs = outputs if isinstance(outputs, list) else [outputs]
    if not outputs or not all(isinstance(text, str) for text in outputs):
        prepared.outcome = BAD_RECORD
        prepared.message = f"field {code_field!r} must be a string or a non-empty list of strings"
        return prepared
    if not all(_is_text(text) for text in outputs):
        prepared.outcome = BAD_RECORD  # a lone surrogate (JSON "\ud800") cannot be sent as UTF-8
        prepared.message = f"field {code_field!r} is not text: it has a lone surrogate escape"
        return prepared
    if golds is not None:
        key = _hashable(record_id)
        prepared.has_gold = key in golds
        prepared.gold = golds.get(key)
    else:
        gold_found = first_field(data, options.gold_fields)
        prepared.has_gold = gold_found is not None
        prepared.gold = gold_found[1] if gold_found is not None else None
    prepared.samples = [extract_sample(text, options.mode) for text in outputs]
    try:
        prepared.process = read_process_gold(
            data, outputs[0], prepared.samples[0].mode, options.checklist_field, options.checker_field
        )
    except ProcessGoldError as exc:
        prepared.outcome, prepared.message = BAD_RECORD, f"field {exc.field_name!r} {exc}"
        return prepared
    if prepared.process is not None and prepared.process.checker is not None:
        prepared.has_gold = True  # the checker is the gold
    if golds is not None and not prepared.has_gold:
        prepared.outcome = NO_GOLD  # counted and reported, not run: nothing could grade it
        prepared.message = f"no gold for id {_shown(record_id)} in the gold file"
        prepared.samples = []
    return prepared


def _is_text(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _shown(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 80 else text[:77] + "..."


def extract_sample(text: str, mode: str) -> Sample:
    chosen = classify_output(text) if mode == "auto" else mode
    if chosen == "cot":
        answer = extract_answer(text)
        return Sample("cot", answer.how, answer=answer.text)
    program = extract_program(text)
    if program.source is None:
        return Sample("pot", program.how, failure=TRUNCATED if program.truncated else NO_PROGRAM)
    return Sample("pot", program.how, source=program.source)


def finish(
    prepared: Prepared, executed: list[ExecResult], options: CheckOptions, sandbox: SandboxLike | None = None
) -> RecordResult:
    """Combine a record's samples and their results into its verdict (`sandbox` runs checker golds)."""
    if prepared.outcome is not None:
        return RecordResult(
            prepared.line, prepared.id, prepared.outcome, error=prepared.message, fields=prepared.fields
        )
    results = iter(executed)
    outcomes = [_sample_outcome(sample, results) for sample in prepared.samples]
    main, process = outcomes[0], prepared.process
    checked: dict[int, ExecResult] | None = None
    sample_verdicts: list[bool] | None = None
    verdicts: dict[str, bool] | None = None
    if process is not None and process.checker is not None:  # the checker is the judge of every sample
        checked = _run_checker(sandbox, process.checker, outcomes)
        judged = [i in checked and accepted(checked[i]) for i in range(len(outcomes))]
        sample_verdicts, verdicts = judged, {preset: judged[0] for preset in options.presets}
    else:
        verdicts = _verdicts(main, prepared, options)
        several = verdicts is not None and len(outcomes) > 1
        mode = prepared.samples[0].mode
        sample_verdicts = _sample_verdicts(outcomes, prepared.gold, options, mode) if several else None
    checklist_passed, checklist_missing = None, None
    if process is not None and process.checklist is not None:
        checklist_passed, checklist_missing = checklist_outcome(
            process, prepared.samples[0].mode, main, options.compare_options.get("rel_tol")
        )
    result = RecordResult(
        line=prepared.line,
        id=prepared.id,
        status=main.status,
        value=main.value,
        value_type=main.value_type,
        gold=prepared.gold,
        correct=verdicts[options.presets[0]] if verdicts is not None else None,
        verdicts=verdicts,
        entry=main.entry,
        mode=prepared.samples[0].mode,
        extraction=prepared.samples[0].how,
        error_type=main.error_type,
        error=main.error,
        error_line=main.line,
        timeout_kind=main.timeout_kind,
        wall_s=main.wall_s,
        cpu_s=main.cpu_s,
        samples=_samples_summary(outcomes, sample_verdicts, prepared, options, checked is not None)
        if len(outcomes) > 1
        else None,
        isolation=main.isolation,
        checklist_passed=checklist_passed,
        checklist_missing=checklist_missing,
        checker=checker_report(checked.get(0)) if checked is not None else None,
        fields=prepared.fields,
    )
    return _with_answer_reading(result, prepared.samples[0], options)


def _run_checker(sandbox: SandboxLike | None, checker: str, outcomes: list[ExecResult]) -> dict[int, ExecResult]:
    """The checker's result on each sample that has an answer, by the sample's position. It runs on
    the sandbox's companion under the checker's policy and isolation (`potrun.check.process_golds`)."""
    if sandbox is None:
        raise UsageError("a record with a checker needs a sandbox to run it")
    answered = [i for i, outcome in enumerate(outcomes) if outcome.status is Status.OK]
    programs, keys = checker_programs(checker, [outcomes[i].value for i in answered])
    if not programs:
        return {}
    companion = sandbox.companion(CHECKER_POLICY, CHECKER_ISOLATION)
    results = list(companion.run_many(programs, entry=CHECKER_ENTRY))
    return {i: results[key] for i, key in zip(answered, keys, strict=True)}


def _with_answer_reading(result: RecordResult, sample: Sample, options: CheckOptions) -> RecordResult:
    """A chain-of-thought result shows what the deciding comparator read in the answer text as its
    `value` (`potrun.comparators.read_answer`: 1234.5 for "1{,}234.5") and the text as `answer_text`.
    The verdicts were computed on the text itself, by the same reading."""
    if sample.mode != "cot" or not isinstance(sample.answer, str):
        return result
    preset = options.presets[0]
    value = read_answer(sample.answer, preset=preset, **_options_for(preset, options, sample.mode))
    value_type = None if value is None else type(value).__name__
    return replace(result, value=value, value_type=value_type, answer_text=sample.answer)


def _sample_outcome(sample: Sample, results: Iterator[ExecResult]) -> ExecResult:
    if sample.source is not None:
        return next(results)
    if sample.mode == "cot":
        if sample.answer is None:
            return ExecResult(Status.NO_ANSWER, error="no final answer found")
        return ExecResult(Status.OK, value=sample.answer, value_type="str")
    assert sample.failure is not None
    return ExecResult(Status.SYNTAX_ERROR, error_type=sample.failure, error=f"extraction: {sample.failure}")


def _verdicts(outcome: ExecResult, prepared: Prepared, options: CheckOptions) -> dict[str, bool] | None:
    if not prepared.has_gold:
        return None
    if outcome.status is not Status.OK:
        return {preset: False for preset in options.presets}
    mode = prepared.samples[0].mode
    return {
        preset: compare(outcome.value, prepared.gold, preset=preset, **_options_for(preset, options, mode)).correct
        for preset in options.presets
    }


def _options_for(preset: str, options: CheckOptions, mode: str) -> dict[str, Any]:
    """Comparator options apply to the presets that take them (`--abs` to pot and default, ...); a
    preset that reads a program's value and an answer text differently is told which it has (`mode`)."""
    spec = PRESETS[preset]
    chosen = {name: value for name, value in options.compare_options.items() if name in spec.defaults}
    if spec.mode_option is not None and spec.mode_option not in chosen:
        chosen[spec.mode_option] = mode == "cot"
    return chosen


def _sample_verdicts(outcomes: list[ExecResult], gold: Any, options: CheckOptions, mode: str) -> list[bool]:
    """Each sample's verdict under the first preset, which decides `correct`."""
    preset = options.presets[0]
    extra = _options_for(preset, options, mode)
    return [o.status is Status.OK and compare(o.value, gold, preset=preset, **extra).correct for o in outcomes]


def _correct_by_preset(
    outcomes: list[ExecResult], gold: Any, options: CheckOptions, mode: str, first: int
) -> dict[str, int]:
    """How many samples each preset judges correct (the first preset's count is known: `first`)."""
    counts = {options.presets[0]: first}
    for preset in options.presets[1:]:
        extra = _options_for(preset, options, mode)
        counts[preset] = sum(
            1 for o in outcomes if o.status is Status.OK and compare(o.value, gold, preset=preset, **extra).correct
        )
    return counts


def _samples_summary(
    outcomes: list[ExecResult], verdicts: list[bool] | None, prepared: Prepared, options: CheckOptions, checked: bool
) -> dict[str, Any]:
    """n, executed and, when the samples were judged (`verdicts`), pass@k and the majority vote.
    Answers vote as equal under the first preset; with a checker (`checked`) the voted answer is
    correct iff the checker accepted the first sample that gave it."""
    n = len(outcomes)
    summary: dict[str, Any] = {"n": n, "executed": sum(1 for o in outcomes if o.status is Status.OK)}
    if verdicts is None:
        return summary
    correct = sum(verdicts)
    summary["correct"] = correct
    if len(options.presets) > 1:  # each preset's pass@1 (the summary's accuracy_by_preset) needs its count
        summary["correct_by_preset"] = (
            {preset: correct for preset in options.presets}
            if checked  # the checker is the judge of every preset
            else _correct_by_preset(outcomes, prepared.gold, options, prepared.samples[0].mode, correct)
        )
    summary["pass@k"] = {str(k): pass_at_k(n, correct, k) for k in options.ks if k <= n}
    preset = options.presets[0]
    gold = None if checked else prepared.gold
    voted, voted_correct = majority_vote(
        outcomes, gold, preset=preset, **_options_for(preset, options, prepared.samples[0].mode)
    )
    if checked:
        first = next((i for i, o in enumerate(outcomes) if o.status is Status.OK and o.value is voted), None)
        voted_correct = first is not None and verdicts[first]
    summary["majority_value"] = json_safe(voted)
    summary["majority_correct"] = voted_correct
    return summary


def _hashable(value: Any) -> Any:
    return json.dumps(value, sort_keys=True) if isinstance(value, (list, dict)) else value


__all__ = [
    "BAD_RECORD",
    "MODES",
    "NOT_RUN",
    "NO_GOLD",
    "RESULT_FIELDS",
    "SKIPPED",
    "BenchmarkRun",
    "CheckOptions",
    "Plan",
    "Program",
    "RecordResult",
    "check_records",
    "load_golds",
    "run_plans",
]
