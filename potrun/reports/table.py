"""The run's summary: counts as results stream by, then a table a person reads and a JSON a CI reads."""

from __future__ import annotations

import heapq
import json
import re
import sys
import time
from array import array
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO

from potrun.check.pipeline import BAD_RECORD, NO_GOLD, SKIPPED, RecordResult
from potrun.check.runrecord import utc_now
from potrun.check.stats import Estimate, mean_with_bootstrap, proportion

SLOWEST = 5
MAX_GROUPS = 1000  # distinct values a --by field is broken down into; the rest count as OTHER_GROUP
OTHER_GROUP = "(other)"
TABLE_GROUPS = 12  # values of a --by field the table shows; --summary-json has them all
MISSING_GROUP = "(missing)"


@dataclass
class Rate:
    """The mean of per-record values in [0, 1] with its interval: while every value is 0 or 1 only the
    counts are kept (Wilson interval); the first other value starts the list a bootstrap needs."""

    n: int = 0
    ones: int = 0
    total: float = 0.0
    values: array[float] | None = None

    def add(self, value: float) -> None:
        self.n += 1
        self.total += value
        if self.values is None and value in (0.0, 1.0):
            self.ones += value == 1.0
            return
        if self.values is None:  # the first fraction: the 0/1 values so far, in any order
            self.values = array("d", [1.0] * self.ones + [0.0] * (self.n - 1 - self.ones))
        self.values.append(value)

    @property
    def mean(self) -> float | None:
        return self.total / self.n if self.n else None

    def estimate(self) -> Estimate:
        return proportion(self.ones, self.n) if self.values is None else mean_with_bootstrap(self.values)


def pass_at_1(samples: Mapping[str, Any] | None, preset: str, verdict: bool, first_preset: bool) -> float:
    """A graded record's pass@1: the share of its samples `preset` judges correct (the unbiased estimate
    of one sample's accuracy), or its verdict when it has one sample. A line from a file is anyone's: a
    count that is not one of the record's samples is ignored."""
    if not samples:
        return float(verdict)
    n = samples.get("n")
    by_preset = samples.get("correct_by_preset")
    correct = by_preset.get(preset) if isinstance(by_preset, Mapping) else None
    if correct is None and first_preset:
        correct = samples.get("correct")
    if type(n) is int and type(correct) is int and 0 <= correct <= n and n > 0:
        return correct / n
    return float(verdict)


