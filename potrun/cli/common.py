"""What several commands share: the sandbox options, the comparator options, argument types."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from potrun.types import DEFAULT_MEMORY_MB, DEFAULT_TIMEOUT_S, WALL_FLOOR_S, WALL_MULTIPLE, Entry, Isolation, UsageError


def make_sandbox(args: argparse.Namespace, workers: int | None = None) -> Any:
    from potrun import Sandbox

    return Sandbox.from_config(sandbox_config(args, workers))


def sandbox_config(args: argparse.Namespace, workers: int | None = None) -> Any:
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


def compare_options(args: argparse.Namespace) -> dict[str, Any]:
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


def check_presets(presets: Sequence[str]) -> None:
    from potrun import PRESETS

    unknown = [p for p in presets if p not in PRESETS]
    if unknown:
        raise UsageError(f"unknown comparator preset {', '.join(unknown)}; known: {', '.join(PRESETS)}")


def split_fields(value: str | None, default: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(f.strip() for f in value.split(",") if f.strip()) if value else default


def add_sandbox_options(parser: argparse.ArgumentParser) -> None:
    from potrun.policies import POLICY_NAMES

    group = parser.add_argument_group("sandbox")
    group.add_argument("--backend", default="process", choices=backend_names())
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
        type=positive_int,
        default=None,
        help="default: the machine's cores (twice that with --isolation fork)",
    )
    group.add_argument(
        "--timeout",
        type=positive_float,
        default=DEFAULT_TIMEOUT_S,
        help=f"CPU seconds per program (default {DEFAULT_TIMEOUT_S:g}): they decide a timeout (waiting for a core "
        "does not count)",
    )
    group.add_argument(
        "--wall-timeout",
        type=positive_float,
        default=None,
        help=f"wall-clock seconds per program, a safety net (default: {WALL_MULTIPLE:g}x --timeout, "
        f"at least {WALL_FLOOR_S:g})",
    )
    group.add_argument("--memory", type=positive_int, default=DEFAULT_MEMORY_MB, help="MB of address space per program")
    group.add_argument("--entry", default=str(Entry.AUTO), choices=[str(entry) for entry in Entry])


def backend_names() -> list[str]:
    """The backends' names, from their registry."""
    from potrun.sandbox.config import BACKENDS

    return list(BACKENDS)


def positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be a positive integer")
    return value


def positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be positive")
    return value
