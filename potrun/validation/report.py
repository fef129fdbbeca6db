"""The end of `potrun validate`: the run's summary, its table, and the copy with fixed answers."""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from potrun.check.records import first_present, read_records
from potrun.types import BadRecord, UsageError, Value
from potrun.validation.problems import ERROR, PROBLEM_CODES, ValidationReport, _names


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
