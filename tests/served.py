"""`potrun serve` started for real on a free port of 127.0.0.1, for every test that calls the service
(tests/service and the attacks on it in tests/security): one way to start it and to stop it.

Importable from every test file as `from served import ...` (tests/ is on sys.path: see paths.py).
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass

import httpx

STOPPED = 0  # the exit code of a graceful stop
START_S = 90  # how long `potrun serve` may take to answer /health (its pool imports numpy, on a loaded machine)


@dataclass
class Service:
    process: subprocess.Popen[str]
    url: str

    def client(self, token: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60)

    def stop(self) -> int:
        """SIGTERM, and the exit code: 0 once every accepted request finished (a graceful stop)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(60)

    def stop_reading_stderr(self) -> str:
        """SIGTERM, and what the service wrote to stderr (started with `capture_stderr=True`)."""
        assert self.process.stderr is not None, "start_service(..., capture_stderr=True) keeps stderr"
        self.process.terminate()
        _, err = self.process.communicate(timeout=60)
        return err


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_service(*options: str, capture_stderr: bool = False) -> Service:
    """`potrun serve` on a free loopback port with the tests' small limits (2 sandbox workers, 2 s,
    512 MB; `options` come last, so they override these), once /health answers. With `capture_stderr`
    its stderr is kept for `Service.stop_reading_stderr` (and shown if it exits before answering)."""
    port = free_port()
    command = [sys.executable, "-m", "potrun", "serve", "--port", str(port), "--sandbox-workers", "2"]
    command += ["--timeout", "2", "--memory", "512", *options]
    process = subprocess.Popen(command, stderr=subprocess.PIPE if capture_stderr else None, text=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            err = process.stderr.read() if process.stderr is not None else "(stderr not captured)"
            raise AssertionError(f"potrun serve exited with {process.returncode}: {err}")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return Service(process, url)
        except httpx.TransportError:
            time.sleep(0.1)
    process.kill()
    raise AssertionError(f"potrun serve did not answer /health in {START_S} s")
