"""`potrun check PREDS`: extract, execute and score a file of model outputs."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from potrun.cli.common import (
    add_sandbox_options,
    check_presets,
    compare_options,
    positive_int,
    sandbox_config,
    split_fields,
)
from potrun.cli.exits import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_NOTHING_SCORED, EXIT_OK
from potrun.types import SandboxUnavailable, UsageError


def cmd_check(args: argparse.Namespace) -> int:
    """Arguments -> CheckOptions -> the library's CheckRun -> the table and --summary-json -> exit code."""
    from potrun.check.output import write_text_output
    from potrun.reports.table import render

    options = check_options(args)
    if args.resume and not args.out:
        raise UsageError("--resume needs --out: the output file of the run to continue")
    _check_outputs(args, inputs=[args.preds] + ([args.gold] if args.gold else []))
    run = _open_run(args, options)
    summary = _run(args, run)
    if summary is None:
        return EXIT_INTERRUPTED
    if not args.quiet:
        render(summary)
    if args.summary_json:
        write_text_output("--summary-json", args.summary_json, json.dumps(summary.to_json(), indent=2) + "\n")
    return _exit_code(args, run, summary)


def check_options(args: argparse.Namespace) -> Any:
    """The CheckOptions of the command line (a benchmark's own, with --benchmark)."""
    from potrun.check.pipeline import CheckOptions
    from potrun.check.records import CODE_FIELDS, GOLD_FIELDS, ID_FIELDS

    benchmark = _benchmark_run(args)
    if benchmark is not None and args.by:
        raise UsageError("--by is not for --benchmark: a benchmark breaks its results down by its own fields")
    if benchmark is not None:
        return CheckOptions(benchmark=benchmark, presets=(args.benchmark,))
    options = CheckOptions(
        code_fields=split_fields(args.code_field, CODE_FIELDS),
        gold_fields=split_fields(args.gold_field, GOLD_FIELDS),
        id_fields=split_fields(args.id_field, ID_FIELDS),
        mode=args.mode,
        presets=tuple(p.strip() for p in args.compare.split(",") if p.strip()),
        compare_options=compare_options(args),
        ks=tuple(int(k) for k in args.k.split(",")) if args.k else (1,),
        strict=args.strict,
        checklist_field=args.checklist_field or None,
        checker_field=args.checker_field or None,
        by_fields=split_fields(args.by, ()),
    )
    check_presets(options.presets)
    return options


def _open_run(args: argparse.Namespace, options: Any) -> Any:
    """The run, opened: golds loaded, PREDS opened (an unreadable input or a missing extra stops the
    run before the engine starts), the engine made."""
    from potrun.check.run import CheckRun

    return CheckRun(
        args.preds,
        options,
        gold=args.gold,
        sandbox=sandbox_config(args),
        out=args.out,
        resume=args.resume,
        engine=args.engine,
        cache=not args.no_cache,
        ray_address=args.ray_address,
        ray_actors=args.ray_actors,
        max_line_bytes=args.max_record_mb << 20,
        command=args.words,
    )


def _run(args: argparse.Namespace, run: Any) -> Any:
    """The run's Summary; None when it was interrupted (what --out holds, and how to resume, said)."""
    from potrun.check.output import resume_command

    try:
        return run.run(progress=not args.quiet)
    except KeyboardInterrupt:  # the engine is closed (workers gone); every line in --out is whole
        if args.out and run.kept is None:  # before --out was opened: nothing new to say
            raise
        if not args.out:
            print("potrun: interrupted (without --out there is nothing to resume)", file=sys.stderr)
        else:
            print(
                f"potrun: interrupted; {run.kept} records are in {args.out}. Resume with:\n"
                f"  {resume_command(args.words)}",
                file=sys.stderr,
            )
        return None
    except SandboxUnavailable:  # a worker that would not start again: what was written can be resumed
        if args.out and run.kept is not None:
            print(
                f"potrun: {run.kept} records are in {args.out}; resume with:\n  {resume_command(args.words)}",
                file=sys.stderr,
            )
        raise


