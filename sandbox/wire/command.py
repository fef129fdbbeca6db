"""The worker's command line: the one place that spells it, for both backends, and reads it back.

    python -s -P -m potrun.sandbox.inside.worker [--uid-base N] [--preload A,B] [--scratch DIR]
        [--scratch-is-private]

`-s -P`, not `-I`: -I implies -E, which would ignore the PYTHONHASHSEED the backends set (their
environment is theirs entirely, so nothing else from PYTHON* can leak in). The process backend runs it
with its own interpreter, the docker backend with the image's `python3` (Dockerfile.sandbox's CMD is
the same line, checked by a test). Not argparse to read it: argparse imports shutil, and with it zlib,
bz2 and lzma, whose memory areas every fork of the worker would copy.
"""

from __future__ import annotations

WORKER_MODULE = "potrun.sandbox.inside.worker"
INTERPRETER_FLAGS = ("-s", "-P")
FLAGS = frozenset({"--scratch-is-private"})
VALUED = frozenset({"--uid-base", "--preload", "--scratch"})


def worker_command(
    python: str,
    *,
    scratch: str | None = None,
    preload: tuple[str, ...] | None = None,
    scratch_is_private: bool = False,
) -> list[str]:
    """The command that starts a worker with the interpreter `python`."""
    command = [python, *INTERPRETER_FLAGS, "-m", WORKER_MODULE]
    if scratch is not None:
        command += ["--scratch", scratch]
    if preload is not None:
        command += ["--preload", ",".join(preload)]
    if scratch_is_private:
        command.append("--scratch-is-private")
    return command


def parse_options(argv: list[str]) -> dict[str, str]:
    """The worker's options, as {name: value} ("" for a flag); an unknown one ends the worker."""
    options, rest = {}, list(argv)
    while rest:
        name = rest.pop(0)
        if name in FLAGS:
            options[name] = ""
        elif name in VALUED and rest:
            options[name] = rest.pop(0)
        else:
            raise SystemExit(f"{WORKER_MODULE}: unexpected argument {name!r}")
    return options
