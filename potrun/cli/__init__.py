"""The `potrun` command (also `python -m potrun`). It calls the public API only: the names in
`potrun.__all__` and in the `__all__` of the modules it imports.

Exit codes (README, "Exit codes"): a command's result is 0 (done) or 1 (`check`: below --fail-under
or no record scored or graded; `validate`: a gold has errors; `run`: the program's status is not ok; `image
exists`: the image is absent; `image build`: the build failed); `run` also 3 for sandbox_error. An
error is its class's code in ERROR_EXITS: 2 bad usage, unreadable input or an unwritable output; 3 no
sandbox can run here (no Docker engine, no image, a worker that does not start); 130 interrupted."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from potrun.types import (
    DEFAULT_MEMORY_MB,
    DEFAULT_TIMEOUT_S,
    ERROR_EXITS,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_SANDBOX_ERROR,
    EXIT_USAGE,
    WALL_FLOOR_S,
    WALL_MULTIPLE,
    Entry,
    InputError,
    Isolation,
    PotrunError,
    SandboxUnavailable,
    Status,
    UsageError,
    error_code,
)

EXIT_NOTHING_SCORED = EXIT_FAILED  # check: no record was scored or none graded (all skipped, bad or without a gold)
EXIT_INTERRUPTED = 130


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    parser = _parser()
    args = parser.parse_args(words)
    if not getattr(args, "handler", None):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    args.words = words  # what the run was started with: `check` prints it back to resume an interrupted run
    previous = _interrupt_on_sigterm()
    try:
        return int(args.handler(args))
    except PotrunError as exc:
        print(f"potrun: error: {exc}", file=sys.stderr)
        return error_exit(exc)
    except KeyboardInterrupt:
        print("potrun: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _interrupt_on_sigterm() -> Any:
    """SIGTERM (what job schedulers send to preempt) takes Ctrl-C's path in every command: results
    flushed, the resume command printed, workers, cgroups, scratch and containers removed, exit 130.
    Returns the handler it replaced (None off the main thread, where no handler can be set)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, _terminated)


def _terminated(signum: int, frame: Any) -> None:
    # A second SIGTERM must not cut the clean-up short that the first one started.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise KeyboardInterrupt


def error_exit(error: PotrunError) -> int:
    """The exit code of `error` (potrun.types.ERROR_EXITS, beside the service's HTTP statuses)."""
    return error_code(error, ERROR_EXITS)


# -- commands ------------------------------------------------------------------------------------------


