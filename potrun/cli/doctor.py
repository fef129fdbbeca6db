"""`potrun doctor`: which isolation mechanisms work here; `--cleanup`: containers left behind."""

from __future__ import annotations

import argparse

from potrun.cli.exits import (
    EXIT_OK,
)


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
