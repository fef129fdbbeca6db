"""The exit codes of the `potrun` command (the table from an error's class to its code is potrun.types's)."""

from __future__ import annotations

from potrun.types import (
    ERROR_EXITS,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_SANDBOX_ERROR,
    EXIT_USAGE,
    PotrunError,
    Status,
    error_code,
)

EXIT_NOTHING_SCORED = EXIT_FAILED  # check: no record was scored or none graded (all skipped, bad or without a gold)
EXIT_INTERRUPTED = 130


def error_exit(error: PotrunError) -> int:
    """The exit code of `error` (potrun.types.ERROR_EXITS, the one table, beside the service's HTTP statuses)."""
    return error_code(error, ERROR_EXITS)


def run_exit_code(status: Status) -> int:
    """`potrun run`'s exit code: 0 only for ok; 3 when potrun failed (sandbox_error), not the program;
    1 for every other status (the program failed, timed out, was refused, gave no answer...)."""
    if status is Status.OK:
        return EXIT_OK
    return EXIT_SANDBOX_ERROR if status is Status.SANDBOX_ERROR else EXIT_FAILED


__all__ = [
    "ERROR_EXITS",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_NOTHING_SCORED",
    "EXIT_OK",
    "EXIT_SANDBOX_ERROR",
    "EXIT_USAGE",
    "error_exit",
    "run_exit_code",
]