def cmd_check(args: argparse.Namespace) -> int:
    from potrun.check.engines import LocalEngine, make_engine
    from potrun.check.output import (
        InputDigests,
        OutputWriter,
        resume_command,
        resume_output,
        run_fingerprint,
        write_text_output,
    )
    from potrun.check.pipeline import CheckOptions, load_golds
    from potrun.check.records import CODE_FIELDS, GOLD_FIELDS, ID_FIELDS, FirstRecord, count_records, read_records
    from potrun.check.runrecord import run_record
    from potrun.reports.table import Progress, Summary, render

    benchmark = _benchmark_run(args)
    if benchmark is not None and args.by:
        raise UsageError("--by is not for --benchmark: a benchmark breaks its results down by its own fields")
    options = (
        CheckOptions(benchmark=benchmark, presets=(args.benchmark,))
        if benchmark
        else CheckOptions(
            code_fields=_fields(args.code_field, CODE_FIELDS),
            gold_fields=_fields(args.gold_field, GOLD_FIELDS),
            id_fields=_fields(args.id_field, ID_FIELDS),
            mode=args.mode,
            presets=tuple(p.strip() for p in args.compare.split(",") if p.strip()),
            compare_options=_compare_options(args),
            ks=tuple(int(k) for k in args.k.split(",")) if args.k else (1,),
            strict=args.strict,
            checklist_field=args.checklist_field or None,
            checker_field=args.checker_field or None,
            by_fields=_fields(args.by, ()),
        )
    )
    if benchmark is None:
        _check_presets(options.presets)
    if args.resume and not args.out:
        raise UsageError("--resume needs --out: the output file of the run to continue")
    _check_outputs(args, inputs=[args.preds] + ([args.gold] if args.gold else []))
    golds = load_golds(args.gold, options.id_fields, options.gold_fields) if args.gold else None
    # Opened now: an unreadable input or a missing extra stops the run before the engine starts.
    first = FirstRecord(read_records(args.preds, max_line_bytes=args.max_record_mb << 20))
    records: Iterator[Any] = first
    engine = make_engine(
        args.engine,
        _sandbox_config(args),
        cache=not args.no_cache,
        ray_address=args.ray_address,
        ray_actors=args.ray_actors,
    )
    summary = Summary(options.presets, settings=_settings(args, engine.config))
    done = 0
    results: list[Any] = []  # kept for a benchmark's metrics, which need them all

    def add(result: Any) -> None:
        summary.add(result)
        if benchmark is not None:
            results.append(result)

    digests = InputDigests(run_fingerprint(options, engine.config), options.id_fields, golds)
    if args.resume:  # the results already in --out count, and their records are not run again
        records, done = resume_output(
            args.out, records, id_fields=options.id_fields, presets=options.presets, add=add, digests=digests
        )
    total = count_records(args.preds)  # None for a stream: it is counted as it comes
    out = OutputWriter(args.out, append=args.resume, digests=digests) if args.out else None
    if out is not None:
        records = digests.track(records)
    try:
        # Programs finished, in any order, beside records written in input order (a local pool only: Ray's
        # run on the actors).
        programs = (lambda: engine.sandbox.completed) if isinstance(engine, LocalEngine) else None
        with (
            engine,
            Progress(None if total is None else total - done, enabled=not args.quiet, programs=programs) as progress,
        ):
            summary.started = time.perf_counter()  # the engine is ready: its start-up is not throughput
            for result in engine.results(records, options, golds):
                add(result)
                progress.advance()
                if out is not None:
                    out.write(result)
            summary.finish()  # nor is its shutdown (a local Ray instance takes a second or two)
    except KeyboardInterrupt:  # the engine is closed (workers gone); every line in --out is whole
        if out is None:
            print("potrun: interrupted (without --out there is nothing to resume)", file=sys.stderr)
        else:
            out.close()
            print(
                f"potrun: interrupted; {done + out.written} records are in {args.out}. Resume with:\n"
                f"  {resume_command(args.words)}",
                file=sys.stderr,
            )
        return EXIT_INTERRUPTED
    except SandboxUnavailable:  # a worker that would not start again: what was written can be resumed
        if out is not None:
            out.close()
            print(
                f"potrun: {done + out.written} records are in {args.out}; resume with:\n  {resume_command(args.words)}",
                file=sys.stderr,
            )
        raise
    finally:
        if out is not None:
            out.close()
    summary.settings.update(engine.settings, cache_hits=engine.cache_hits)
    if benchmark is not None:
        summary.settings["benchmark"] = benchmark.name
        summary.metrics = benchmark.metrics(results)
    summary.run = run_record(
        inputs={"preds": args.preds, **({"gold": args.gold} if args.gold else {})},
        check_options=options,
        sandbox_config=engine.config,
        command=args.words,
    )
    if not args.quiet:
        render(summary)
    if args.summary_json:
        write_text_output("--summary-json", args.summary_json, json.dumps(summary.to_json(), indent=2) + "\n")
    if summary.scored == 0:
        _warn_nothing_scored(summary, options, first.data, golds)
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
            f"the accuracy is null{_fields_hint(first.data)}",
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


def cmd_run(args: argparse.Namespace) -> int:
    try:
        source = Path(args.program).read_text(encoding="utf-8") if args.program != "-" else sys.stdin.read()
    except OSError as exc:
        raise UsageError(f"cannot read {args.program}: {exc.strerror}") from None
    with _sandbox(args, workers=1) as sandbox:
        result = sandbox.run(source)
    print(json.dumps(result.to_json()))
    return run_exit_code(result.status)


def run_exit_code(status: Status) -> int:
    """`potrun run`'s exit code: 0 only for ok; 3 when potrun failed (sandbox_error), not the program;
    1 for every other status (the program failed, timed out, was refused, gave no answer...)."""
    if status is Status.OK:
        return EXIT_OK
    return EXIT_SANDBOX_ERROR if status is Status.SANDBOX_ERROR else EXIT_FAILED


def cmd_doctor(args: argparse.Namespace) -> int:
    from potrun.tools.doctor import diagnose

    if args.cleanup or args.all:
        return cmd_doctor_cleanup(args)
    for line in diagnose(backend=args.backend):
        print(line)
    return EXIT_OK


def cmd_doctor_cleanup(args: argparse.Namespace) -> int:
    """`potrun doctor --cleanup [--all]`: remove sandbox containers left by a potrun that died."""
    from potrun.tools.doctor import cleanup

    for line in cleanup(all_sessions=args.all):
        print(line)
    return EXIT_OK


