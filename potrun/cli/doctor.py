"""`potrun doctor`: which isolation mechanisms work here; `--cleanup`: containers left behind."""

from __future__ import annotations

import argparse
from typing import Any

from potrun.cli.common import backend_names
from potrun.cli.exits import EXIT_OK


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


def add_command(commands: Any) -> None:
    """`potrun doctor`'s arguments."""
    doctor = commands.add_parser("doctor", help="say which isolation mechanisms work on this machine")
    doctor.add_argument("--backend", default="process", choices=backend_names())
    doctor.add_argument(
        "--cleanup",
        action="store_true",
        help="remove sandbox containers left by a potrun that died (label potrun.sandbox=1)",
    )
    doctor.add_argument(
        "--all", action="store_true", help="with --cleanup: also remove containers of potrun processes still running"
    )
    doctor.set_defaults(handler=cmd_doctor)
