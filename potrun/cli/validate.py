"""`potrun validate GOLDS`: check gold programs."""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import ExitStack
from typing import Any

from potrun.cli.common import add_sandbox_options, check_presets, compare_options, positive_float, split_fields
from potrun.cli.exits import EXIT_FAILED, EXIT_OK
from potrun.types import UsageError


def cmd_validate(args: argparse.Namespace) -> int:
    """Arguments -> validate()'s reports -> a JSON line each, the table, the fixed copy -> exit code."""
    from potrun.validation import render_summary

    _check_arguments(args)
    summary = _write_reports(args, _reports(args))
    if not args.quiet:
        render_summary(summary)
    if args.fix_answers:
        _fix_answers(args, summary)
    if summary.with_errors or (args.strict and summary.with_warnings_only):
        return EXIT_FAILED
    return EXIT_OK


def _check_arguments(args: argparse.Namespace) -> None:
    """The preset known, the outputs writable, GOLDS readable twice for --fix-answers (else exit 2)."""
    from potrun.check.output import check_output_path
    from potrun.check.records import is_stream

    check_presets([args.compare])
    if args.fix_answers and is_stream(args.gold):
        raise UsageError("--fix-answers reads GOLDS a second time: give a file, not a stream")
    for option, path in (("--out", args.out), ("--fix-answers", args.fix_answers)):
        if path:
            check_output_path(option, path, inputs=[args.gold])


def _reports(args: argparse.Namespace) -> Any:
    """validate()'s reports of GOLDS, one per record as they come."""
    from potrun.check.records import ANSWER_FIELDS, ID_FIELDS, PROGRAM_FIELDS
    from potrun.validation import validate

    return validate(
        args.gold,
        program_field=split_fields(args.program_field, PROGRAM_FIELDS),
        answer_field=split_fields(args.answer_field, ANSWER_FIELDS),
        id_field=split_fields(args.id_field, ID_FIELDS),
        compare=args.compare,
        compare_options=compare_options(args),
        slow_fraction=args.slow_fraction,
        ignore=split_fields(args.ignore, ()),
        policy=args.policy,
        timeout=args.timeout,
        wall_timeout=args.wall_timeout,
        memory_mb=args.memory,
        workers=args.workers,
        backend=args.backend,
        image=args.image,
        isolation=args.isolation,
        entry=args.entry,
        benchmark=args.benchmark,
    )


def _write_reports(args: argparse.Namespace, reports: Any) -> Any:
    """Each report as a JSON line to --out (or standard output) as it comes; their ValidationSummary."""
    from potrun.check.output import STDOUT, OutputWriter
    from potrun.check.progress import Progress
    from potrun.check.records import count_records
    from potrun.validation import ValidationSummary

    summary = ValidationSummary()
    with ExitStack() as closing:
        # An interrupt closes the pools now (workers, cgroups and scratch gone), not when collected.
        closing.callback(getattr(reports, "close", lambda: None))
        # Each line in one write as it comes; a full disk is exit 2 naming the path, whole lines kept.
        out = OutputWriter(args.out) if args.out and args.out != STDOUT else None
        if out is not None:
            closing.callback(out.close)
        with Progress(count_records(args.gold), enabled=not args.quiet) as progress:
            for report in reports:
                summary.add(report)
                progress.advance()
                if out is not None:
                    out.write_json(report.to_json())
                else:
                    sys.stdout.write(json.dumps(report.to_json()) + "\n")
                    sys.stdout.flush()
    return summary.finish()


def _fix_answers(args: argparse.Namespace, summary: Any) -> None:
    """--fix-answers: the copy with each fixable record's answer replaced by its executed value, and the list."""
    from potrun.check.records import ANSWER_FIELDS
    from potrun.validation import write_fixed_copy

    fixes = {ordinal: value for ordinal, _, _, _, value in summary.fixable}
    write_fixed_copy(args.gold, args.fix_answers, fixes, split_fields(args.answer_field, ANSWER_FIELDS))
    print(
        f"potrun: {len(fixes)} recorded answer(s) replaced by the executed value in {args.fix_answers}",
        file=sys.stderr,
    )
    for _, line, record_id, answer, value in summary.fixable:
        print(f"  line {line} (id {record_id}): {json.dumps(answer)} -> {json.dumps(value)}", file=sys.stderr)


def add_command(commands: Any) -> None:
    """`potrun validate`'s arguments."""
    from potrun.check.records import ANSWER_FIELDS, ID_FIELDS, PROGRAM_FIELDS

    valid = commands.add_parser(
        "validate",
        help="check gold programs: they run, return a number, are deterministic and match their recorded answer",
    )
    valid.add_argument("gold", help="JSON Lines (or a JSON array) of gold records")
    valid.add_argument(
        "--program-field", help=f"field(s) with the gold program, comma-separated (default: {','.join(PROGRAM_FIELDS)})"
    )
    valid.add_argument("--answer-field", help=f"field(s) with the recorded answer (default: {','.join(ANSWER_FIELDS)})")
    valid.add_argument("--id-field", help=f"field(s) with the record id (default: {','.join(ID_FIELDS)})")
    valid.add_argument("--compare", default="default", help="comparator preset for the recorded answer")
    valid.add_argument("--abs", action="store_true", help="compare absolute values")
    valid.add_argument("--percent", action="store_true", help="accept 0.25 for 25 (and 25 for 0.25)")
    valid.add_argument("--scale", action="store_true", help="apply scale words (3.5 million = 3500000)")
    valid.add_argument("--rel-tol", type=float, default=None, help="relative tolerance of the comparator")
    valid.add_argument(
        "--slow-fraction",
        type=positive_float,
        default=0.1,
        help="report golds that run longer than this fraction of --timeout (default 0.1)",
    )
    valid.add_argument("--ignore", help="problem codes to leave out, comma-separated")
    valid.add_argument("--out", help="write one JSON line per record here (default: stdout)")
    valid.add_argument(
        "--fix-answers",
        metavar="OUT",
        help="write a copy of the file with each wrong recorded answer replaced by the executed "
        "value, where that is the record's only error",
    )
    valid.add_argument(
        "--benchmark",
        default=None,
        choices=["docmath"],
        help="also flag golds whose answer the benchmark's official scorer cannot read (DocMath-Eval: numpy.int64, "
        "float32, Decimal)",
    )
    valid.add_argument("--strict", action="store_true", help="exit 1 on warnings too")
    valid.add_argument("--quiet", action="store_true", help="no progress bar and no table")
    add_sandbox_options(valid)
    valid.set_defaults(handler=cmd_validate, policy="trusted")
