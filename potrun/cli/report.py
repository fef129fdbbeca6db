"""`potrun report RESULTS --html | --markdown`: a report of a run to look at."""

from __future__ import annotations

import argparse
from typing import Any

from potrun.cli.exits import EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    """`potrun report results.jsonl [--summary S.json] --html report.html | --markdown report.md`."""
    from potrun.check.output import check_output_path, write_text_output
    from potrun.reports.html import load_report, render_html, render_markdown

    option, output, render = (
        ("--html", args.html, render_html) if args.html else ("--markdown", args.markdown, render_markdown)
    )
    check_output_path(option, output, [args.results] + ([args.summary] if args.summary else []))
    write_text_output(option, output, render(load_report(args.results, args.summary)))
    return EXIT_OK


def add_command(commands: Any) -> None:
    report = commands.add_parser("report", help="a report to look at (HTML with charts, or markdown) of a run")
    report.add_argument("results", help="the run's --out file")
    report.add_argument("--summary", default=None, help="the run's --summary-json (its run record and intervals)")
    formats = report.add_mutually_exclusive_group(required=True)
    formats.add_argument("--html", help="write one self-contained HTML file here (charts inline, nothing fetched)")
    formats.add_argument("--markdown", help="write the same tables as markdown here (no charts)")
    report.set_defaults(handler=cmd_report)
