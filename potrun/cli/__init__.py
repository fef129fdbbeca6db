"""The `potrun` command (also `python -m potrun`). It calls the public API only: the names in
`potrun.__all__` and in the `__all__` of the modules it imports.

Exit codes (README, "Exit codes"): a command's result is 0 (done) or 1 (`check`: below --fail-under
or no record scored or graded; `validate`: a gold has errors; `run`: the program's status is not ok; `image
exists`: the image is absent; `image build`: the build failed); `run` also 3 for sandbox_error. An
error is its class's code in ERROR_EXITS: 2 bad usage, unreadable input or an unwritable output; 3 no
sandbox can run here (no Docker engine, no image, a worker that does not start); 130 interrupted."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any

from potrun.cli.bench import cmd_bench
from potrun.cli.check import cmd_check
from potrun.cli.common import _add_sandbox_options, _backends, _positive_float, _positive_int
from potrun.cli.diff import _add_diff_command
from potrun.cli.doctor import cmd_doctor
from potrun.cli.exits import (
    ERROR_EXITS,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_NOTHING_SCORED,
    EXIT_OK,
    EXIT_SANDBOX_ERROR,
    EXIT_USAGE,
    error_exit,
    run_exit_code,
)
from potrun.cli.image import _add_image_commands
from potrun.cli.report import _add_report_command
from potrun.cli.run import cmd_run
from potrun.cli.serve import _add_serve_command
from potrun.cli.validate import cmd_validate
from potrun.types import PotrunError


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


__all__ = [
    "ERROR_EXITS",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_NOTHING_SCORED",
    "EXIT_OK",
    "EXIT_SANDBOX_ERROR",
    "EXIT_USAGE",
    "error_exit",
    "main",
    "run_exit_code",
]
