"""`potrun serve` under hostile clients (issue 36, class 2), with real clients on 127.0.0.1: a request's
own limits are capped to the operator's ceilings (--max-timeout, --max-memory; default the service's
--timeout and --memory) on every route that takes them, and the answer names what was capped; SIGTERM
stops the service after --shutdown-timeout even while a program would run for an hour; a client that
leaves gives its room in the queue back at once."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

pytest.importorskip("starlette", reason="the serve extra: pip install 'potrun[serve]'")

import served

BIG = "x = bytearray(700 * 1024 * 1024)\nprint(len(x))"
LOOP = "while True:\n    pass"


@pytest.fixture(scope="module")
def service() -> Iterator[served.Service]:
    started = served.start_service("--max-timeout", "1", "--max-memory", "300")
    yield started
    assert started.stop() == served.STOPPED


def _health(url: str) -> dict[str, object]:
    return dict(httpx.get(f"{url}/health", timeout=30).json())


def test_run_code_limits_above_the_ceilings_are_capped_and_named(service: served.Service) -> None:
    answer = httpx.post(
        f"{service.url}/run_code",
        json={"language": "python", "code": BIG, "memory_limit_MB": 4096},
        timeout=60,
    )
    assert answer.status_code == 200
    assert answer.json()["status"] == "Failed", answer.json()  # 700 MB under the 300 MB ceiling
    assert "memory_mb=300" in answer.headers["x-potrun-capped"]  # (and SandboxFusion's default 10 s: 1)
    slow = httpx.post(
        f"{service.url}/run_code", json={"language": "python", "code": LOOP, "run_timeout": 86400}, timeout=60
    )
    assert slow.json()["run_result"]["status"] == "TimeLimitExceeded"
    assert "timeout=1" in slow.headers["x-potrun-capped"]
    fine = httpx.post(
        f"{service.url}/run_code", json={"language": "python", "code": "print(1)", "memory_limit_MB": 200}, timeout=60
    )
    assert fine.json()["status"] == "Success" and "memory_mb" not in fine.headers["x-potrun-capped"]  # as asked


def test_v1_run_limits_above_the_ceilings_are_capped_and_named(service: served.Service) -> None:
    programs = [{"code": BIG, "memory_mb": 4096}, {"code": LOOP, "timeout": 86400}, {"code": "ans = 2"}]
    answer = httpx.post(f"{service.url}/v1/run", json={"programs": programs}, timeout=60)
    assert answer.status_code == 200
    assert answer.headers["x-potrun-capped"] == "memory_mb=300, timeout=1"
    by_index = {line["index"]: line for line in map(json.loads, answer.text.splitlines())}
    assert by_index[0]["status"] == "memory_limit" and by_index[1]["status"] == "timeout"
    assert by_index[2]["value"] == 2


def test_a_client_that_leaves_gives_its_room_back_at_once(service: served.Service) -> None:
    """A /run_code whose program would sleep 30 s: the client hangs up, and the queue is free again long
    before the program could have ended (its room was held until then before)."""
    body = json.dumps({"language": "python", "code": "import time\ntime.sleep(30)", "run_timeout": 1}).encode()
    host, port = service.url.removeprefix("http://").split(":")
    client = socket.create_connection((host, int(port)))
    client.sendall(
        b"POST /run_code HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        + f"content-length: {len(body)}\r\n\r\n".encode()
        + body
    )
    deadline = time.monotonic() + 20
    while _health(service.url)["queue_depth"] != 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _health(service.url)["queue_depth"] == 1
    client.close()
    while _health(service.url)["queue_depth"] != 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _health(service.url)["queue_depth"] == 0  # the sleeper's wall net (>= 2 s) had not passed
    assert httpx.post(f"{service.url}/run_code", json={"language": "python", "code": "print(3)"}).status_code == 200


def test_sigterm_stops_the_service_after_its_shutdown_deadline() -> None:
    """A program allowed an hour of CPU and sleeping: without a deadline SIGTERM would wait for it."""
    started = served.start_service("--max-timeout", "3600", "--shutdown-timeout", "1")
    program = {"code": "import time\ntime.sleep(10**6)", "timeout": 3600}
    answers: list[object] = []

    def send() -> None:
        try:
            answers.append(httpx.post(f"{started.url}/v1/run", json={"programs": [program]}, timeout=120).status_code)
        except httpx.HTTPError as exc:
            answers.append(type(exc).__name__)

    sender = threading.Thread(target=send)
    sender.start()
    deadline = time.monotonic() + 30
    while _health(started.url)["queue_depth"] != 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _health(started.url)["queue_depth"] == 1
    assert started.stop() == served.STOPPED  # stop() waits 60 s at most: the program would take 10**6
    sender.join(60)
    assert answers and not sender.is_alive()