@dataclass
class Summary:
    """Accumulates RecordResults; `to_json()` is `--summary-json`.

    The headline accuracy is each graded record's pass@1 averaged (`pass_at_1`): with one sample a
    record, the share of records judged correct; with several, the unbiased estimate over all of them
    (a record's verdict, `correct`, is its first sample's: `first_sample_accuracy`). Nothing graded: the
    accuracy is None (null), never a 0 that reads as a result."""

    presets: tuple[str, ...]
    settings: dict[str, Any] = field(default_factory=dict)
    total: int = 0
    skipped: int = 0
    bad_record: int = 0
    no_gold: int = 0  # records whose id the --gold file lacks: not run, not in the accuracy's denominator
    graded: int = 0
    correct: Counter[str] = field(default_factory=Counter)
    status_counts: Counter[str] = field(default_factory=Counter)
    extraction_counts: Counter[str] = field(default_factory=Counter)
    timeouts: Counter[str] = field(default_factory=Counter)
    isolation_counts: Counter[str] = field(default_factory=Counter)  # records by the tier that ran them
    slowest: list[tuple[float, int, Any, str]] = field(default_factory=list)
    sample_records: int = 0
    pass_at_k: Counter[str] = field(default_factory=Counter)
    majority_correct: int = 0
    samples_total: int = 0
    samples_executed: int = 0
    bad_lines: list[tuple[int, str]] = field(default_factory=list)
    checklist_records: int = 0  # records with a checklist (potrun.check.process_golds)
    checklist_passed: int = 0
    checklist_correct: int = 0  # correct AND checklist passed
    error_type_counts: Counter[str] = field(default_factory=Counter)
    # Scores of graded records (RecordResult.score, else correct as 1/0): while every one is 0 or 1 only
    # their count is kept (their mean is the accuracy); the first other score starts the list a bootstrap
    # needs, so a run of verdicts keeps its memory flat.
    score_ones: int = 0
    scores: array[float] | None = None
    pass_at_k_values: dict[str, array[float]] = field(default_factory=dict)  # per record, for its interval
    pass1: dict[str, Rate] = field(default_factory=dict)  # preset -> the graded records' pass@1
    by: dict[str, dict[str, list[int]]] = field(default_factory=dict)  # field -> value -> [graded, correct]
    metrics: dict[str, Any] = field(default_factory=dict)  # a benchmark's own metrics (potrun.benchmarks)
    run: dict[str, Any] = field(default_factory=dict)  # the run's record (potrun.check.runrecord), written as `run`
    started_at: str = field(default_factory=utc_now)
    ended_at: str | None = None
    started: float = field(default_factory=time.perf_counter)
    elapsed_s: float = 0.0

    def add(self, result: RecordResult) -> None:
        self.total += 1
        self.status_counts[result.status] += 1
        if result.status == SKIPPED:
            self.skipped += 1
            return
        if result.status == NO_GOLD:
            self.no_gold += 1
            return
        if result.status == BAD_RECORD:
            self.bad_record += 1
            if len(self.bad_lines) < 20:
                self.bad_lines.append((result.line, result.error or ""))
            return
        if result.extraction:
            self.extraction_counts[result.extraction] += 1
        if result.timeout_kind:
            self.timeouts[result.timeout_kind] += 1
        if result.isolation:
            self.isolation_counts[result.isolation] += 1
        if result.error_type:
            self.error_type_counts[result.error_type] += 1
        if result.correct is not None:
            self.graded += 1
            for preset, verdict in (result.verdicts or {self.presets[0]: result.correct}).items():
                self.correct[preset] += bool(verdict)
                first = preset == self.presets[0]
                self.pass1.setdefault(preset, Rate()).add(pass_at_1(result.samples, preset, bool(verdict), first))
            self._add_score(result.score if result.score is not None else float(result.correct))
            self._add_groups(result.fields or {}, result.correct)
        entry = (result.wall_s, result.line, result.id, result.status)
        if len(self.slowest) < SLOWEST:
            heapq.heappush(self.slowest, entry)
        elif entry > self.slowest[0]:
            heapq.heapreplace(self.slowest, entry)
        if result.samples:
            self._add_samples(result.samples)
        if result.checklist_passed is not None:
            self.checklist_records += 1
            self.checklist_passed += result.checklist_passed
            self.checklist_correct += result.checklist_passed and result.correct is True

    def _add_score(self, score: float) -> None:
        if self.scores is None and score in (0.0, 1.0):
            self.score_ones += score == 1.0
            return
        if self.scores is None:  # the first continuous score: the 0/1 scores so far, in any order
            self.scores = array("d", [1.0] * self.score_ones + [0.0] * (self.graded - 1 - self.score_ones))
        self.scores.append(score)

    def _add_groups(self, fields: Mapping[str, Any], correct: bool) -> None:
        for name, value in fields.items():
            groups = self.by.setdefault(name, {})
            key = _group_key(value)
            if key not in groups and len(groups) >= MAX_GROUPS:
                key = OTHER_GROUP
            counts = groups.setdefault(key, [0, 0])
            counts[0] += 1
            counts[1] += correct

    def _add_samples(self, samples: Mapping[str, Any]) -> None:
        self.sample_records += 1
        self.samples_total += samples["n"]
        self.samples_executed += samples["executed"]
        for k, value in samples.get("pass@k", {}).items():
            self.pass_at_k[k] += value
            self.pass_at_k_values.setdefault(k, array("d")).append(value)
        self.majority_correct += bool(samples.get("majority_correct"))

    def finish(self) -> Summary:
        self.elapsed_s = time.perf_counter() - self.started
        self.ended_at = utc_now()
        return self

    @property
    def scored(self) -> int:
        return self.total - self.skipped - self.bad_record - self.no_gold

    def accuracy(self, preset: str | None = None) -> float | None:
        """The headline: the graded records' mean pass@1 under `preset` (the first when None); None when
        nothing was graded."""
        rate = self.pass1.get(preset or self.presets[0])
        return rate.mean if rate is not None and self.graded else None

    def first_sample_accuracy(self, preset: str | None = None) -> float | None:
        """The share of graded records whose first sample is correct (their `correct`)."""
        return self.correct[preset or self.presets[0]] / self.graded if self.graded else None

    def accuracy_estimate(self, preset: str | None = None) -> Estimate | None:
        """The accuracy with its standard error and 95% interval (Wilson while every record's pass@1 is
        0 or 1, else bootstrap); None when nothing was graded."""
        rate = self.pass1.get(preset or self.presets[0])
        return rate.estimate() if rate is not None and self.graded else None

    def score_estimate(self) -> Estimate | None:
        """The mean score with its bootstrap interval, when some score is not 0 or 1 (else None: the
        mean is the accuracy)."""
        return mean_with_bootstrap(self.scores) if self.scores is not None else None

    def pass_at_k_estimates(self) -> dict[str, Estimate]:
        """pass@k over the records with several samples, each with its bootstrap interval."""
        return {k: mean_with_bootstrap(values) for k, values in self.pass_at_k_values.items()}

    def breakdowns(self) -> dict[str, dict[str, dict[str, Any]]]:
        """Accuracy by each --by field's value: n graded, correct, accuracy, se and 95% interval."""
        return {
            name: {key: _group_json(*counts) for key, counts in sorted(groups.items())}
            for name, groups in self.by.items()
        }

    def checklist_accuracy(self) -> float:
        return self.checklist_correct / self.checklist_records if self.checklist_records else 0.0

    @property
    def execution_rate(self) -> float:
        return self.status_counts["ok"] / self.scored if self.scored else 0.0

    def to_json(self) -> dict[str, Any]:
        estimate = self.accuracy_estimate()
        accuracy = estimate.to_json() if estimate is not None else {"se": None, "ci95": None, "method": None}
        data: dict[str, Any] = {
            "total": self.total,
            "scored": self.scored,
            "skipped": self.skipped,
            "bad_record": self.bad_record,
            "no_gold": self.no_gold,
            "graded": self.graded,
            "ungraded": self.scored - self.graded,
            "correct": self.correct[self.presets[0]],
            "accuracy": _rounded(self.accuracy()),
            "accuracy_measure": "pass@1 over all samples" if self.sample_records else "verdict",
            "preset": self.presets[0],
            "accuracy_by_preset": {p: _rounded(self.accuracy(p)) for p in self.presets},
            "accuracy_ci95_by_preset": {p: _ci95(self.accuracy_estimate(p)) for p in self.presets},
            "execution_rate": round(self.execution_rate, 6),
            "status_counts": dict(self.status_counts),
            "timeouts": dict(self.timeouts),
            "isolation_counts": dict(self.isolation_counts),
            "extraction_counts": dict(self.extraction_counts),
            "accuracy_se": accuracy["se"],
            "accuracy_ci95": accuracy["ci95"],
            "accuracy_interval": accuracy["method"],
            "error_type_counts": dict(self.error_type_counts.most_common()),
            "slowest": [
                {"id": i, "line": line, "wall_s": round(w, 4), "status": s}
                for w, line, i, s in sorted(self.slowest, reverse=True)
            ],
            "elapsed_s": round(self.elapsed_s, 3),
            "programs_per_s": round(self.scored / self.elapsed_s, 1) if self.elapsed_s else 0.0,
            **self.settings,
        }
        if self.metrics:
            data["metrics"] = self.metrics
        if self.checklist_records:
            data["checklist_accuracy"] = round(self.checklist_accuracy(), 6)
            data["checklist_records"] = self.checklist_records
            data["checklist_pass_rate"] = round(self.checklist_passed / self.checklist_records, 6)
        if self.sample_records:  # a record's verdict is its first sample's: that accuracy, named so
            data["first_sample_accuracy"] = _rounded(self.first_sample_accuracy())
            data["first_sample_accuracy_by_preset"] = {p: _rounded(self.first_sample_accuracy(p)) for p in self.presets}
            data["samples"] = {
                "records": self.sample_records,
                "pass@k": {k: round(v / self.sample_records, 6) for k, v in self.pass_at_k.items()},
                "pass@k_ci95": {k: e.to_json()["ci95"] for k, e in self.pass_at_k_estimates().items()},
                "majority_accuracy": round(self.majority_correct / self.sample_records, 6),
                "executed_fraction": round(self.samples_executed / self.samples_total, 6),
            }
        score = self.score_estimate()
        if score is not None:
            data["score_mean"] = score.to_json()
        if self.by:
            data["by"] = self.breakdowns()
        data["run"] = {
            **self.run,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "tiers_used": sorted(self.isolation_counts),
        }
        return data


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def _ci95(estimate: Estimate | None) -> Any:
    return None if estimate is None else estimate.to_json()["ci95"]


