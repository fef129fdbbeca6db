"""`potrun serve`, started for real on 127.0.0.1 (a free port) by the tests, called with SandboxFusion's
own client package (`sandbox-fusion` from PyPI) and with plain HTTP (httpx)."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
from served import STOPPED, Service, free_port, start_service

pytest.importorskip("starlette", reason="the serve extra: pip install 'potrun[serve]'")
sandbox_fusion = pytest.importorskip("sandbox_fusion", reason="the sandbox-fusion client (test extra)")

TOKEN = "s3cret-token"


@pytest.fixture(scope="module")
def service() -> Iterator[Service]:
    started = start_service()
    yield started
    assert started.stop() == STOPPED


def run_code(service: Service, **fields: object) -> dict[str, object]:
    answer = httpx.post(f"{service.url}/run_code", json={"language": "python", **fields}, timeout=60)
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def lines(response: httpx.Response) -> list[dict[str, object]]:
    return [json.loads(line) for line in response.text.splitlines() if line.strip()]


# -------------------------------------------------------------------------- SandboxFusion's /run_code


def test_the_sandbox_fusion_client_runs_code_with_stdin_and_files(service: Service) -> None:
    from sandbox_fusion import RunCodeRequest, RunStatus, run_code

    code = "import sys\nprint(sys.stdin.read().upper(), open('in/data.txt').read())"
    request = RunCodeRequest(
        code=code, language="python", stdin="abc", files={"in/data.txt": base64.b64encode(b"xyz").decode()}
    )
    response = run_code(request, endpoint=service.url, max_attempts=1)
    assert response.status == RunStatus.Success
    assert response.run_result is not None and response.run_result.return_code == 0
    assert response.run_result.stdout == "ABC xyz\n"


def test_the_sandbox_fusion_client_reads_failures_and_timeouts(service: Service) -> None:
    from sandbox_fusion import RunCodeRequest, RunStatus, SummaryMapping, run_code, summary_run_code_result

    failed = run_code(
        RunCodeRequest(code="print('so far')\n1 / 0", language="python"), endpoint=service.url, max_attempts=1
    )
    assert failed.status == RunStatus.Failed and failed.run_result.return_code == 1  # type: ignore[union-attr]
    assert failed.run_result.stdout == "so far\n"  # type: ignore[union-attr]
    assert "ZeroDivisionError" in failed.run_result.stderr  # type: ignore[union-attr,operator]
    slow = run_code(
        RunCodeRequest(code="while True: pass", language="python", run_timeout=0.5),
        endpoint=service.url,
        max_attempts=1,
    )
    mapping = SummaryMapping(RunTimeout="timeout", RunFailed="failed")
    assert summary_run_code_result(slow, mapping) == "timeout"
    assert summary_run_code_result(failed, mapping) == "failed"


@pytest.mark.parametrize(
    ("code", "status", "return_code"),
    [
        ("import sys\nsys.exit(0)", "Success", 0),
        ("import sys\nsys.exit(3)", "Failed", 3),
        ("def f(:", "Failed", 1),
        ("x = bytearray(800 * 1024 * 1024)", "Failed", 1),
        ("import time\ntime.sleep(0.2)\nprint('late')", "Success", 0),
        # sys.exit(code) as CPython ends the process: the OS keeps the low 8 bits of an int (one past a C
        # long is -1), the int's own value (not its __int__), any other code is printed and gives 1
        ("import sys\nsys.exit(256)", "Success", 0),
        ("import sys\nsys.exit(-1)", "Failed", 255),
        ("import sys\nsys.exit(2**70)", "Failed", 255),
        ("import sys\nsys.exit(2**32 + 3)", "Failed", 3),
        ("import sys\nsys.exit(True)", "Failed", 1),
        ("import sys\nsys.exit('0')", "Failed", 1),
        ("import sys\nsys.exit(None)", "Success", 0),
        ("import sys\nsys.exit(3.0)", "Failed", 1),
        ("import sys\nclass C(int):\n    def __int__(self): return 0\nsys.exit(C(7))", "Failed", 7),
        ("class E(SystemExit):\n    code = property(lambda self: 1 / 0)\nraise E(0)", "Failed", 1),
    ],
    ids=[
        "exit-0",
        "exit-3",
        "syntax",
        "memory",
        "sleep",
        "exit-256",
        "exit-minus-1",
        "exit-past-long",
        "exit-past-int",
        "exit-true",
        "exit-text-0",
        "exit-none",
        "exit-float",
        "exit-int-subclass",
        "exit-raising-code",
    ],
)
def test_run_code_status_words_and_return_codes(service: Service, code: str, status: str, return_code: int) -> None:
    answer = run_code(service, code=code)
    assert answer["status"] == status, answer
    assert answer["run_result"]["return_code"] == return_code, answer  # type: ignore[index]
    assert set(answer) == {"status", "message", "compile_result", "run_result", "executor_pod_name", "files"}


def test_run_code_prints_a_text_exit_code_as_python_does(service: Service) -> None:
    """sys.exit('0'): Python writes the text alone to stderr and ends with 1."""
    answer = run_code(service, code="import sys\nsys.exit('bye 0')")
    assert answer["run_result"]["return_code"] == 1  # type: ignore[index]
    assert answer["run_result"]["stderr"] == "bye 0\n"  # type: ignore[index]
    assert run_code(service, code="import sys\nsys.exit(3)")["run_result"]["stderr"] == ""  # type: ignore[index]


def test_run_code_answers_with_the_whole_streams(service: Service) -> None:
    """SandboxFusion sends stdout and stderr whole (verl compares a program's stdout with the expected
    output): 50,000 characters come back, not a tail."""
    code = "import sys\nfor i in range(10000):\n    print(f'{i:04d}')\nsys.stderr.write('e' * 3000)"
    answer = run_code(service, code=code)
    stdout = answer["run_result"]["stdout"]  # type: ignore[index]
    assert stdout == "".join(f"{i:04d}\n" for i in range(10000))
    assert answer["run_result"]["stderr"] == "e" * 3000  # type: ignore[index]


def test_run_code_memory_limit_is_per_call(service: Service) -> None:
    code = "x = bytearray(200 * 1024 * 1024)\nprint(len(x))"
    assert run_code(service, code=code)["status"] == "Success"
    assert run_code(service, code=code, memory_limit_MB=100)["status"] == "Failed"


def test_other_languages_get_sandbox_fusions_error_shapes(service: Service) -> None:
    known = run_code(service, code="int main() {}", language="cpp")
    assert known["status"] == "SandboxError" and "python only" in str(known["message"]), known
    unknown = httpx.post(f"{service.url}/run_code", json={"code": "x", "language": "cobol"})
    assert unknown.status_code == 422 and unknown.json()["detail"][0]["loc"] == ["body", "language"]
    missing = httpx.post(f"{service.url}/run_code", json={"language": "python"})
    assert missing.status_code == 422 and missing.json()["detail"][0]["loc"] == ["body", "code"]


def test_a_file_name_outside_the_scratch_is_a_sandbox_error(service: Service) -> None:
    answer = run_code(service, code="print(1)", files={"../escape.txt": base64.b64encode(b"x").decode()})
    assert answer["status"] == "SandboxError" and "escape" in str(answer["message"]), answer


# ---------------------------------------------------------------------------- potrun's own endpoints


def test_v1_run_streams_one_result_per_program_as_each_finishes(service: Service) -> None:
    # The slow one sleeps (no CPU) far longer than the quick ones take on the busiest machine seen here
    # (0.5 s was overtaken under load).
    programs = [
        "import time\ntime.sleep(5)\nans = 'slow'",
        "ans = 6 * 7",
        {"code": "ans = input()", "stdin": "typed"},
        {"code": "while True: pass", "timeout": 0.3},
        "ans = 1 / 0",
    ]
    with service.client() as client:
        answer = client.post("/v1/run", json={"programs": programs})
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("application/x-ndjson")
    results = lines(answer)
    by_index = {r["index"]: r for r in results}
    assert sorted(by_index) == [0, 1, 2, 3, 4]
    assert by_index[0]["value"] == "slow" and by_index[1]["value"] == 42 and by_index[2]["value"] == "typed"
    assert by_index[3]["status"] == "timeout" and by_index[4]["error_type"] == "ZeroDivisionError"
    assert results[0]["index"] != 0  # quick ones came before the slow one had finished


def test_v1_score_streams_rewards_in_order(service: Service) -> None:
    body = {
        "completions": ["```python\nans = 48 + 24\n```", "ans = 48 - 24", "ans = 1 / 0", "The answer is 72."],
        "golds": ["#### 72"] * 4,
        "shaped": True,
    }
    with service.client() as client:
        answer = client.post("/v1/score", json=body)
    results = lines(answer)
    assert [r["index"] for r in results] == [0, 1, 2, 3]
    assert [r["reward"] for r in results] == [1.0, 0.1, 0.0, 0.0]
    assert results[0]["correct"] is True and results[2]["status"] == "error"
    cot = client_post(service, "/v1/score", {"completions": ["so it is 72"], "golds": [72], "mode": "cot"})
    assert lines(cot)[0]["reward"] == 1.0


def test_v1_score_rejects_bad_options_before_running(service: Service) -> None:
    answer = client_post(service, "/v1/score", {"completions": ["ans = 1"], "golds": [1, 2]})
    assert answer.status_code == 400 and "golds" in answer.json()["error"]
    answer = client_post(service, "/v1/score", {"completions": ["ans = 1"], "golds": [1], "mode": "nope"})
    assert answer.status_code == 400
    # math-verify's timeouts need a main thread, which the service's scoring is not: it judges in a pool process's
    answer = client_post(service, "/v1/score", {"completions": ["ans = 1"], "golds": [1], "preset": "math"})
    assert answer.status_code == 200 and json.loads(answer.text.splitlines()[0])["reward"] == 1.0


def test_v1_run_refuses_a_malformed_batch_whole(service: Service) -> None:
    for body in (
        {"programs": "ans = 1"},
        {"programs": [{"stdin": "no code"}]},
        {"programs": [{"code": "ans = 1", "files": {"../x": "y"}}]},
    ):
        answer = client_post(service, "/v1/run", body)
        assert answer.status_code == 400, answer.text
    assert httpx.get(f"{service.url}/health").json()["queue_depth"] == 0


def client_post(service: Service, path: str, body: object) -> httpx.Response:
    with service.client() as client:
        return client.post(path, json=body)


def test_health_and_metrics(service: Service) -> None:
    run_code(service, code="print(1)")
    health = httpx.get(f"{service.url}/health").json()
    assert health["status"] == "ok" and health["policy"] == "trusted" and health["workers"] == 2
    text = httpx.get(f"{service.url}/metrics").text
    metrics = dict(line.rsplit(" ", 1) for line in text.splitlines() if not line.startswith("#"))
    assert float(metrics['potrun_programs_total{status="ok"}']) >= 1
    assert float(metrics['potrun_requests_total{route="/run_code"}']) >= 1
    assert metrics["potrun_queue_depth"] == "0" and "potrun_programs_per_second" in metrics


def test_a_body_over_the_limit_is_413(service: Service) -> None:
    answer = httpx.post(f"{service.url}/run_code", content=b"x" * (33 * 1024 * 1024), timeout=60)
    assert answer.status_code == 413
    assert httpx.get(f"{service.url}/health").status_code == 200


def test_openrlhf_remote_reward_route(service: Service) -> None:
    prompt = "Q: Natalia sold 48 clips and 24 more. How many?\nA: "
    payload = {
        "query": [prompt + "```python\nans = 48 + 24\n```<|im_end|>", prompt + "```python\nans = 48 - 24\n```"],
        "prompts": [prompt, prompt],
        "labels": ["72", "72"],
    }
    answer = client_post(service, "/openrlhf/reward", payload)
    assert answer.status_code == 200, answer.text
    assert answer.json()["rewards"] == [1.0, 0.0] and answer.json()["scores"] == [1.0, 0.0]
    assert "extra_logs" in answer.json()
    assert client_post(service, "/openrlhf/reward", {"query": "not a list"}).status_code == 400


# ------------------------------------------------------------------ token, queue, shutdown, replicas


def test_a_token_guards_every_route_but_health() -> None:
    guarded = start_service("--token", TOKEN)
    try:
        assert httpx.post(f"{guarded.url}/run_code", json={"code": "print(1)", "language": "python"}).status_code == 401
        with guarded.client("wrong") as client:
            assert client.get("/metrics").status_code == 401
        with guarded.client(TOKEN) as client:
            assert (
                client.post("/run_code", json={"code": "print(1)", "language": "python"}).json()["status"] == "Success"
            )
        assert httpx.get(f"{guarded.url}/health").status_code == 200
    finally:
        assert guarded.stop() == STOPPED


def test_a_public_address_without_a_token_is_refused() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "potrun", "serve", "--host", "0.0.0.0", "--port", str(free_port())],
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if k != "POTRUN_TOKEN"},
    )
    assert done.returncode == 2 and "--token" in done.stderr


def test_a_full_queue_answers_429_and_a_batch_larger_than_it_413() -> None:
    small = start_service("--queue-limit", "2")
    try:
        slow = {"programs": ["import time\ntime.sleep(1.5)\nans = 1"] * 2}
        holder = threading.Thread(target=lambda: httpx.post(f"{small.url}/v1/run", json=slow, timeout=60))
        holder.start()
        deadline = time.monotonic() + 10
        while httpx.get(f"{small.url}/health").json()["queue_depth"] < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        refused = httpx.post(f"{small.url}/run_code", json={"code": "print(1)", "language": "python"})
        assert refused.status_code == 429 and refused.headers["retry-after"] == "1"
        holder.join()
        assert httpx.post(f"{small.url}/run_code", json={"code": "print(1)", "language": "python"}).status_code == 200
        too_many = httpx.post(f"{small.url}/v1/run", json={"programs": ["ans = 1"] * 3})
        assert too_many.status_code == 413
    finally:
        assert small.stop() == STOPPED


def test_sigterm_finishes_every_accepted_request() -> None:
    stopping = start_service()
    answers: list[httpx.Response] = []
    programs = {"programs": [f"import time\ntime.sleep(1)\nans = {k}" for k in range(4)]}

    def send() -> None:
        answers.append(httpx.post(f"{stopping.url}/v1/run", json=programs, timeout=60))

    senders = [threading.Thread(target=send) for _ in range(3)]
    for sender in senders:
        sender.start()
    deadline = time.monotonic() + 10
    while httpx.get(f"{stopping.url}/health").json()["queue_depth"] < 12 and time.monotonic() < deadline:
        time.sleep(0.05)
    stopping.process.send_signal(signal.SIGTERM)
    for sender in senders:
        sender.join()
    assert stopping.process.wait(60) == STOPPED
    assert len(answers) == 3
    for answer in answers:
        assert sorted(r["value"] for r in lines(answer)) == [0, 1, 2, 3]
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{stopping.url}/health", timeout=2)


def test_replicas_share_the_port_each_with_its_own_pool() -> None:
    replicas = start_service("--workers", "2", "--sandbox-workers", "1")
    try:
        pids = set()
        deadline = time.monotonic() + 30
        while len(pids) < 2 and time.monotonic() < deadline:
            with httpx.Client(base_url=replicas.url) as client:  # a new connection each time
                pids.add(client.get("/health").json()["pid"])
        assert len(pids) == 2
        answer = run_code(replicas, code="print(6 * 7)")
        assert answer["run_result"]["stdout"] == "42\n"  # type: ignore[index]
    finally:
        assert replicas.stop() == STOPPED
