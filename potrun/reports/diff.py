"""`potrun diff A.jsonl B.jsonl`: two runs' `--out` files on the same records, compared record by record.

Records are paired by line and id. Both files are in input order (an `--out` file's n-th line is the
n-th record's result), so they are merged by line as they stream, and neither is held: a line that only
one file has, or whose id differs between them (not the same input), is counted as unpaired. Of the
pairs graded in both runs, those whose verdict changed are listed in both directions, and McNemar's
exact test (`potrun.check.stats.mcnemar_exact_p`) says whether the accuracies differ by more than chance
at the 0.05 level. The accuracy of each run is over its pairs, so both are over the same records.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

from potrun.check.records import read_records
from potrun.check.stats import Estimate, mcnemar_exact_p, proportion
from potrun.reports.table import inert
from potrun.types import BadRecord, InputError

ALPHA = 0.05


@dataclass(frozen=True, slots=True)
class Change:
    """One record whose verdict differs between the runs."""

    line: int
    id: Any
    gold: Any
    value_a: Any
    value_b: Any
    status_a: str | None
    status_b: str | None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class RunDiff:
    """What `potrun diff` reports: pairs, accuracies on them, the changes and McNemar's test."""

    paired: int = 0  # records graded in both runs
    both_correct: int = 0
    both_wrong: int = 0
    fixed: list[Change] = field(default_factory=list)  # wrong in A, correct in B
    broken: list[Change] = field(default_factory=list)  # correct in A, wrong in B
    ungraded: int = 0  # paired records not graded in one run or both (skipped, bad, no gold)
    unpaired_a: int = 0
    unpaired_b: int = 0

    def accuracy(self, run: str) -> Estimate:
        """Run `a` or `b`'s accuracy over the paired records."""
        correct = self.both_correct + len(self.broken if run == "a" else self.fixed)
        return proportion(correct, self.paired)

    @property
    def p_value(self) -> float:
        return mcnemar_exact_p(len(self.broken), len(self.fixed))

    @property
    def significant(self) -> bool:
        return self.p_value < ALPHA

    def to_json(self) -> dict[str, Any]:
        return {
            "paired": self.paired,
            "accuracy_a": self.accuracy("a").to_json(),
            "accuracy_b": self.accuracy("b").to_json(),
            "difference": round(self.accuracy("b").value - self.accuracy("a").value, 6),
            "both_correct": self.both_correct,
            "both_wrong": self.both_wrong,
            "a_only_correct": len(self.broken),
            "b_only_correct": len(self.fixed),
            "mcnemar_p": self.p_value,
            "alpha": ALPHA,
            "significant": self.significant,
            "ungraded": self.ungraded,
            "unpaired_a": self.unpaired_a,
            "unpaired_b": self.unpaired_b,
            "became_correct": [change.to_json() for change in self.fixed],
            "became_wrong": [change.to_json() for change in self.broken],
        }


def diff_runs(path_a: str | Path, path_b: str | Path) -> RunDiff:
    """Compare two `--out` files of runs on the same records (module docstring)."""
    result = RunDiff()
    a, b = _results(path_a), _results(path_b)
    line_a, line_b = next(a, None), next(b, None)
    while line_a is not None or line_b is not None:
        if line_b is None or (line_a is not None and line_a["line"] < line_b["line"]):
            result.unpaired_a += 1
            line_a = next(a, None)
        elif line_a is None or line_b["line"] < line_a["line"]:
            result.unpaired_b += 1
            line_b = next(b, None)
        else:
            _add_pair(result, line_a, line_b)
            line_a, line_b = next(a, None), next(b, None)
    return result


def _add_pair(result: RunDiff, a: dict[str, Any], b: dict[str, Any]) -> None:
    if a.get("id") != b.get("id"):  # the same line of another input
        result.unpaired_a += 1
        result.unpaired_b += 1
        return
    correct_a, correct_b = a.get("correct"), b.get("correct")
    if not isinstance(correct_a, bool) or not isinstance(correct_b, bool):
        result.ungraded += 1
        return
    result.paired += 1
    if correct_a == correct_b:
        result.both_correct += correct_a
        result.both_wrong += not correct_a
        return
    change = Change(
        a["line"], a.get("id"), a.get("gold"), a.get("value"), b.get("value"), a.get("status"), b.get("status")
    )
    (result.fixed if correct_b else result.broken).append(change)


def render_diff(diff: RunDiff, stream: TextIO | None = None, show: int = 20) -> None:
    """The diff as text: accuracies, McNemar's verdict, and up to `show` changes each way."""
    out = stream if stream is not None else sys.stdout
    a, b = diff.accuracy("a"), diff.accuracy("b")
    verdict = "significant" if diff.significant else "not significant"
    lines = [
        f"paired records graded in both runs: {diff.paired} (unpaired: {diff.unpaired_a} in A, "
        f"{diff.unpaired_b} in B; not graded in one or both: {diff.ungraded})",
        f"accuracy A: {_estimate(a)}",
        f"accuracy B: {_estimate(b)}",
        f"difference B - A: {b.value - a.value:+.4f}",
        f"both correct {diff.both_correct}, both wrong {diff.both_wrong}, "
        f"correct in A only {len(diff.broken)}, correct in B only {len(diff.fixed)}",
        f"McNemar's exact test: p = {diff.p_value:.4g}: {verdict} at {ALPHA}",
    ]
    for title, changes in (("became correct in B", diff.fixed), ("became wrong in B", diff.broken)):
        lines.append(f"{title} ({len(changes)}):")
        lines += [_change_line(change) for change in changes[:show]]
        if len(changes) > show:
            lines.append(f"  ... and {len(changes) - show} more (--json lists them all)")
    out.write("\n".join(lines) + "\n")


def _estimate(estimate: Estimate) -> str:
    return f"{estimate.value:.4f} ± {estimate.se:.4f}, 95% CI [{estimate.low:.4f}, {estimate.high:.4f}]"


def _change_line(change: Change) -> str:
    return (
        f"  line {change.line} (id {_shown(change.id)}): A {_shown(change.value_a)} ({inert(str(change.status_a))}), "
        f"B {_shown(change.value_b)} ({inert(str(change.status_b))}), gold {_shown(change.gold)}"
    )


def _shown(value: Any) -> str:
    """A value from a results file as the terminal shows it: JSON, ASCII only (no escape reaches the
    terminal), cut short."""
    text = json.dumps(value, ensure_ascii=True)
    return text if len(text) <= 40 else text[:37] + "..."


def _results(path: str | Path) -> Iterator[dict[str, Any]]:
    """The result lines of an `--out` file, each checked to have an integer line number in order."""
    previous = 0
    for item in read_records(path):
        if isinstance(item, BadRecord):
            raise InputError(f"{path}: {item}")
        line = item.data.get("line")
        if not isinstance(line, int) or isinstance(line, bool) or line <= previous:
            raise InputError(f"{path}: line {item.line}: not a potrun --out line in input order (its line is {line!r})")
        previous = line
        yield item.data


__all__ = ["ALPHA", "Change", "RunDiff", "diff_runs", "render_diff"]
