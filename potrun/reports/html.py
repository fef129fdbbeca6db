"""`potrun report`: a run to look at, from its `--out` file (and its `--summary-json`).

One self-contained HTML file: the headline accuracy with its interval, accuracy by preset and by each
`--by` field (bars with their 95% intervals), status and error-type counts, histograms of wall and CPU
time, the slowest programs, a sample of failures and the run's record. The charts are matplotlib's SVG
written inline (the `report` extra, imported only here), the page has no script and a
Content-Security-Policy that forbids fetching anything, so it shows the same offline, years later. The
markdown variant has the same tables and no charts.

Everything shown comes from the results, which hold values a program chose: each is written as JSON
and HTML-escaped (or markdown-escaped), never as markup.
"""

from __future__ import annotations

import html
import io
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from potrun.check.pipeline import RecordResult
from potrun.check.records import read_records
from potrun.reports.table import Summary, flat_items, inert
from potrun.types import BadRecord, InputError

AS_RUN = "as run"  # the preset's name without a summary: an --out line with one verdict does not name it
FAILURES = 10  # failures shown, the first ones in input order
GROUPS = 25  # values of a --by field charted and listed, the largest groups first
HISTOGRAM_BINS = 40
MIN_SECONDS = 1e-6  # the histograms' time axis is logarithmic: a 0.0 timing shows in the first bin


@dataclass
class Report:
    """What a report shows: the summary (given, or rebuilt from the results), and what only the
    results have: every record's timings and the first failures."""

    results_path: str
    summary: dict[str, Any]
    summary_given: bool
    wall_s: list[float] = field(default_factory=list)
    cpu_s: list[float] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Table:
    """One table of the report, as text: rendered as HTML or markdown."""

    title: str
    header: tuple[str, ...]
    rows: Sequence[tuple[str, ...]]
    anchor: str


def load_report(results_path: str | Path, summary_path: str | Path | None = None) -> Report:
    """Read a run's `--out` file (streamed) and, when given, its `--summary-json`; without it the
    summary is rebuilt from the results (everything but the run's record, which only the run knew)."""
    given = _read_summary(summary_path) if summary_path is not None else None
    presets = tuple(given["accuracy_by_preset"]) if given else (AS_RUN,)
    rebuilt = Summary(presets)
    report = Report(str(results_path), {}, given is not None)
    named: tuple[str, ...] | None = None  # the presets, named by the lines of a run with several
    for data in _result_lines(results_path):
        try:
            result = RecordResult.from_json(data, presets)
        except (TypeError, ValueError) as exc:  # a line of the wrong shape: the file's fault, not a crash
            raise InputError(f"{results_path}: line {data.get('line')!r}: not a potrun --out line ({exc})") from None
        rebuilt.add(result)
        if named is None and isinstance(data.get("verdicts"), dict):
            named = tuple(data["verdicts"])
        if not result.scored:
            continue
        report.wall_s.append(result.wall_s)
        report.cpu_s.append(result.cpu_s)
        if result.correct is False and len(report.failures) < FAILURES:
            report.failures.append(data)
    if given is None:
        rebuilt.presets = named or presets
        summary = rebuilt.finish().to_json()
        summary["run"] = {}  # the rebuilt one would hold this report's time, not the run's
        report.summary = summary
    else:
        report.summary = given
    return report


def _read_summary(path: str | Path) -> dict[str, Any]:
    try:
        summary = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"--summary {path}: not a readable summary JSON: {exc}") from None
    if not isinstance(summary, dict) or not isinstance(summary.get("accuracy_by_preset"), dict):
        raise InputError(f"--summary {path}: not a potrun --summary-json (no accuracy_by_preset)")
    return summary


def _result_lines(path: str | Path) -> Iterator[dict[str, Any]]:
    for item in read_records(path):
        if isinstance(item, BadRecord):
            raise InputError(f"{path}: {item}")
        yield item.data


# -- the tables (one list, two renderings) ---------------------------------------------------------------


def tables(report: Report) -> list[Table]:
    """Every table of the report, in the order shown."""
    summary = report.summary
    found = [_presets_table(summary)]
    found += [_group_table(name, groups) for name, groups in summary.get("by", {}).items()]
    found.append(_counts_table("Statuses", "status", summary.get("status_counts", {}), summary.get("total", 0)))
    if summary.get("error_type_counts"):
        errors = summary["error_type_counts"]
        found.append(_counts_table("Error types", "error_type", errors, sum(errors.values())))
    found.append(_slowest_table(summary.get("slowest", [])))
    found.append(_failures_table(report.failures))
    found.append(_run_table(summary.get("run", {}), report))
    return found


