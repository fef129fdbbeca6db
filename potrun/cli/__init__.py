"""The `potrun` command (also `python -m potrun`). It calls the public API only: the names in
`potrun.__all__` and in the `__all__` of the modules it imports.

Each command is a module here: `add_command` adds its arguments, and its handler goes arguments ->
options -> the library's run -> render -> exit code (`check.py`: CheckOptions -> potrun.check.run's
CheckRun -> the table -> the code). `common.py` holds the options several commands share.

Exit codes (docs/usage.md, "Exit codes"): a command's result is 0 (done) or 1 (`check`: below --fail-under
or no record scored or graded; `validate`: a gold has errors; `run`: the program's status is not ok; `image
exists`: the image is absent; `image build`: the build failed); `run` also 3 for sandbox_error. An
error is its class's code in ERROR_EXITS (exits.py): 2 bad usage, unreadable input or an unwritable output; 3 no
sandbox can run here (no Docker engine, no image, a worker that does not start); 130 interrupted."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any

from potrun.cli.bench import add_command as add_bench
from potrun.cli.check import add_command as add_check
from potrun.cli.diff import add_command as add_diff
from potrun.cli.doctor import add_command as add_doctor
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
from potrun.cli.image import add_command as add_image
from potrun.cli.report import add_command as add_report
from potrun.cli.run import add_command as add_run
from potrun.cli.serve import add_command as add_serve
from potrun.cli.validate import add_command as add_validate
from potrun.types import PotrunError, potrun_version


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
    """The command line: each command's module adds its own subcommand (arguments and handler)."""
    parser = argparse.ArgumentParser(prog="potrun", description="Sandboxed program-of-thought execution.")
    parser.add_argument("--version", action="version", version=f"potrun {potrun_version()}")
    commands = parser.add_subparsers(title="commands")
    for add_command in (
        add_check,
        add_run,
        add_doctor,
        add_image,
        add_diff,
        add_report,
        add_serve,
        add_bench,
        add_validate,
    ):
        add_command(commands)
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
