"""The run's summary: counts as results stream by, then a table a person reads and a JSON a CI reads."""

from __future__ import annotations

import heapq
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO

from potrun.pipeline import BAD_RECORD, NO_GOLD, SKIPPED, RecordResult

SLOWEST = 5


@dataclass
class Summary:
    """Accumulates RecordResults; `to_json()` is `--summary-json`."""

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
    checklist_records: int = 0  # records with a checklist (potrun.process_golds)
    checklist_passed: int = 0
    checklist_correct: int = 0  # correct AND checklist passed
    metrics: dict[str, Any] = field(default_factory=dict)  # a benchmark's own metrics (potrun.benchmarks)
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
        if result.correct is not None:
            self.graded += 1
            for preset, verdict in (result.verdicts or {self.presets[0]: result.correct}).items():
                self.correct[preset] += bool(verdict)
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

    def _add_samples(self, samples: Mapping[str, Any]) -> None:
        self.sample_records += 1
        self.samples_total += samples["n"]
        self.samples_executed += samples["executed"]
        for k, value in samples.get("pass@k", {}).items():
            self.pass_at_k[k] += value
        self.majority_correct += bool(samples.get("majority_correct"))

    def finish(self) -> Summary:
        self.elapsed_s = time.perf_counter() - self.started
        return self

    @property
    def scored(self) -> int:
        return self.total - self.skipped - self.bad_record - self.no_gold

    def accuracy(self, preset: str | None = None) -> float:
        return self.correct[preset or self.presets[0]] / self.graded if self.graded else 0.0

    def checklist_accuracy(self) -> float:
        return self.checklist_correct / self.checklist_records if self.checklist_records else 0.0

    @property
    def execution_rate(self) -> float:
        return self.status_counts["ok"] / self.scored if self.scored else 0.0

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "total": self.total,
            "scored": self.scored,
            "skipped": self.skipped,
            "bad_record": self.bad_record,
            "no_gold": self.no_gold,
            "graded": self.graded,
            "ungraded": self.scored - self.graded,
            "correct": self.correct[self.presets[0]],
            "accuracy": round(self.accuracy(), 6),
            "preset": self.presets[0],
            "accuracy_by_preset": {p: round(self.accuracy(p), 6) for p in self.presets},
            "execution_rate": round(self.execution_rate, 6),
            "status_counts": dict(self.status_counts),
            "timeouts": dict(self.timeouts),
            "isolation_counts": dict(self.isolation_counts),
            "extraction_counts": dict(self.extraction_counts),
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
        if self.sample_records:
            data["samples"] = {
                "records": self.sample_records,
                "pass@k": {k: round(v / self.sample_records, 6) for k, v in self.pass_at_k.items()},
                "majority_accuracy": round(self.majority_correct / self.sample_records, 6),
                "executed_fraction": round(self.samples_executed / self.samples_total, 6),
            }
        return data


def render(summary: Summary, stream: TextIO | None = None) -> None:
    """The end-of-run table."""
    from rich.console import Console
    from rich.table import Table

    console = Console(file=stream if stream is not None else sys.stderr, highlight=False)
    data = summary.to_json()
    table = Table(title="potrun check", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column(justify="right")
    for preset in summary.presets:
        table.add_row(
            f"accuracy ({preset})", f"{summary.accuracy(preset):.4f}  ({summary.correct[preset]}/{summary.graded})"
        )
    if summary.checklist_records:
        table.add_row(
            "accuracy + checklist",
            f"{summary.checklist_accuracy():.4f}  "
            f"({summary.checklist_correct}/{summary.checklist_records} with a checklist)",
        )
    table.add_row("execution rate", f"{summary.execution_rate:.4f}")
    no_gold = f" + {summary.no_gold} no gold" if summary.no_gold else ""
    table.add_row(
        "records",
        f"{summary.total} = {summary.scored} scored + {summary.skipped} skipped + {summary.bad_record} bad{no_gold}",
    )
    for status, count in summary.status_counts.most_common():
        note = f"  ({', '.join(f'{k} {v}' for k, v in summary.timeouts.items())})" if status == "timeout" else ""
        table.add_row(f"  {status}", f"{count}{note}")
    if summary.scored > summary.graded:
        table.add_row("not graded", f"{summary.scored - summary.graded} (run, but no gold to compare with)")
    if summary.isolation_counts:
        table.add_row("tiers", ", ".join(f"{k} {v}" for k, v in summary.isolation_counts.most_common()))
    if summary.extraction_counts:
        table.add_row("extraction", ", ".join(f"{k} {v}" for k, v in summary.extraction_counts.most_common()))
    if "samples" in data:
        samples = data["samples"]
        table.add_row("pass@k", ", ".join(f"@{k} {v:.4f}" for k, v in samples["pass@k"].items()))
        table.add_row("majority vote", f"{samples['majority_accuracy']:.4f}")
        table.add_row("samples executed", f"{samples['executed_fraction']:.4f}")
    for name, value in _flat(summary.metrics):
        table.add_row(name, f"{value:.4f}" if isinstance(value, float) else str(value))
    for item in data["slowest"][:3]:
        table.add_row("slowest", f"line {item['line']} ({item['id']}): {item['wall_s']:.3f} s {item['status']}")
    table.add_row("throughput", f"{data['programs_per_s']:.0f} records/s in {data['elapsed_s']:.1f} s")
    for key in ("policy", "backend", "isolation", "workers", "engine", "cache_hits"):
        if key in data:
            table.add_row(key, str(data[key]))
    console.print(table)
    for line, message in summary.bad_lines:
        console.print(f"[yellow]bad record[/] line {line}: {message}")


def _flat(metrics: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """A benchmark's nested metrics as table rows: ("state_checking f1", 0.91)."""
    rows: list[tuple[str, Any]] = []
    for name, value in metrics.items():
        if isinstance(value, Mapping):
            rows += _flat(value, f"{prefix}{name} ")
        else:
            rows.append((f"{prefix}{name}", value))
    return rows


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