def _presets_table(summary: dict[str, Any]) -> Table:
    rows = []
    graded = summary.get("graded", 0)
    intervals = summary.get("accuracy_ci95_by_preset", {})
    for preset, accuracy in summary["accuracy_by_preset"].items():
        low, high = intervals.get(preset) or [None, None]
        rows.append((preset, _accuracy_text(accuracy), str(graded), _ci(low, high)))
    return Table("Accuracy by comparator preset", ("preset", "accuracy", "graded", "95% CI (Wilson)"), rows, "presets")


def _group_table(name: str, groups: dict[str, dict[str, Any]]) -> Table:
    rows = [
        (key, f"{group['accuracy']:.4f}", str(group["n"]), str(group["correct"]), _ci(*group["ci95"]))
        for key, group in _largest(groups)
    ]
    more = len(groups) - len(rows)
    title = f"Accuracy by {name}" + (f" (the {GROUPS} largest of {len(groups)} values)" if more > 0 else "")
    return Table(title, (name, "accuracy", "n", "correct", "95% CI (Wilson)"), rows, f"by-{name}")


def _counts_table(title: str, what: str, counts: dict[str, int], total: int) -> Table:
    rows = [(key, str(count), f"{count / total:.1%}" if total else "") for key, count in counts.items()]
    return Table(title, (what, "records", "share"), rows, what)


def _slowest_table(slowest: list[dict[str, Any]]) -> Table:
    rows = [(str(item["line"]), _json(item["id"]), f"{item['wall_s']:.3f}", str(item["status"])) for item in slowest]
    return Table("Slowest programs", ("line", "id", "wall s", "status"), rows, "slowest")


def _failures_table(failures: list[dict[str, Any]]) -> Table:
    with_program = any(isinstance(item.get("program"), str) for item in failures)  # when the --out has it
    rows = [
        (
            str(item.get("line")),
            _json(item.get("id")),
            str(item.get("status")),
            _json(item.get("value")),
            _json(item.get("gold")),
            " ".join(str(part) for part in (item.get("error_type"), item.get("error")) if part),
        )
        + ((str(item.get("program") or ""),) if with_program else ())
        for item in failures
    ]
    header = ("line", "id", "status", "value", "gold", "error") + (("program",) if with_program else ())
    return Table(f"Failures (the first {FAILURES} in input order)", header, rows, "failures")


def _run_table(run: dict[str, Any], report: Report) -> Table:
    if not run:
        note = "none: give the run's --summary-json (--summary) to show it" if not report.summary_given else "none"
        return Table("Run record", ("item", "value"), [("run record", note)], "run")
    rows = [(key, _text(value)) for key, value in flat_items(run, separator=".")]
    return Table("Run record", ("item", "value"), rows, "run")


