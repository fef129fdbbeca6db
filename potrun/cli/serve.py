"""`potrun serve`: the sandbox over HTTP."""

from __future__ import annotations

import argparse
from typing import Any

from potrun.cli.common import backend_names, positive_float, positive_int
from potrun.cli.exits import EXIT_OK
from potrun.types import DEFAULT_MEMORY_MB, DEFAULT_TIMEOUT_S, InputError, Isolation


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


def add_command(commands: Any) -> None:
    from potrun.policies import POLICY_NAMES

    serve = commands.add_parser(
        "serve",
        help="serve the sandbox over HTTP: SandboxFusion's /run_code, /v1/run, /v1/score, OpenRLHF's reward "
        "(pip install 'potrun[serve]')",
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (beyond loopback only with a --token)")
    serve.add_argument("--port", type=int, default=8080)
    serve.add_argument(
        "--workers", type=positive_int, default=1, help="service processes sharing the port, each with its own pool"
    )
    serve.add_argument(
        "--token", default=None, help="bearer token every request but /health must carry (default: $POTRUN_TOKEN)"
    )
    serve.add_argument(
        "--queue-limit", type=positive_int, default=4096, help="programs in flight per process; past it: 429"
    )
    serve.add_argument("--max-body-mb", type=positive_int, default=32, help="largest request body (413 past it)")
    serve.add_argument("--backend", default="process", choices=backend_names())
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
        "--sandbox-workers", type=positive_int, default=None, help="sandbox workers per process (default: cores)"
    )
    serve.add_argument(
        "--timeout", type=positive_float, default=DEFAULT_TIMEOUT_S, help="default CPU seconds per program"
    )
    serve.add_argument("--memory", type=positive_int, default=DEFAULT_MEMORY_MB, help="default MB per program")
    serve.add_argument(
        "--max-timeout",
        type=positive_float,
        default=None,
        help="ceiling of a request's own CPU seconds (run_timeout, timeout): capped to it (default: --timeout)",
    )
    serve.add_argument(
        "--max-memory",
        type=positive_int,
        default=None,
        help="ceiling of a request's own MB (memory_limit_MB, memory_mb): capped to it (default: --memory)",
    )
    serve.add_argument(
        "--shutdown-timeout",
        type=positive_float,
        default=30.0,
        help="on SIGTERM, seconds to finish accepted requests; then the programs still running are killed",
    )
    serve.set_defaults(handler=cmd_serve)
