"""Issue 37 at the service's edges, on `potrun serve` started for real on 127.0.0.1: an unknown field
of a JSON body is refused, naming it and the closest known one (item 3)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

pytest.importorskip("starlette", reason="the serve extra: pip install 'potrun[serve]'")


@dataclass
class Served:
    process: subprocess.Popen[str]
    url: str


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve(*options: str) -> Served:
    """`potrun serve` on a free loopback port, once /health answers."""
    port = free_port()
    command = [sys.executable, "-m", "potrun", "serve", "--port", str(port), "--timeout", "2", "--memory", "512"]
    process = subprocess.Popen([*command, *options], stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"potrun serve exited with {process.returncode}: {process.stderr.read()}")  # type: ignore[union-attr]
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return Served(process, url)
        except httpx.TransportError:
            time.sleep(0.1)
    process.kill()
    raise AssertionError("potrun serve did not answer /health in 90 s")


def stop(served: Served) -> str:
    """SIGTERM; what it wrote to stderr."""
    served.process.terminate()
    _, err = served.process.communicate(timeout=60)
    return err


@pytest.fixture(scope="module")
def service() -> Iterator[Served]:
    served = serve("--sandbox-workers", "1")
    yield served
    stop(served)


@pytest.mark.parametrize(
    ("path", "body", "named", "suggested"),
    [
        ("/v1/score", {"completions": ["ans = 72"], "golds": ["72"], "shapped": True}, "shapped", "shaped"),
        (
            "/v1/score",
            {"completions": ["ans = 72"], "golds": ["72"], "compare_option": {}},
            "compare_option",
            "compare_options",
        ),
        (
            "/v1/score",
            {"completions": ["ans = 72"], "golds": ["72"], "compare_options": {"rel_toll": 1}},
            "rel_toll",
            "rel_tol",
        ),
        ("/v1/run", {"programs": ["ans = 1"], "entri": "ans"}, "entri", "entry"),
        ("/v1/run", {"programs": [{"code": "ans = 1", "timout": 1}]}, "timout", "timeout"),
        ("/openrlhf/reward", {"query": ["ans = 72"], "labels": ["72"], "prompt": [""]}, "prompt", "prompts"),
    ],
)
def test_an_unknown_body_field_is_a_400_naming_it(
    service: Served, path: str, body: dict[str, object], named: str, suggested: str
) -> None:
    answer = httpx.post(f"{service.url}{path}", json=body, timeout=60)
    assert answer.status_code == 400, answer.text
    assert repr(named) in answer.text and f"did you mean {suggested!r}" in answer.text


def test_run_code_refuses_an_unknown_field_as_pydantic_forbids_one(service: Served) -> None:
    body = {"code": "print(1)", "language": "python", "run_timout": 1}
    answer = httpx.post(f"{service.url}/run_code", json=body, timeout=60)
    assert answer.status_code == 422
    detail = answer.json()["detail"][0]
    assert detail["type"] == "extra_forbidden" and detail["loc"] == ["body", "run_timout"]
    assert "did you mean 'run_timeout'" in detail["msg"]


def test_the_known_fields_still_run(service: Served) -> None:
    body = {"code": "print(1)", "language": "python", "run_timeout": 2, "compile_timeout": 2, "memory_limit_MB": 256}
    body |= {"stdin": "", "files": {}, "fetch_files": []}
    assert httpx.post(f"{service.url}/run_code", json=body, timeout=60).json()["status"] == "Success"
    score = {"completions": ["ans = 72"], "golds": ["72"], "preset": "pot", "compare_options": {"abs_value": True}}
    lines = httpx.post(f"{service.url}/v1/score", json=score, timeout=60).text.splitlines()
    assert len(lines) == 1 and '"reward": 1.0' in lines[0]