def _largest(groups: dict[str, dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    return sorted(groups.items(), key=lambda item: (-item[1]["n"], item[0]))[:GROUPS]


def _ci(low: float | None, high: float | None) -> str:
    return "" if low is None or high is None else f"[{low:.4f}, {high:.4f}]"


def _json(value: Any) -> str:
    """A value from the results as text: JSON (so that "1" and 1 differ), cut short."""
    return _cut(json.dumps(value, ensure_ascii=False))


def _text(value: Any) -> str:
    """A run record's leaf: a string as it is, anything else as JSON, cut short."""
    return _cut(value if isinstance(value, str) else json.dumps(value))


def _cut(text: str) -> str:
    return text if len(text) <= 160 else text[:157] + "..."


def _accuracy_text(accuracy: Any) -> str:
    """An accuracy as shown: 4 decimals, or "null" when nothing was graded (never 0.0000)."""
    return f"{accuracy:.4f}" if isinstance(accuracy, (int, float)) else "null"


def headline(summary: dict[str, Any]) -> tuple[str, str]:
    """The headline: the accuracy as shown (4 decimals; "null" when nothing was graded), and what
    qualifies it (pass@1 over all samples when records have several, the first sample's accuracy)."""
    if not isinstance(summary.get("accuracy"), (int, float)):
        return "null", f"no record was graded (0 of {summary.get('scored', 0)} scored had a gold)"
    low, high = summary.get("accuracy_ci95") or [None, None]
    se = summary.get("accuracy_se")
    if summary.get("accuracy_measure") == "pass@1 over all samples":
        first = _accuracy_text(summary.get("first_sample_accuracy"))
        detail = f"pass@1 over all samples of {summary['graded']} graded records ({summary.get('preset', '')}); "
        detail += f"first sample {first}"
        method = summary.get("accuracy_interval") or "Wilson"
    else:
        detail = f"{summary['correct']}/{summary['graded']} graded ({summary.get('preset', '')})"
        method = "Wilson"
    if se is not None:
        detail += f", ± {se:.4f} standard error, 95% CI {_ci(low, high)} ({method})"
    return _accuracy_text(summary["accuracy"]), detail


# -- markdown ---------------------------------------------------------------------------------------------


def render_markdown(report: Report) -> str:
    """The report as markdown: the headline and every table, no charts."""
    value, detail = headline(report.summary)
    parts = [f"# potrun report: {_md(report.results_path)}", "", f"**Accuracy {value}** ({_md(detail)})", ""]
    for table in tables(report):
        parts += [f"## {_md(table.title)}", "", _md_row(table.header), _md_row(("---",) * len(table.header))]
        parts += [_md_row(row) for row in table.rows] or [_md_row(("(none)",) + ("",) * (len(table.header) - 1))]
        parts.append("")
    return "\n".join(parts)


def _md_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(_md(cell) for cell in cells) + " |"


def _md(text: str) -> str:
    """Text safe in a markdown table cell: no line breaks, pipes and markup escaped, no raw HTML, no
    character that acts on a terminal that shows the file (`potrun.reports.table.inert`)."""
    text = inert(" ".join(text.split()))
    for char in "\\|*_`[]<>#":
        text = text.replace(char, "\\" + char)
    return text


# -- HTML -----------------------------------------------------------------------------------------------

_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; }
#headline { font-size: 1.2em; } #headline-accuracy { font-size: 2.2em; font-weight: bold; }
table { border-collapse: collapse; font-size: 0.9em; } td, th { border: 1px solid #ccc; padding: 3px 8px; }
th { background: #f3f3f3; text-align: left; } td { vertical-align: top; }
pre { margin: 0; max-width: 480px; max-height: 12em; overflow: auto; font-size: 0.85em; }
.charts { display: flex; flex-wrap: wrap; gap: 1em; }
.chart { margin: 0; } .chart svg { max-width: 530px; height: auto; }
"""


def render_html(report: Report) -> str:
    """The report as one self-contained HTML page (module docstring)."""
    value, detail = headline(report.summary)
    charts = "".join(f'<figure class="chart">{svg}</figure>' for svg in _charts(report))
    body = [
        f"<h1>potrun report: {_h(report.results_path)}</h1>",
        f'<p id="headline">accuracy <span id="headline-accuracy">{_h(value)}</span> {_h(detail)}</p>',
        f'<div class="charts">{charts}</div>',
    ]
    body += [_html_table(table) for table in tables(report)]
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<meta http-equiv='Content-Security-Policy' content=\"{_CSP}\">"
        f"<title>potrun report: {_h(report.results_path)}</title><style>{_STYLE}</style></head>\n<body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )


def _html_table(table: Table) -> str:
    head = "".join(f"<th>{_h(cell)}</th>" for cell in table.header)
    rows = "".join(
        "<tr>" + "".join(_html_cell(name, cell) for name, cell in zip(table.header, row, strict=True)) + "</tr>"
        for row in table.rows
    )
    empty = f"<tr><td colspan='{len(table.header)}'>(none)</td></tr>" if not table.rows else ""
    return f"<h2 id='{table.anchor}'>{_h(table.title)}</h2><table><tr>{head}</tr>{rows}{empty}</table>"


def _html_cell(column: str, text: str) -> str:
    return f"<td><pre>{_h(text)}</pre></td>" if column == "program" and text else f"<td>{_h(text)}</td>"


def _h(text: str) -> str:
    return html.escape(inert(text), quote=True)


# -- charts (matplotlib, the `report` extra) ------------------------------------------------------------------


def _charts(report: Report) -> list[str]:
    """The charts as inline SVG elements."""
    plt = _pyplot()
    with plt.rc_context({"text.parse_math": False, "text.usetex": False}):  # labels literal (`_label`)
        return _charts_literal(plt, report)


def _charts_literal(plt: Any, report: Report) -> list[str]:
    summary = report.summary
    charts = [_accuracy_chart(plt, "accuracy by preset", _preset_bars(summary))]
    charts += [
        _accuracy_chart(
            plt, f"accuracy by {_label(name)}", [(key, g["accuracy"], g["ci95"]) for key, g in _largest(groups)]
        )
        for name, groups in summary.get("by", {}).items()
    ]
    charts.append(_counts_chart(plt, "records by status", summary.get("status_counts", {})))
    if summary.get("error_type_counts"):
        charts.append(_counts_chart(plt, "records by error type", summary["error_type_counts"]))
    charts.append(_histogram(plt, "wall time per record (s)", report.wall_s))
    charts.append(_histogram(plt, "CPU time per record (s)", report.cpu_s))
    return [_svg(plt, figure, salt=f"potrun-chart-{index}") for index, figure in enumerate(charts)]


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise InputError(
            "potrun report --html draws its charts with matplotlib: pip install 'potrun[report]'"
        ) from None
    matplotlib.use("Agg")  # no display: the charts are files
    import matplotlib.pyplot as plt

    return plt


def _preset_bars(summary: dict[str, Any]) -> list[tuple[str, float, list[float] | None]]:
    intervals = summary.get("accuracy_ci95_by_preset", {})
    presets = summary["accuracy_by_preset"].items()  # a null accuracy (nothing graded) has no bar
    return [(preset, value, intervals.get(preset)) for preset, value in presets if isinstance(value, (int, float))]


def _accuracy_chart(plt: Any, title: str, bars: list[tuple[str, float, list[float] | None]]) -> Any:
    """Horizontal bars of accuracy, each with its 95% interval as an error bar."""
    figure, axes = plt.subplots(figsize=(5.2, 0.6 + 0.32 * max(len(bars), 2)))
    labels = [_label(name) for name, _, _ in bars]
    values = [value for _, value, _ in bars]
    errors = [
        [value - (ci[0] if ci else value) for _, value, ci in bars],
        [(ci[1] if ci else value) - value for _, value, ci in bars],
    ]
    bars = axes.barh(labels, values, xerr=errors, color="#4c72b0", ecolor="#222", capsize=3)
    axes.bar_label(bars, labels=[f"{value:.4f}" for value in values], label_type="center", color="white", fontsize=8)
    axes.invert_yaxis()
    axes.set_xlim(0, 1)
    axes.set_title(f"{title} (95% interval)", fontsize=10)
    return figure


def _counts_chart(plt: Any, title: str, counts: dict[str, int]) -> Any:
    figure, axes = plt.subplots(figsize=(5.2, 0.6 + 0.32 * max(len(counts), 2)))
    bars = axes.barh([_label(name) for name in counts], list(counts.values()), color="#55a868")
    axes.bar_label(bars, padding=2, fontsize=8)  # a count of 2 beside one of 1,296 is no visible bar
    axes.margins(x=0.12)
    axes.invert_yaxis()
    axes.set_title(title, fontsize=10)
    return figure


def _histogram(plt: Any, title: str, seconds: list[float]) -> Any:
    """A histogram of timings, both axes logarithmic: they span microseconds to the limit, and the
    few slow records that matter would be invisible bars beside a thousand fast ones."""
    import numpy as np

    figure, axes = plt.subplots(figsize=(5.2, 2.6))
    values = np.asarray(seconds, dtype=np.float64)
    under = int((values < MIN_SECONDS).sum())
    if len(values):
        values = np.maximum(values, MIN_SECONDS)
        low, high = float(values.min()), float(values.max())
        bins = np.logspace(np.log10(low), np.log10(max(high, low * 10)), HISTOGRAM_BINS)
        axes.hist(values, bins=bins, color="#8172b2", log=True)
        axes.set_xscale("log")
    if under:  # a clock's resolution (CPU time counts in ticks) or a record not timed
        title += f"\n{under} of {len(values)} under {MIN_SECONDS:g} s, counted in the first bin"
    axes.set_title(title, fontsize=10)
    axes.set_ylabel("records")
    return figure


def _label(text: str) -> str:
    """A chart's label: inert, cut short, and drawn literally (`_charts` turns mathtext off: "$x$" from
    a program's error type is shown as written, never parsed, nor able to stop the report)."""
    text = inert(text)
    return text if len(text) <= 28 else text[:25] + "..."


def _svg(plt: Any, figure: Any, salt: str) -> str:
    """A figure as an inline <svg> element: text kept as text, ids salted apart from other charts',
    no date (the same run gives the same file)."""
    buffer = io.StringIO()
    with plt.rc_context({"svg.fonttype": "none", "svg.hashsalt": salt}):
        figure.tight_layout()
        figure.savefig(buffer, format="svg", metadata={"Date": None})
    plt.close(figure)
    text = buffer.getvalue()
    return text[text.index("<svg") :]


__all__ = ["Report", "Table", "headline", "load_report", "render_html", "render_markdown", "tables"]