def cmd_image_build(args: argparse.Namespace) -> int:
    """`potrun image build [--base B] [--tag T]`: build the sandbox image for the docker backend."""
    from potrun.tools.image import RUNTIME_PACKAGES, build_image

    packages = RUNTIME_PACKAGES + tuple(args.extra)
    print(build_image(args.base, args.tag, python_version=args.python_version, packages=packages, context=args.context))
    return EXIT_OK


def cmd_image_context(args: argparse.Namespace) -> int:
    """`potrun image context DEST`: only write the build context (the Dockerfile and the wheels)."""
    from potrun.tools.image import RUNTIME_PACKAGES, platform_tags, prepare_context

    try:
        platform_tags(glibc=args.glibc)
    except ValueError as exc:  # the one rule on which glibc manylinux wheels serve
        raise UsageError(f"--glibc {args.glibc}: {exc}") from None
    packages = RUNTIME_PACKAGES + tuple(args.extra)
    destination = prepare_context(
        args.dest, python_version=args.python_version, glibc=args.glibc, platform=args.platform, packages=packages
    )
    print(destination)
    return EXIT_OK


def cmd_image_exists(args: argparse.Namespace) -> int:
    """`potrun image exists [TAG]`: 0 when the image is present, 1 when it is not."""
    from potrun.tools.image import image_exists

    return EXIT_OK if image_exists(args.tag) else EXIT_FAILED


def _add_image_commands(commands: Any) -> None:
    from potrun.sandbox.parent.docker import DEFAULT_IMAGE
    from potrun.tools.image import DEFAULT_BASE, DEFAULT_GLIBC, DEFAULT_PYTHON

    image = commands.add_parser("image", help="build the sandbox image of the docker backend")
    image_commands = image.add_subparsers(title="image commands")
    build = image_commands.add_parser("build", help="build the sandbox image (docker build, no network needed)")
    build.add_argument(
        "--base",
        default=None,
        help=f"base image with python3 (default: {DEFAULT_BASE}; potrun-base:bookworm where no registry is reachable)",
    )
    build.add_argument("--tag", default=DEFAULT_IMAGE, help=f"image tag (default: {DEFAULT_IMAGE})")
    build.add_argument(
        "--python",
        dest="python_version",
        default=None,
        help="the base image's Python X.Y (default: probed from the base)",
    )
    _add_package_option(build)
    build.add_argument(
        "--context", type=Path, default=None, help="keep the build context in this directory instead of a temporary one"
    )
    build.set_defaults(handler=cmd_image_build)
    context = image_commands.add_parser("context", help="only write the build context (Dockerfile + wheels)")
    context.add_argument("dest", type=Path)
    context.add_argument("--python", dest="python_version", default=DEFAULT_PYTHON)
    context.add_argument("--glibc", default=DEFAULT_GLIBC)
    context.add_argument("--platform", default=None)
    _add_package_option(context)
    context.set_defaults(handler=cmd_image_context)
    exists = image_commands.add_parser("exists", help="exit 0 when the image exists, 1 when it does not")
    exists.add_argument("tag", nargs="?", default=DEFAULT_IMAGE)
    exists.set_defaults(handler=cmd_image_exists)


def _add_package_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--with",
        dest="extra",
        action="append",
        default=[],
        metavar="PACKAGE",
        help="another package to install into the image (e.g. sympy); repeatable",
    )


def cmd_diff(args: argparse.Namespace) -> int:
    """`potrun diff A.jsonl B.jsonl [--json]`: the records whose verdict changed, and McNemar's test."""
    from potrun.reports.diff import diff_runs, render_diff

    diff = diff_runs(args.a, args.b)
    if args.json:
        print(json.dumps(diff.to_json(), indent=2))
    else:
        render_diff(diff, show=args.show)
    return EXIT_OK


def _add_diff_command(commands: Any) -> None:
    diff = commands.add_parser(
        "diff",
        help="compare two runs' --out files: the verdicts that changed, and whether the difference is significant",
    )
    diff.add_argument("a", help="the --out file of run A")
    diff.add_argument("b", help="the --out file of run B (same records)")
    diff.add_argument("--json", action="store_true", help="print the comparison as JSON, every change included")
    diff.add_argument("--show", type=_positive_int, default=20, help="changes listed each way (default 20)")
    diff.set_defaults(handler=cmd_diff)


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


