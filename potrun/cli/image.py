"""`potrun image build | context | exists`: the sandbox image of the docker backend."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from potrun.cli.exits import EXIT_FAILED, EXIT_OK
from potrun.types import UsageError


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


def add_command(commands: Any) -> None:
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
