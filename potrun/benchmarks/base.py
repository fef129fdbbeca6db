"""What every benchmark's rules share: a bad record's plan, a plan with nothing to run, and the
RecordResult of an official verdict."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from potrun.check.pipeline import BAD_RECORD, Plan, RecordResult
from potrun.check.records import Record
from potrun.types import BadRecord, ExecResult, Status


def bad_record(line: int, message: str, record_id: Any = None) -> Plan:
    """The plan of a record that cannot be scored: a bad_record result naming the line and reason."""
    return Plan.settled(RecordResult(line, record_id, BAD_RECORD, error=message))


def unreadable(item: Record | BadRecord) -> Plan | None:
    """A BadRecord's plan (bad JSON, bad bytes), or None for a readable record."""
    return bad_record(item.line, item.message) if isinstance(item, BadRecord) else None


def judged_without_programs(judge: Callable[[], RecordResult]) -> Plan:
    """The plan of a record judged on its text alone (chain of thought, extracted answers, puzzle states)."""
    return Plan((), lambda _results: judge())


def verdict(
    line: int,
    record_id: Any,
    *,
    correct: bool,
    score: float | None = None,
    outcome: ExecResult | None = None,
    gold: Any = None,
    mode: str | None = None,
    extraction: str | None = None,
    answer_text: str | None = None,
    fields: Mapping[str, Any] | None = None,
) -> RecordResult:
    """The RecordResult of an official verdict: `score` (default: `correct` as 1.0/0.0) in [0, 1],
    the program's outcome (status, value, errors, times) when one ran, and the record's fields the
    benchmark's metrics break down by."""
    if outcome is None:  # judged on text: nothing ran
        outcome = ExecResult(Status.OK)
    return RecordResult(
        line=line,
        id=record_id,
        status=outcome.status,
        value=outcome.value,
        value_type=outcome.value_type,
        gold=gold,
        correct=correct,
        verdicts=None,
        entry=outcome.entry,
        mode=mode,
        extraction=extraction,
        error_type=outcome.error_type,
        error=outcome.error,
        error_line=outcome.line,
        timeout_kind=outcome.timeout_kind,
        wall_s=outcome.wall_s,
        cpu_s=outcome.cpu_s,
        isolation=outcome.isolation,
        answer_text=answer_text,
        score=float(correct) if score is None else score,
        fields=fields,
    )