def _add_report_command(commands: Any) -> None:
    report = commands.add_parser("report", help="a report to look at (HTML with charts, or markdown) of a run")
    report.add_argument("results", help="the run's --out file")
    report.add_argument("--summary", default=None, help="the run's --summary-json (its run record and intervals)")
    formats = report.add_mutually_exclusive_group(required=True)
    formats.add_argument("--html", help="write one self-contained HTML file here (charts inline, nothing fetched)")
    formats.add_argument("--markdown", help="write the same tables as markdown here (no charts)")
    report.set_defaults(handler=cmd_report)


def cmd_bench(args: argparse.Namespace) -> int:
    from potrun.check.records import CODE_FIELDS
    from potrun.tools.bench import run_bench

    report = run_bench(
        args.corpus,
        sandbox_factory=lambda: _sandbox(args),
        limit=args.limit,
        code_fields=_fields(args.code_field, CODE_FIELDS),
    )
    print(json.dumps(report, indent=2))
    return EXIT_OK


def cmd_validate(args: argparse.Namespace) -> int:
    from potrun.check.output import STDOUT, OutputWriter, check_output_path
    from potrun.check.records import ANSWER_FIELDS, ID_FIELDS, PROGRAM_FIELDS, count_records, is_stream
    from potrun.reports.table import Progress
    from potrun.validation import ValidationSummary, render_summary, validate, write_fixed_copy

    _check_presets([args.compare])
    if args.fix_answers and is_stream(args.gold):
        raise UsageError("--fix-answers reads GOLDS a second time: give a file, not a stream")
    for option, path in (("--out", args.out), ("--fix-answers", args.fix_answers)):
        if path:
            check_output_path(option, path, inputs=[args.gold])
    answer_fields = _fields(args.answer_field, ANSWER_FIELDS)
    reports = validate(
        args.gold,
        program_field=_fields(args.program_field, PROGRAM_FIELDS),
        answer_field=answer_fields,
        id_field=_fields(args.id_field, ID_FIELDS),
        compare=args.compare,
        compare_options=_compare_options(args),
        slow_fraction=args.slow_fraction,
        ignore=_fields(args.ignore, ()),
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
    summary.finish()
    if not args.quiet:
        render_summary(summary)
    if args.fix_answers:
        fixes = {ordinal: value for ordinal, _, _, _, value in summary.fixable}
        write_fixed_copy(args.gold, args.fix_answers, fixes, answer_fields)
        print(
            f"potrun: {len(fixes)} recorded answer(s) replaced by the executed value in {args.fix_answers}",
            file=sys.stderr,
        )
        for _, line, record_id, answer, value in summary.fixable:
            print(f"  line {line} (id {record_id}): {json.dumps(answer)} -> {json.dumps(value)}", file=sys.stderr)
    if summary.with_errors or (args.strict and summary.with_warnings_only):
        return EXIT_FAILED
    return EXIT_OK


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


# -- shared option groups ---------------------------------------------------------------------------------


def _sandbox(args: argparse.Namespace, workers: int | None = None) -> Any:
    from potrun import Sandbox

    return Sandbox.from_config(_sandbox_config(args, workers))


def _sandbox_config(args: argparse.Namespace, workers: int | None = None) -> Any:
    """The SandboxConfig of the sandbox options (plain data: Ray ships it to its nodes)."""
    from potrun import SandboxConfig

    return SandboxConfig(
        args.backend,
        policy=args.policy,
        workers=workers or args.workers,
        timeout=args.timeout,
        wall_timeout=args.wall_timeout,
        memory_mb=args.memory,
        isolation=args.isolation,
        entry=args.entry,
        image=args.image,
    )


def _settings(args: argparse.Namespace, config: Any) -> dict[str, Any]:
    return {
        "policy": config.policy,
        "backend": config.backend,
        "isolation": str(config.tier),
        "workers": config.worker_count,
        "timeout_s": args.timeout,
        "wall_timeout_s": config.limits.wall_limit_s,
        "mode": args.mode,
    }


def _compare_options(args: argparse.Namespace) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if args.abs:
        options["abs_value"] = True
    if args.percent:
        options["percent"] = True
    if args.scale:
        options["scale"] = True
    if args.rel_tol is not None:
        options["rel_tol"] = args.rel_tol
    return options


def _check_presets(presets: Sequence[str]) -> None:
    from potrun import PRESETS

    unknown = [p for p in presets if p not in PRESETS]
    if unknown:
        raise UsageError(f"unknown comparator preset {', '.join(unknown)}; known: {', '.join(PRESETS)}")


def _fields(value: str | None, default: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(f.strip() for f in value.split(",") if f.strip()) if value else default


def _add_sandbox_options(parser: argparse.ArgumentParser) -> None:
    from potrun.policies import POLICY_NAMES

    group = parser.add_argument_group("sandbox")
    group.add_argument("--backend", default="process", choices=_backends())
    group.add_argument("--image", default=None, help="sandbox image for --backend docker")
    group.add_argument("--policy", default="restricted", choices=POLICY_NAMES)
    group.add_argument(
        "--isolation",
        default=None,
        choices=[str(isolation) for isolation in Isolation],
        help="warm (default for restricted) or fork (always for trusted)",
    )
    group.add_argument(
        "--workers",
        type=_positive_int,
        default=None,
        help="default: the machine's cores (twice that with --isolation fork)",
    )
    group.add_argument(
        "--timeout",
        type=_positive_float,
        default=DEFAULT_TIMEOUT_S,
        help=f"CPU seconds per program (default {DEFAULT_TIMEOUT_S:g}): they decide a timeout (waiting for a core "
        "does not count)",
    )
    group.add_argument(
        "--wall-timeout",
        type=_positive_float,
        default=None,
        help=f"wall-clock seconds per program, a safety net (default: {WALL_MULTIPLE:g}x --timeout, "
        f"at least {WALL_FLOOR_S:g})",
    )
    group.add_argument(
        "--memory", type=_positive_int, default=DEFAULT_MEMORY_MB, help="MB of address space per program"
    )
    group.add_argument("--entry", default=str(Entry.AUTO), choices=[str(entry) for entry in Entry])


def _backends() -> list[str]:
    """The backends' names, from their registry."""
    from potrun.sandbox.config import BACKENDS

    return list(BACKENDS)


def _parser() -> argparse.ArgumentParser:
    import potrun
    from potrun.benchmarks import BENCHMARKS
    from potrun.check.engines import ENGINES
    from potrun.check.pipeline import MODES
    from potrun.check.records import ANSWER_FIELDS, CODE_FIELDS, GOLD_FIELDS, ID_FIELDS, PROGRAM_FIELDS

    parser = argparse.ArgumentParser(prog="potrun", description="Sandboxed program-of-thought execution.")
    parser.add_argument("--version", action="version", version=f"potrun {potrun.__version__}")
    commands = parser.add_subparsers(title="commands")

    check = commands.add_parser("check", help="extract, execute and score a file of model outputs")
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
    check.add_argument("--mode", default=MODES[0], choices=MODES)
    check.add_argument("--compare", default="default", help="comparator preset(s), comma-separated")
    check.add_argument("--abs", action="store_true", help="compare absolute values (PoT's SVAMP runner)")
    check.add_argument("--percent", action="store_true", help="accept 0.25 for 25 (and 25 for 0.25)")
    check.add_argument("--scale", action="store_true", help="apply scale words (3.5 million = 3500000)")
    check.add_argument("--rel-tol", type=float, default=None, help="relative tolerance of the comparator")
    check.add_argument("--k", default=None, help="k values for pass@k, comma-separated (several samples)")
    check.add_argument("--out", help="write one JSON line per record here (- for standard output)")
    check.add_argument("--summary-json", help="write the summary here (- for standard output)")
    check.add_argument(
        "--max-record-mb",
        type=_positive_int,
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
        type=_positive_int,
        default=None,
        help="Ray actors, each with its own sandbox pool of --workers (default: one per node)",
    )
    _add_sandbox_options(check)
    check.set_defaults(handler=cmd_check)

    run = commands.add_parser(
        "run",
        help="run one program file and print its result as JSON (exit 0 only "
        "for status ok, 1 for any other, 3 for sandbox_error or no sandbox here)",
    )
    run.add_argument("program", help="a Python file, or - for standard input")
    _add_sandbox_options(run)
    run.set_defaults(handler=cmd_run)

    doctor = commands.add_parser("doctor", help="say which isolation mechanisms work on this machine")
    doctor.add_argument("--backend", default="process", choices=_backends())
    doctor.add_argument(
        "--cleanup",
        action="store_true",
        help="remove sandbox containers left by a potrun that died (label potrun.sandbox=1)",
    )
    doctor.add_argument(
        "--all", action="store_true", help="with --cleanup: also remove containers of potrun processes still running"
    )
    doctor.set_defaults(handler=cmd_doctor)
    _add_image_commands(commands)
    _add_diff_command(commands)
    _add_report_command(commands)
    _add_serve_command(commands)

    bench = commands.add_parser("bench", help="throughput of potrun beside in-process exec on a corpus")
    bench.add_argument("corpus", help="JSON Lines of records with programs (as for check)")
    bench.add_argument("--code-field", default=None)
    bench.add_argument("--limit", type=_positive_int, default=None, help="use at most this many programs")
    _add_sandbox_options(bench)
    bench.set_defaults(handler=cmd_bench)

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
        type=_positive_float,
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
    _add_sandbox_options(valid)
    valid.set_defaults(handler=cmd_validate, policy="trusted")
    return parser


def cmd_serve(args: argparse.Namespace) -> int:
    import os
    import signal

    try:
        from potrun.service import ServiceConfig, serve
    except ImportError as exc:
        raise InputError(f"potrun serve needs the serve extra: pip install 'potrun[serve]' ({exc})") from None
    from potrun import SandboxConfig

    sandbox = SandboxConfig(
        args.backend,
        policy=args.policy,
        workers=args.sandbox_workers,
        timeout=args.timeout,
        memory_mb=args.memory,
        isolation=args.isolation,
        image=args.image,
    )
    token = args.token or os.environ.get("POTRUN_TOKEN") or None
    config = ServiceConfig(
        sandbox,
        token=token,
        queue_limit=args.queue_limit,
        max_body_bytes=args.max_body_mb << 20,
        max_timeout_s=args.max_timeout,
        max_memory_mb=args.max_memory,
    )
    # uvicorn finishes every accepted request on SIGTERM, then raises the signal again: as an interrupt
    # (which uvicorn.run takes as the end), so that a graceful stop exits 0, not by death from the signal.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    serve(config, host=args.host, port=args.port, processes=args.workers, shutdown_timeout=args.shutdown_timeout)
    return EXIT_OK


def _add_serve_command(commands: Any) -> None:
    from potrun.policies import POLICY_NAMES

    serve = commands.add_parser(
        "serve",
        help="serve the sandbox over HTTP: SandboxFusion's /run_code, /v1/run, /v1/score, OpenRLHF's reward "
        "(pip install 'potrun[serve]')",
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (beyond loopback only with a --token)")
    serve.add_argument("--port", type=int, default=8080)
    serve.add_argument(
        "--workers", type=_positive_int, default=1, help="service processes sharing the port, each with its own pool"
    )
    serve.add_argument(
        "--token", default=None, help="bearer token every request but /health must carry (default: $POTRUN_TOKEN)"
    )
    serve.add_argument(
        "--queue-limit", type=_positive_int, default=4096, help="programs in flight per process; past it: 429"
    )
    serve.add_argument("--max-body-mb", type=_positive_int, default=32, help="largest request body (413 past it)")
    serve.add_argument("--backend", default="process", choices=_backends())
    serve.add_argument("--image", default=None, help="sandbox image for --backend docker")
    serve.add_argument(
        "--policy",
        default="trusted",
        choices=POLICY_NAMES,
        help="trusted (default: SandboxFusion's /run_code runs any Python, stdin and files) or restricted (the"
        " default of potrun check and potrun.rewards: use it to score model output as they do)",
    )
    serve.add_argument("--isolation", default=None, choices=[str(isolation) for isolation in Isolation])
    serve.add_argument(
        "--sandbox-workers", type=_positive_int, default=None, help="sandbox workers per process (default: cores)"
    )
    serve.add_argument(
        "--timeout", type=_positive_float, default=DEFAULT_TIMEOUT_S, help="default CPU seconds per program"
    )
    serve.add_argument("--memory", type=_positive_int, default=DEFAULT_MEMORY_MB, help="default MB per program")
    serve.add_argument(
        "--max-timeout",
        type=_positive_float,
        default=None,
        help="ceiling of a request's own CPU seconds (run_timeout, timeout): capped to it (default: --timeout)",
    )
    serve.add_argument(
        "--max-memory",
        type=_positive_int,
        default=None,
        help="ceiling of a request's own MB (memory_limit_MB, memory_mb): capped to it (default: --memory)",
    )
    serve.add_argument(
        "--shutdown-timeout",
        type=_positive_float,
        default=30.0,
        help="on SIGTERM, seconds to finish accepted requests; then the programs still running are killed",
    )
    serve.set_defaults(handler=cmd_serve)


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be a positive integer")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be positive")
    return value
