"""Issue 37 at the service's edges, on `potrun serve` started for real on 127.0.0.1: an unknown field
of a JSON body is refused, naming it and the closest known one (item 3)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from served import Service, start_service

pytest.importorskip("starlette", reason="the serve extra: pip install 'potrun[serve]'")


@pytest.fixture(scope="module")
def service() -> Iterator[Service]:
    served = start_service("--sandbox-workers", "1", capture_stderr=True)
    yield served
    served.stop_reading_stderr()


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
    service: Service, path: str, body: dict[str, object], named: str, suggested: str
) -> None:
    answer = httpx.post(f"{service.url}{path}", json=body, timeout=60)
    assert answer.status_code == 400, answer.text
    assert repr(named) in answer.text and f"did you mean {suggested!r}" in answer.text


def test_run_code_refuses_an_unknown_field_as_pydantic_forbids_one(service: Service) -> None:
    body = {"code": "print(1)", "language": "python", "run_timout": 1}
    answer = httpx.post(f"{service.url}/run_code", json=body, timeout=60)
    assert answer.status_code == 422
    detail = answer.json()["detail"][0]
    assert detail["type"] == "extra_forbidden" and detail["loc"] == ["body", "run_timout"]
    assert "did you mean 'run_timeout'" in detail["msg"]


def test_the_known_fields_still_run(service: Service) -> None:
    body = {"code": "print(1)", "language": "python", "run_timeout": 2, "compile_timeout": 2, "memory_limit_MB": 256}
    body |= {"stdin": "", "files": {}, "fetch_files": []}
    assert httpx.post(f"{service.url}/run_code", json=body, timeout=60).json()["status"] == "Success"
    score = {"completions": ["ans = 72"], "golds": ["72"], "preset": "pot", "compare_options": {"abs_value": True}}
    lines = httpx.post(f"{service.url}/v1/score", json=score, timeout=60).text.splitlines()
    assert len(lines) == 1 and '"reward": 1.0' in lines[0]


# -------------------------------------------------------------------------------- item 6: serve's edges


def test_serve_says_where_it_listens() -> None:
    served = start_service("--sandbox-workers", "1", capture_stderr=True)
    port = served.url.rsplit(":", 1)[1]
    err = served.stop_reading_stderr()
    assert f"potrun serve: listening on http://127.0.0.1:{port}" in err
    assert "policy trusted" in err


def metric(text: str, name: str) -> float:
    """A sample's value in Prometheus' text ("name value" or "name{labels} value")."""
    for line in text.splitlines():
        if line.startswith(name + " ") or line == name:
            return float(line.split()[-1])
    raise AssertionError(f"{name} not in /metrics:\n{text}")


def test_metrics_count_the_whole_service_under_several_processes() -> None:
    """`--workers 2`: a scrape reaches either process, and each reports every process's programs
    (per-process counters made the totals jump between scrapes)."""
    pytest.importorskip("prometheus_client", reason="the serve extra: pip install 'potrun[serve]'")
    served = start_service("--sandbox-workers", "1", "--workers", "2", capture_stderr=True)
    try:
        pids = set()
        runs = 12
        for index in range(runs):  # a new connection each: the kernel hands it to either process
            with httpx.Client(timeout=60) as client:
                answer = client.post(f"{served.url}/v1/run", json={"programs": [f"ans = {index}"]})
                assert answer.status_code == 200
                pids.add(client.get(f"{served.url}/health").json()["pid"])
        for _ in range(8):
            with httpx.Client(timeout=60) as client:
                text = client.get(f"{served.url}/metrics").text
            assert metric(text, 'potrun_programs_total{status="ok"}') == runs
            assert metric(text, 'potrun_requests_total{route="/v1/run"}') == runs
            assert metric(text, "potrun_queue_limit") == 2 * 4096  # both live processes' limits
            assert metric(text, "potrun_queue_depth") == 0
    finally:
        served.stop_reading_stderr()
