"""The exit codes of the `potrun` command, and the one table from an error's class to its code."""

from __future__ import annotations

from potrun.types import ImageBuildError, InputError, PotrunError, SandboxUnavailable, Status, UsageError

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_SANDBOX_ERROR = 0, 1, 2, 3


EXIT_NOTHING_SCORED = EXIT_FAILED  # check: no record was scored or none graded (all skipped, bad or without a gold)


EXIT_INTERRUPTED = 130


# The exit code of every error a user can see, by class: the one table. An error takes the code of its
# nearest class listed here (BadRecord is an InputError).
ERROR_EXITS: dict[type[PotrunError], int] = {
    UsageError: EXIT_USAGE,
    InputError: EXIT_USAGE,
    SandboxUnavailable: EXIT_SANDBOX_ERROR,  # potrun's machinery, not the input: the same code as sandbox_error
    ImageBuildError: EXIT_FAILED,
    PotrunError: EXIT_USAGE,
}


def error_exit(error: PotrunError) -> int:
    """The exit code of `error` (ERROR_EXITS)."""
    return next(ERROR_EXITS[kind] for kind in type(error).__mro__ if kind in ERROR_EXITS)


def run_exit_code(status: Status) -> int:
    """`potrun run`'s exit code: 0 only for ok; 3 when potrun failed (sandbox_error), not the program;
    1 for every other status (the program failed, timed out, was refused, gave no answer...)."""
    if status is Status.OK:
        return EXIT_OK
    return EXIT_SANDBOX_ERROR if status is Status.SANDBOX_ERROR else EXIT_FAILED
