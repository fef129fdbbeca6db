"""A client of `potrun serve` that leaves cancels the programs it sent, queued and running (issue 36,
class 2), on every route that runs programs, with real clients on 127.0.0.1.

The service has two workers and lets a program run for 10 minutes. A client sends programs that sleep
for those 10 minutes, enough to hold both workers, waits until they run, and hangs up. Another client's
programs then run at once (before, they waited the whole 10 minutes), each charged nothing; the
leaver's programs left no result in the dedup cache (asked again, they are not answered at once)."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

pytest.importorskip("starlette", reason="the serve extra: pip install 'potrun[serve]'")

import test_service

SLEEPER = "import time\ntime.sleep(600)\nans = 1"
COMPLETION = f"```python\n{SLEEPER}\n```"
PATIENCE_S = 60.0  # a hang, not a timing: the sleepers would hold the workers for 600 s

BODIES: dict[str, Any] = {
    "/run_code": {"language": "python", "code": SLEEPER, "run_timeout": 600},
    "/v1/run": {"programs": [{"code": SLEEPER, "timeout": 600}, {"code": SLEEPER + "\n", "timeout": 600}]},
    "/v1/score": {"completions": [COMPLETION, COMPLETION + " "], "golds": [1, 1]},
    "/openrlhf/reward": {"query": [COMPLETION, COMPLETION + " "], "prompts": ["", ""], "labels": [1, 1]},
}


@pytest.fixture(scope="module")
def service() -> Iterator[test_service.Service]:
    started = test_service.start_service("--timeout", "600", "--max-timeout", "600")
    yield started
    assert started.stop() == test_service.STOPPED


def _send(url: str, path: str, body: dict[str, Any]) -> socket.socket:
    """A request sent whole on a raw connection, left open (no answer read)."""
    data = json.dumps(body).encode()
    host, port = url.removeprefix("http://").split(":")
    client = socket.create_connection((host, int(port)))
    head = f"POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {len(data)}\r\n\r\n"
    client.sendall(head.encode() + data)
    return client


def _queue_depth(url: str) -> int:
    return int(httpx.get(f"{url}/health", timeout=PATIENCE_S).json()["queue_depth"])


def _wait_for_depth(url: str, depth: int) -> None:
    deadline = time.monotonic() + PATIENCE_S
    while _queue_depth(url) != depth and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _queue_depth(url) == depth


@pytest.mark.parametrize("path", list(BODIES))
def test_a_client_that_leaves_cancels_its_running_programs(service: test_service.Service, path: str) -> None:
    clients = [_send(service.url, path, BODIES[path])]
    if path == "/run_code":  # one program a request: two requests hold both workers
        clients.append(_send(service.url, path, {**BODIES[path], "code": SLEEPER + "\n"}))
    _wait_for_depth(service.url, 2)
    time.sleep(1.0)  # the sleepers run
    for client in clients:
        client.close()
    _wait_for_depth(service.url, 0)
    answer = httpx.post(
        f"{service.url}/v1/run", json={"programs": [f"ans = {k} + 1" for k in range(4)]}, timeout=PATIENCE_S
    )
    assert answer.status_code == 200
    results = {line["index"]: line for line in map(json.loads, answer.text.splitlines())}
    assert [results[k]["value"] for k in range(4)] == [1, 2, 3, 4], results
    assert all(line["status"] == "ok" and line["attempts"] == 1 for line in results.values()), results


@pytest.mark.parametrize("path", ["/v1/score", "/openrlhf/reward"])
def test_a_cancelled_program_leaves_nothing_in_the_cache(service: test_service.Service, path: str) -> None:
    """The same client asks again for what it gave up: a cached result would come back at once; none
    may (nothing of a cancelled program is a result), so the program runs again and the ask times out."""
    client = _send(service.url, path, BODIES[path])
    _wait_for_depth(service.url, 2)
    time.sleep(1.0)
    client.close()
    _wait_for_depth(service.url, 0)
    with pytest.raises(httpx.ReadTimeout):
        answer = httpx.post(f"{service.url}{path}", json=BODIES[path], timeout=5.0)
        pytest.fail(f"a given-up program was answered: {answer.status_code} {answer.text[:300]}")
    _wait_for_depth(service.url, 0)  # that client left too
