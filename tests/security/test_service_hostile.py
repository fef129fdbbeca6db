"""The hostile corpus (../shared/data/hostile/, as tests/security/test_hostile.py runs it) through `potrun serve`:
under each policy, every program's verdict through `POST /v1/run` is the one the Python API gives on a
sandbox of the same options (status, error type and value; where the corpus allows several statuses,
as for a fork bomb's race, both are among them), and the service answers /health after each one."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from conftest import MEMORY_MB, POLICIES, TIMEOUT_S, WORKERS, Pools, describe
from paths import SHARED
from served import Service, start_service

from potrun import ExecResult

pytestmark = pytest.mark.slow  # the whole hostile corpus, through the service

DATA = SHARED
HOSTILE = [
    json.loads(line) for line in (DATA / "hostile" / "hostile_programs.jsonl").read_text().splitlines() if line.strip()
]
VALUE_VARIES = {"sys-modules": "its value is a pid inside the worker's PID namespace"}
CLOSED_PORT = 9  # programs that call a canary listener get a port nobody listens on: only verdicts matter here


def source_of(case: dict[str, Any]) -> str:
    return case["code"].replace("CANARY_PORT", str(CLOSED_PORT)).replace("MARKER", "/nonexistent/marker")


@pytest.fixture(scope="module")
def services() -> Iterator[dict[str, Service]]:
    options = ("--timeout", str(TIMEOUT_S), "--memory", str(MEMORY_MB), "--sandbox-workers", str(WORKERS))
    started = {policy: start_service(*options, "--policy", policy) for policy in POLICIES}
    yield started
    for service in started.values():
        assert service.stop() == 0


@pytest.fixture(scope="module")
def api_results(pools: Pools) -> dict[str, list[ExecResult]]:
    """Every program's result through the Python API, on the session pools (the same options)."""
    sources = [source_of(case) for case in HOSTILE]
    return {policy: list(pools.get(policy, "process").run_many(sources)) for policy in POLICIES}


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("index", range(len(HOSTILE)), ids=[case["id"] for case in HOSTILE])
def test_a_hostile_program_gets_the_same_verdict_through_the_service(
    index: int, policy: str, services: dict[str, Service], api_results: dict[str, list[ExecResult]]
) -> None:
    case, service = HOSTILE[index], services[policy]
    expected = api_results[policy][index]
    answer = httpx.post(f"{service.url}/v1/run", json={"programs": [source_of(case)]}, timeout=120)
    assert answer.status_code == 200, answer.text
    (served,) = [json.loads(line) for line in answer.text.splitlines()]
    allowed = case["expect"][policy]
    if allowed is not None and len(allowed) > 1:  # the corpus allows several (a fork bomb's race): each run may differ
        assert served["status"] in allowed and expected.status.value in allowed, f"{case['id']}: service {served}"
    else:
        assert served["status"] == expected.status.value, f"{case['id']}: service {served}, API {describe(expected)}"
        assert served["error_type"] == expected.error_type, f"{case['id']}: service {served}, API {describe(expected)}"
        if case["id"] not in VALUE_VARIES:
            assert served["value"] == expected.to_json()["value"], (
                f"{case['id']}: service {served}, API {describe(expected)}"
            )
    health = httpx.get(f"{service.url}/health", timeout=10)
    assert health.status_code == 200 and health.json()["status"] == "ok"


def test_nothing_listens_on_the_closed_port() -> None:
    with socket.socket() as probe, pytest.raises(OSError):
        probe.settimeout(1)
        probe.connect(("127.0.0.1", CLOSED_PORT))