def _exit_code(args: argparse.Namespace, run: Any, summary: Any) -> int:
    """0, or 1 when no record was scored or graded or the accuracy is below --fail-under (saying why)."""
    options, first = run.options, run.first.data
    if summary.scored == 0:
        _warn_nothing_scored(summary, options, first, run.golds)
        return EXIT_NOTHING_SCORED
    if summary.no_gold:  # reported even with --quiet: these records are outside the accuracy
        print(
            f"potrun: warning: {summary.no_gold} record(s) have no gold in {args.gold} (status no_gold): not run, "
            f"not in the accuracy's {summary.graded}",
            file=sys.stderr,
        )
    accuracy = summary.accuracy()  # pass@1 over all samples where records have several
    if accuracy is None:  # a wrong --gold-field: the accuracy is null and the run fails, never a 0.0 and exit 0
        print(
            f"potrun: no record was graded: none has a gold ({', '.join(options.gold_fields)}); "
            f"the accuracy is null{_fields_hint(first)}",
            file=sys.stderr,
        )
        return EXIT_NOTHING_SCORED
    if args.fail_under is not None and accuracy < args.fail_under:
        print(f"potrun: accuracy {accuracy:.4f} is below --fail-under {args.fail_under}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def _benchmark_run(args: argparse.Namespace) -> Any:
    """`--benchmark NAME`: the benchmark's rules for the input file, and the sandbox settings its
    official code implies (policy), where the command line does not set them. None without it."""
    if args.benchmark is None:
        return None
    from potrun.benchmarks import get_benchmark

    if args.gold:
        raise UsageError("--gold is not used with --benchmark: the benchmark's records hold their golds")
    module = get_benchmark(args.benchmark)
    for option, value in module.SANDBOX.items():
        flag = "--" + option.replace("_", "-")
        if not any(word == flag or word.startswith(flag + "=") for word in args.words):
            setattr(args, option, value)
    return module.for_file(args.preds, strict=args.strict)


def _check_outputs(args: argparse.Namespace, inputs: Sequence[str]) -> None:
    """Every output path of `check` writable before the run starts (else exit 2, naming it)."""
    from potrun.check.output import STDOUT, check_output_path

    if args.preds == "-" and args.gold == "-":
        raise UsageError("PREDS and --gold cannot both be - (standard input)")
    if args.out == STDOUT and args.summary_json == STDOUT:
        raise UsageError("--out and --summary-json cannot both be - (standard output)")
    if args.out and args.out == args.summary_json:
        raise UsageError(f"--out and --summary-json are the same file, {args.out}")
    for option, path in (("--out", args.out), ("--summary-json", args.summary_json)):
        if path:
            check_output_path(option, path, inputs)


def _warn_nothing_scored(summary: Any, options: Any, first: dict[str, Any] | None, golds: Any) -> None:
    """Say loudly why a run scored no record: what was looked for, and what the first record has."""
    if summary.total == 0:
        print("potrun: warning: the input has no records: nothing was scored", file=sys.stderr)
        return
    no_gold = f" + {summary.no_gold} with no gold in --gold" if golds is not None else ""
    print(
        f"potrun: warning: no record was scored: {summary.total} records = {summary.skipped} skipped "
        f"(no program field: {', '.join(options.code_fields)}) + {summary.bad_record} bad{no_gold}",
        file=sys.stderr,
    )
    if summary.no_gold and golds and first is not None:
        from potrun.check.records import first_field

        found = first_field(first, options.id_fields)
        print(
            f"potrun: ids are looked for in {', '.join(options.id_fields)}: the first record's id is "
            f"{_shown_json(found[1] if found else None)}; the gold file's first id is {_shown_json(next(iter(golds)))}",
            file=sys.stderr,
        )
    print(f"potrun:{_fields_hint(first) or ' no line was a JSON object'}", file=sys.stderr)


def _fields_hint(first: dict[str, Any] | None) -> str:
    """'the first record's fields: ...', and a likely output's path, to point at nested fields."""
    from potrun.check.records import likely_output_path

    if first is None:
        return ""
    names = [_shown(name) for name in list(first)[:20]] + (["..."] if len(first) > 20 else [])
    hint = f" the first record's fields: {', '.join(names) or '(none)'}"
    path = likely_output_path(first)
    if path is not None and path not in first:
        hint += f"; is the model output at {_shown(path)}? (nested fields take paths: --code-field {path})"
    return hint


def _shown_json(value: Any) -> str:
    """A value as JSON (so that "1" and 1 differ), cut short."""
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _shown(value: Any) -> str:
    """Input data as a person reads it: JSON, cut short (never a terminal escape)."""
    text = json.dumps(value, ensure_ascii=True) if not isinstance(value, str) else json.dumps(value)[1:-1]
    text = json.dumps(text)[1:-1] if any(ch < " " for ch in text) else text
    return text if len(text) <= 60 else text[:57] + "..."


def add_command(commands: Any) -> None:
    """`potrun check`'s arguments."""
    check = commands.add_parser("check", help="extract, execute and score a file of model outputs")
    _add_input_arguments(check)
    _add_scoring_arguments(check)
    _add_run_arguments(check)
    add_sandbox_options(check)
    check.set_defaults(handler=cmd_check)


def _add_input_arguments(check: argparse.ArgumentParser) -> None:
    """What to read: the records, their fields, the golds, a benchmark's files."""
    from potrun.benchmarks import BENCHMARKS
    from potrun.check.records import CODE_FIELDS, GOLD_FIELDS, ID_FIELDS

    check.add_argument(
        "preds", help="JSON Lines or a JSON array (either may be .gz or .zst), or .parquet; - for standard input"
    )
    check.add_argument(
        "--code-field",
        help="field(s) with the model output, comma-separated; a field may be a "
        f"path (resps.0.0) (default: {','.join(CODE_FIELDS)})",
    )
    check.add_argument(
        "--gold-field", help=f"field(s) or path(s) with the gold answer (default: {','.join(GOLD_FIELDS)})"
    )
    check.add_argument("--id-field", help=f"field(s) or path(s) with the record id (default: {','.join(ID_FIELDS)})")
    check.add_argument("--gold", help="a separate file of golds, joined on the id field")
    check.add_argument(
        "--checklist-field",
        default="checklist",
        help="field with intermediate values the reasoning must contain (default: checklist)",
    )
    check.add_argument(
        "--checker-field",
        default="checker",
        help="field with a gold checker program, def check(answer) -> bool (default: checker)",
    )
    check.add_argument(
        "--benchmark",
        default=None,
        choices=sorted(BENCHMARKS),
        help="read the benchmark's own files and apply its official rules and metrics (no other option needed); "
        "with --strict, potrun's rules where they read the model more rightly (README: Benchmarks)",
    )


def _add_scoring_arguments(check: argparse.ArgumentParser) -> None:
    """How to judge: the mode, the comparators, pass@k."""
    from potrun.check.pipeline import MODES

    check.add_argument("--mode", default=MODES[0], choices=MODES)
    check.add_argument("--compare", default="default", help="comparator preset(s), comma-separated")
    check.add_argument("--abs", action="store_true", help="compare absolute values (PoT's SVAMP runner)")
    check.add_argument("--percent", action="store_true", help="accept 0.25 for 25 (and 25 for 0.25)")
    check.add_argument("--scale", action="store_true", help="apply scale words (3.5 million = 3500000)")
    check.add_argument("--rel-tol", type=float, default=None, help="relative tolerance of the comparator")
    check.add_argument("--k", default=None, help="k values for pass@k, comma-separated (several samples)")


def _add_run_arguments(check: argparse.ArgumentParser) -> None:
    """Where results go, and how the run goes: output, resume, cache, engine."""
    from potrun.check.engines import ENGINES

    check.add_argument("--out", help="write one JSON line per record here (- for standard output)")
    check.add_argument("--summary-json", help="write the summary here (- for standard output)")
    check.add_argument(
        "--max-record-mb",
        type=positive_int,
        default=16,
        help="a line (or array element) longer than this is a bad_record, not read (default 16)",
    )
    check.add_argument(
        "--fail-under",
        type=float,
        default=None,
        help="exit 1 when the accuracy (pass@1 over all samples) is below this",
    )
    check.add_argument(
        "--by",
        default=None,
        metavar="FIELD[,FIELD]",
        help="break the accuracy down by these fields' values (field paths: source, doc.task)",
    )
    check.add_argument(
        "--strict",
        action="store_true",
        help="stop at the first bad record (exit 2); with --benchmark: potrun's rules, not the official quirks",
    )
    check.add_argument("--quiet", action="store_true", help="no progress bar and no table")
    check.add_argument(
        "--resume",
        action="store_true",
        help="continue the run whose results are in --out: records already there are not run again",
    )
    check.add_argument(
        "--no-cache",
        action="store_true",
        help="run every program, even one identical to a program already run in this run",
    )
    check.add_argument(
        "--engine",
        default=ENGINES[0],
        choices=ENGINES,
        help="local: one sandbox pool here; ray: shards on a Ray cluster (pip install 'potrun[ray]')",
    )
    check.add_argument(
        "--ray-address",
        default=None,
        help="the Ray cluster to join (ray://HEAD:10001, HEAD:6379 or auto); default: a local instance",
    )
    check.add_argument(
        "--ray-actors",
        type=positive_int,
        default=None,
        help="Ray actors, each with its own sandbox pool of --workers (default: one per node)",
    )
