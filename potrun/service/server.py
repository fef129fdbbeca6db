"""`serve`: run the service under uvicorn, in one process or in several (`processes`), each with its
own sandbox pool (docs/service.md, "Scale-out": replicas behind a balancer scale it past one machine)."""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import sys
import tempfile

import uvicorn

from potrun.service.app import CONFIG_ENVIRONMENT, ServiceConfig, make_app
from potrun.service.metrics import MULTIPROCESS_ENV
from potrun.types import UsageError


def check_exposure(host: str, token: str | None) -> None:
    """A service bound beyond loopback runs any program it is sent: refuse that without a token."""
    if token or _is_loopback(host):
        return
    raise UsageError(f"--host {host} is reachable from other machines: give a --token (or POTRUN_TOKEN)")


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a name: it may resolve to anything
        return False


SHUTDOWN_TIMEOUT_S = 30.0


def serve(
    config: ServiceConfig,
    host: str = "127.0.0.1",
    port: int = 8080,
    processes: int = 1,
    shutdown_timeout: float = SHUTDOWN_TIMEOUT_S,
) -> None:
    """Serve until SIGINT or SIGTERM, then stop accepting, finish the accepted requests for at most
    `shutdown_timeout` seconds (uvicorn's graceful shutdown), then cancel those left and close the
    sandbox, which kills the programs still running: no client's program holds the stop. `processes`
    > 1: that many uvicorn worker processes share the port, each with its own pool (the config reaches
    them through the environment variable POTRUN_SERVE_CONFIG)."""
    check_exposure(host, config.token)
    options = {"host": host, "port": port, "log_level": "warning", "timeout_graceful_shutdown": shutdown_timeout}
    announce(host, port, processes, config)
    if processes == 1:
        uvicorn.run(make_app(config), **options)  # type: ignore[arg-type]
        return
    os.environ[CONFIG_ENVIRONMENT] = json.dumps(config.to_json())
    own_folder = MULTIPROCESS_ENV not in os.environ  # the user's own folder is the user's to clear
    if own_folder:  # the processes' metrics meet here (potrun.service.metrics), a fresh folder each run
        os.environ[MULTIPROCESS_ENV] = tempfile.mkdtemp(prefix="potrun-metrics-")
    try:
        uvicorn.run("potrun.service.app:app_from_environment", factory=True, workers=processes, **options)  # type: ignore[arg-type]
    finally:
        if own_folder:
            shutil.rmtree(os.environ.pop(MULTIPROCESS_ENV), ignore_errors=True)


def announce(host: str, port: int, processes: int, config: ServiceConfig) -> None:
    """Say where the service listens, on stderr (uvicorn's own messages are silenced)."""
    shown = f"[{host}]" if ":" in host else host
    workers = "" if processes == 1 else f", {processes} processes"
    print(
        f"potrun serve: listening on http://{shown}:{port}{workers} (policy {config.sandbox.policy}, "
        f"{'token required' if config.token else 'no token'}); GET /health, /metrics; Ctrl-C stops",
        file=sys.stderr,
        flush=True,
    )
