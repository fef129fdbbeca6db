"""Attacks on the per-call inputs and on `potrun serve`, each of which once got through: a limit that
broke the pool for every later call (a wall net past time_t, a float memory limit), a source or file
content of the wrong type (a lost worker; a terabyte allocated by `bytes(n)`), and request bodies that
made the service answer 500 or end a stream half way. Each must now be refused as the caller's error,
and the pool or service must go on answering."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from conftest import Pools, describe
from served import Service, start_service

from potrun import Sandbox, Status, UsageError

PROGRAM = "print(1)"
FENCED = "```python\nprint(1)\n```"


@pytest.fixture
def trusted(pools: Pools, backend: str) -> Sandbox:
    return pools.get("trusted", backend)


@pytest.mark.parametrize(
    "options",
    [
        {"timeout": 1e12},  # its wall net overflowed select() on the pool's thread: every later call failed
        {"timeout": float("inf")},
        {"timeout": True},
        {"memory_mb": 0.5},  # a float broke the request header's struct, on the pool's thread
        {"memory_mb": 10**15},
        {"stdin": 5},
        {"files": ["a"]},
        {"files": {"a": 10**12}},  # bytes(10**12): a terabyte before any size was checked
    ],
    ids=["timeout-1e12", "timeout-inf", "timeout-bool", "memory-float", "memory-huge", "stdin-int", "files-list",
         "content-int"],
)  # fmt: skip
def test_a_bad_per_call_input_is_the_callers_error_and_the_pool_goes_on(
    trusted: Sandbox, options: dict[str, Any]
) -> None:
    with pytest.raises(UsageError):
        trusted.run(PROGRAM, **options)
    after = trusted.run(PROGRAM)
    assert after.status is Status.OK and after.value == 1, describe(after)


def test_a_source_that_is_not_a_string_is_refused_before_a_worker_reads_it(trusted: Sandbox) -> None:
    with pytest.raises(UsageError, match="string"):
        trusted.request(5)  # type: ignore[arg-type]  # the worker died reading it, and again on the retry


def test_a_sandbox_config_past_the_largest_limits_is_refused() -> None:
    with pytest.raises(UsageError):
        Sandbox(timeout=1e12)
    with pytest.raises(UsageError):
        Sandbox(memory_mb=512.5)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def service() -> Iterator[Service]:
    started = start_service()
    yield started
    assert started.stop() == 0


def post(service: Service, path: str, body: Any) -> httpx.Response:
    content = body if isinstance(body, str) else json.dumps(body)
    return httpx.post(service.url + path, content=content, timeout=60)


def assert_healthy(service: Service) -> None:
    """The service still runs programs (its pool is alive) and has nothing left in its queue."""
    answer = post(service, "/run_code", {"code": PROGRAM, "language": "python"})
    assert answer.status_code == 200 and answer.json()["run_result"]["stdout"] == "1\n", answer.text
    assert httpx.get(service.url + "/health").json()["queue_depth"] == 0


@pytest.mark.parametrize(
    ("path", "body", "code"),
    [
        ("/v1/run", {"programs": [{"code": PROGRAM, "timeout": 1e308}]}, 400),
        ("/v1/run", {"programs": [{"code": PROGRAM, "memory_mb": 0.5}]}, 400),
        ("/v1/run", {"programs": [{"code": 5}]}, 400),
        ("/v1/run", {"programs": [{"code": PROGRAM, "stdin": 5}]}, 400),
        ("/v1/run", {"programs": [{"code": PROGRAM, "files": [1]}]}, 400),
        ("/v1/run", {"programs": [{"code": PROGRAM, "files": {"a": 10**12}}]}, 400),
        ("/v1/run", "[" * 100_000 + "]" * 100_000, 422),
        ("/run_code", '{"code": "print(1)", "language": "python", "run_timeout": NaN}', 422),
        ("/run_code", {"code": PROGRAM, "language": "python", "run_timeout": 1e308}, 200),  # a SandboxError
        ("/run_code", {"code": PROGRAM, "language": "python", "memory_limit_MB": 1e300}, 200),
        ("/v1/score", {"completions": [FENCED], "golds": ["1"], "scale": {"correct": "x"}}, 400),
        ("/v1/score", {"completions": [FENCED], "golds": ["1"], "scale": {}}, 400),
        ("/v1/score", '{"completions": ["x"], "golds": ["1"], "scale": {"correct": Infinity}}', 422),
        ("/openrlhf/reward", {"query": 5, "labels": []}, 400),
        ("/v1/score", {"completions": [FENCED], "golds": ["1"], "compare_options": {"abs_tol": "x"}}, 400),
    ],
    ids=["timeout-huge", "memory-float", "code-int", "stdin-int", "files-list", "content-int", "deep-json",
         "nan-timeout", "run-timeout-huge", "memory-huge", "scale-str", "scale-empty", "scale-inf", "query-int",
         "option-kind"],
)  # fmt: skip
def test_a_hostile_body_is_refused_whole_and_the_service_stays_healthy(
    service: Service, path: str, body: Any, code: int
) -> None:
    answer = post(service, path, body)
    assert answer.status_code == code, answer.text
    if path == "/run_code" and code == 200:
        assert answer.json()["status"] == "SandboxError", answer.text
    assert_healthy(service)


def test_the_token_cannot_be_dodged() -> None:
    guarded = start_service("--token", "t0ken")
    try:
        url = guarded.url
        for headers in ({"Authorization": "bearer t0ken"}, {"Authorization": "Bearer  t0ken"},
                        {"Authorization": "Bearer T0KEN"}, {"Authorization": "Bearer t0ke"},
                        {"X-Authorization": "Bearer t0ken"}):  # fmt: skip
            answer = httpx.post(f"{url}/run_code", json={"code": PROGRAM, "language": "python"}, headers=headers)
            assert answer.status_code == 401, (headers, answer.text)
        for path in ("//run_code", "/run_code/", "/health/../run_code", "/metrics"):
            assert httpx.post(url + path, json={}).status_code == 401, path
        for method in ("HEAD", "OPTIONS", "PUT"):
            assert httpx.request(method, f"{url}/run_code").status_code == 401, method
        health = httpx.get(f"{url}/health").json()
        assert "token" not in json.dumps(health).lower() and "t0ken" not in json.dumps(health)
    finally:
        assert guarded.stop() == 0
