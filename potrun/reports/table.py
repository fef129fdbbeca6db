"""The run's summary as a table a person reads (potrun.check.summary counts it, and writes the JSON a
CI reads)."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator, Mapping
from typing import Any, TextIO

from potrun.check.progress import Progress
from potrun.check.stats import Estimate
from potrun.check.summary import MISSING_GROUP, Summary

TABLE_GROUPS = 12  # values of a --by field the table shows; --summary-json has them all


def render(summary: Summary, stream: TextIO | None = None) -> None:
    """The end-of-run table."""
    from rich.console import Console
    from rich.table import Table

    console = Console(file=stream if stream is not None else sys.stderr, highlight=False)
    data = summary.to_json()
    table = Table(title="potrun check", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column(justify="right")
    for rows in (
        _accuracy_rows(summary),
        _record_rows(summary),
        _group_rows(data),
        _sample_rows(summary, data),
        _run_rows(data),
    ):
        for label, value in rows:
            table.add_row(_cell(label), _cell(value))  # every cell inert: error types and ids are a program's
    console.print(table)
    for line, message in summary.bad_lines:
        console.print(f"[yellow]bad record[/] line {line}: {_cell(message)}")


Rows = Iterator[tuple[str, str]]


def _accuracy_rows(summary: Summary) -> Rows:
    """The accuracy of each preset, the first sample's, the mean score, the checklist's, the execution rate."""
    for preset in summary.presets:
        yield _accuracy_row(summary, preset)
    if summary.sample_records and summary.graded:
        for preset in summary.presets:
            yield (
                f"first sample ({preset})",
                f"{summary.correct[preset] / summary.graded:.4f}  ({summary.correct[preset]}/{summary.graded})",
            )
    score = summary.score_estimate()
    if score is not None:
        yield "mean score", f"{score.value:.4f}  {_interval(score)}"
    if summary.checklist_records:
        yield (
            "accuracy + checklist",
            f"{summary.checklist_accuracy():.4f}  "
            f"({summary.checklist_correct}/{summary.checklist_records} with a checklist)",
        )
    yield "execution rate", f"{summary.execution_rate:.4f}"


def _record_rows(summary: Summary) -> Rows:
    """What became of the records: the counts, the statuses, tiers, extractions, error types."""
    no_gold = f" + {summary.no_gold} no gold" if summary.no_gold else ""
    yield (
        "records",
        f"{summary.total} = {summary.scored} scored + {summary.skipped} skipped + {summary.bad_record} bad{no_gold}",
    )
    for status, count in summary.status_counts.most_common():
        note = f"  ({', '.join(f'{k} {v}' for k, v in summary.timeouts.items())})" if status == "timeout" else ""
        yield f"  {status}", f"{count}{note}"
    if summary.scored > summary.graded:
        yield "not graded", f"{summary.scored - summary.graded} (run, but no gold to compare with)"
    if summary.isolation_counts:
        yield "tiers", ", ".join(f"{k} {v}" for k, v in summary.isolation_counts.most_common())
    if summary.extraction_counts:
        yield "extraction", ", ".join(f"{k} {v}" for k, v in summary.extraction_counts.most_common())
    if summary.error_type_counts:
        yield "error types", ", ".join(f"{k} {v}" for k, v in summary.error_type_counts.most_common(6))


def _group_rows(data: Mapping[str, Any]) -> Rows:
    """The --by breakdowns, the largest groups first."""
    for name, groups in data.get("by", {}).items():
        largest = sorted(groups.items(), key=lambda item: -item[1]["n"])
        for key, group in largest[:TABLE_GROUPS]:
            low, high = group["ci95"]
            yield (
                f"  {name} = {_shown(key)}",
                f"{group['accuracy']:.4f}  ({group['correct']}/{group['n']})  95% CI [{low:.4f}, {high:.4f}]",
            )
        if len(groups) > TABLE_GROUPS:
            yield f"  {name}", f"... {len(groups) - TABLE_GROUPS} more values (--summary-json has all)"


def _sample_rows(summary: Summary, data: Mapping[str, Any]) -> Rows:
    """pass@k and the majority vote of records with several samples; a benchmark's own metrics."""
    if "samples" in data:
        samples = data["samples"]
        yield (
            "pass@k",
            ", ".join(
                f"@{k} {e.value:.4f} [{e.low:.4f}, {e.high:.4f}]" for k, e in summary.pass_at_k_estimates().items()
            ),
        )
        yield "majority vote", f"{samples['majority_accuracy']:.4f}"
        yield "samples executed", f"{samples['executed_fraction']:.4f}"
    for name, value in flat_items(summary.metrics, separator=" "):
        yield name, f"{value:.4f}" if isinstance(value, float) else str(value)


def _run_rows(data: Mapping[str, Any]) -> Rows:
    """How the run went: the slowest records, throughput, the settings, the inputs, the run record."""
    for item in data["slowest"][:3]:
        yield "slowest", f"line {item['line']} ({item['id']}): {item['wall_s']:.3f} s {item['status']}"
    yield "throughput", f"{data['programs_per_s']:.0f} records/s in {data['elapsed_s']:.1f} s"
    for key in ("policy", "backend", "isolation", "workers", "engine", "cache_hits"):
        if key in data:
            yield key, str(data[key])
    for role, identity in data["run"].get("inputs", {}).items():
        digest = f"sha256 {identity['sha256'][:16]}..." if identity["sha256"] else identity.get("reason", "")
        yield f"input ({role})", f"{_shown(identity['path'])}  {digest}"
    if "machine" in data["run"]:
        machine = data["run"]["machine"]
        yield (
            "run",
            f"potrun {data['run']['potrun_version']}, Python {machine['python']}, numpy {machine['numpy']}, "
            f"{machine['cores']} cores, {data['run']['started_at']} to {data['run']['ended_at']}",
        )


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


# Summary and Progress live in the check library (potrun.check.summary, potrun.check.progress); they
# stay importable from here.
__all__ = [
    "MISSING_GROUP",
    "Progress",
    "Summary",
    "render",
]