def _group_key(value: Any) -> str:
    """A --by field's value as a group's name: a string as it is, anything else as JSON."""
    if value is None:
        return MISSING_GROUP
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _group_json(graded: int, correct: int) -> dict[str, Any]:
    estimate = proportion(correct, graded).to_json()
    return {
        "n": graded,
        "correct": correct,
        "accuracy": estimate["value"],
        "se": estimate["se"],
        "ci95": estimate["ci95"],
    }


def render(summary: Summary, stream: TextIO | None = None) -> None:
    """The end-of-run table."""
    from rich.console import Console
    from rich.table import Table

    console = Console(file=stream if stream is not None else sys.stderr, highlight=False)
    data = summary.to_json()
    table = Table(title="potrun check", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column(justify="right")

    def add_row(label: str, value: str) -> None:  # every cell inert: error types and ids are a program's
        table.add_row(_cell(label), _cell(value))

    for preset in summary.presets:
        add_row(*_accuracy_row(summary, preset))
    if summary.sample_records and summary.graded:
        for preset in summary.presets:
            add_row(
                f"first sample ({preset})",
                f"{summary.correct[preset] / summary.graded:.4f}  ({summary.correct[preset]}/{summary.graded})",
            )
    score = summary.score_estimate()
    if score is not None:
        add_row("mean score", f"{score.value:.4f}  {_interval(score)}")
    if summary.checklist_records:
        add_row(
            "accuracy + checklist",
            f"{summary.checklist_accuracy():.4f}  "
            f"({summary.checklist_correct}/{summary.checklist_records} with a checklist)",
        )
    add_row("execution rate", f"{summary.execution_rate:.4f}")
    no_gold = f" + {summary.no_gold} no gold" if summary.no_gold else ""
    add_row(
        "records",
        f"{summary.total} = {summary.scored} scored + {summary.skipped} skipped + {summary.bad_record} bad{no_gold}",
    )
    for status, count in summary.status_counts.most_common():
        note = f"  ({', '.join(f'{k} {v}' for k, v in summary.timeouts.items())})" if status == "timeout" else ""
        add_row(f"  {status}", f"{count}{note}")
    if summary.scored > summary.graded:
        add_row("not graded", f"{summary.scored - summary.graded} (run, but no gold to compare with)")
    if summary.isolation_counts:
        add_row("tiers", ", ".join(f"{k} {v}" for k, v in summary.isolation_counts.most_common()))
    if summary.extraction_counts:
        add_row("extraction", ", ".join(f"{k} {v}" for k, v in summary.extraction_counts.most_common()))
    if summary.error_type_counts:
        add_row("error types", ", ".join(f"{k} {v}" for k, v in summary.error_type_counts.most_common(6)))
    for name, groups in data.get("by", {}).items():
        largest = sorted(groups.items(), key=lambda item: -item[1]["n"])  # the largest groups first
        for key, group in largest[:TABLE_GROUPS]:
            low, high = group["ci95"]
            add_row(
                f"  {name} = {_shown(key)}",
                f"{group['accuracy']:.4f}  ({group['correct']}/{group['n']})  95% CI [{low:.4f}, {high:.4f}]",
            )
        if len(groups) > TABLE_GROUPS:
            add_row(f"  {name}", f"... {len(groups) - TABLE_GROUPS} more values (--summary-json has all)")
    if "samples" in data:
        samples = data["samples"]
        add_row(
            "pass@k",
            ", ".join(
                f"@{k} {e.value:.4f} [{e.low:.4f}, {e.high:.4f}]" for k, e in summary.pass_at_k_estimates().items()
            ),
        )
        add_row("majority vote", f"{samples['majority_accuracy']:.4f}")
        add_row("samples executed", f"{samples['executed_fraction']:.4f}")
    for name, value in flat_items(summary.metrics, separator=" "):
        add_row(name, f"{value:.4f}" if isinstance(value, float) else str(value))
    for item in data["slowest"][:3]:
        add_row("slowest", f"line {item['line']} ({item['id']}): {item['wall_s']:.3f} s {item['status']}")
    add_row("throughput", f"{data['programs_per_s']:.0f} records/s in {data['elapsed_s']:.1f} s")
    for key in ("policy", "backend", "isolation", "workers", "engine", "cache_hits"):
        if key in data:
            add_row(key, str(data[key]))
    for role, identity in data["run"].get("inputs", {}).items():
        digest = f"sha256 {identity['sha256'][:16]}..." if identity["sha256"] else identity.get("reason", "")
        add_row(f"input ({role})", f"{_shown(identity['path'])}  {digest}")
    if "machine" in data["run"]:
        machine = data["run"]["machine"]
        add_row(
            "run",
            f"potrun {data['run']['potrun_version']}, Python {machine['python']}, numpy {machine['numpy']}, "
            f"{machine['cores']} cores, {data['run']['started_at']} to {data['run']['ended_at']}",
        )
    console.print(table)
    for line, message in summary.bad_lines:
        console.print(f"[yellow]bad record[/] line {line}: {_cell(message)}")


# Characters that act rather than show: C0 and C1 controls (ESC starts a terminal's escape sequences:
# clear the screen, move the cursor, rewrite a line), DEL, zero-width and direction marks and overrides
# (U+202E shows a text backwards), line and paragraph separators, the byte-order mark.
_ACTING = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")


def inert(text: str) -> str:
    """Text a program or an input file chose, as a terminal or a document shows it: every character
    that acts (`_ACTING`) written as its escape (`\\x1b`, `\\u202e`), nothing else changed."""
    return _ACTING.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def _cell(value: Any) -> str:
    """A table cell: inert, and no rich markup ("[bold]" from a program is shown, not applied)."""
    from rich.markup import escape

    return escape(inert(str(value)))


def _accuracy_row(summary: Summary, preset: str) -> tuple[str, str]:
    """The headline row of `preset`: pass@1 over all samples when records have several; "none graded"
    when nothing was (never a 0.0000 that reads as a score)."""
    estimate = summary.accuracy_estimate(preset)
    if estimate is None:
        return f"accuracy ({preset})", "null: no record was graded"
    if summary.sample_records:
        return f"accuracy ({preset}, pass@1 over all samples)", f"{estimate.value:.4f}  {_interval(estimate)}"
    correct = f"({summary.correct[preset]}/{summary.graded})"
    return f"accuracy ({preset})", f"{estimate.value:.4f}  {correct}  {_interval(estimate)}"


def flat_items(data: Mapping[str, Any], separator: str, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Nested mappings as (path, leaf) rows: a benchmark's metrics ("state_checking f1", 0.91), the run
    record ("sandbox_config.limits.timeout_s", 10). An empty mapping is a leaf: it is shown, not lost."""
    for key, value in data.items():
        if isinstance(value, Mapping) and value:
            yield from flat_items(value, separator, f"{prefix}{key}{separator}")
        else:
            yield f"{prefix}{key}", value


def _interval(estimate: Estimate) -> str:
    return f"± {estimate.se:.4f}, 95% CI [{estimate.low:.4f}, {estimate.high:.4f}]"


def _shown(text: str) -> str:
    """A value from the input as the table shows it, cut short (the table makes it inert: `_cell`)."""
    text = json.dumps(text)[1:-1] if any(ch < " " for ch in text) else text
    return text if len(text) <= 40 else text[:37] + "..."


class Progress:
    """A rich progress bar on a terminal; a plain line every few seconds otherwise.

    It counts records as they are written (`advance`, in input order) and, when `programs` is given
    (a callable such as `lambda: sandbox.completed`), the programs finished in any order: read when the
    bar redraws (a few times a second, from rich's refresh thread), so that it moves while the record
    due next waits for a slow program."""

    def __init__(
        self,
        total: int | None,
        stream: TextIO | None = None,
        enabled: bool = True,
        programs: Callable[[], int] | None = None,
    ) -> None:
        self.total = total
        self.programs = programs
        self.stream = stream if stream is not None else sys.stderr  # read at call time: tests replace it
        self.enabled = enabled
        self.tty = enabled and self.stream.isatty()
        self.count = 0
        self.started = time.perf_counter()
        self.last_line = self.started
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> Progress:
        if self.tty:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
            from rich.progress import Progress as Bar

            programs = [_programs_column(self.programs)] if self.programs is not None else []
            self._bar = Bar(
                TextColumn("scoring"),
                BarColumn(bar_width=24),
                MofNCompleteColumn(),
                TextColumn("records"),
                *programs,
                TextColumn("{task.fields[rate]:.0f}/s"),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=Console(file=self.stream),
                transient=True,
            )
            self._bar.start()
            self._task = self._bar.add_task("scoring", total=self.total, rate=0.0)
        return self

    def advance(self) -> None:
        self.count += 1
        now = time.perf_counter()
        if self._bar is not None:
            if self.count % 64 == 0 or now - self.last_line > 0.2:
                self._bar.update(self._task, completed=self.count, rate=self.count / max(now - self.started, 1e-9))
                self.last_line = now
        elif self.enabled and now - self.last_line >= 5.0:
            of = f"/{self.total}" if self.total else ""
            ran = f", {self.programs()} programs done" if self.programs is not None else ""
            print(f"potrun: {self.count}{of} records{ran}, {self.count / (now - self.started):.0f}/s", file=self.stream)
            self.last_line = now

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()


def _programs_column(programs: Callable[[], int]) -> Any:
    """A rich column with the programs finished so far, read at each redraw."""
    from rich.progress import ProgressColumn
    from rich.text import Text

    class ProgramsColumn(ProgressColumn):
        def render(self, task: Any) -> Text:
            return Text(f"{programs()} programs done", no_wrap=True)

    return ProgramsColumn()


__all__ = [
    "Progress",
    "Summary",
    "render",
]
