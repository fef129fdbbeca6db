"""The result channel is untrusted input, values are bounded as a whole, stdout and stderr are kept
apart, and every RNG a program can reach is seeded (issue 14, classes 5-8).

A trusted program stands for one that escaped the policy: whatever bytes it writes, to any descriptor
it can reach, only its own record may change, and never into `sandbox_error` (potrun's own failure).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import deque
from pathlib import Path
from typing import Any

import pytest
from conftest import describe

from potrun import Sandbox, Status
from potrun.sandbox.parent.pool import Pool
from potrun.sandbox.wire.protocol import ProtocolError, RunRequest, check_result, encode, result_from_wire
from potrun.types import ExecResult

# -- bytes written anywhere ------------------------------------------------------------------------

_FORGE = """
import os, struct, json
def frame(body):
    return struct.pack('>I', len(body)) + body
forged = [json.dumps({"op": "result", "id": i, "status": "ok", "value": 42, "value_type": "int"}).encode()
          for i in range(64)]
payloads = [b'\\x00\\xff' * 50, frame(b'not json'), frame(b'[' * 100000), b'\\xff\\xff\\xff\\xff',
            b''.join(frame(struct.pack('>BdB', 0, 0.0, 0) + body) for body in forged),
            b''.join(frame(body) for body in forged),
            frame(struct.pack('>BdB', 0, 0.0, 0) + json.dumps({"op": "result", "id": 0, "status": "sandbox_error"}).encode())]
for fd in range(0, 256):
    for payload in PAYLOADS:
        try:
            os.write(fd, payload)
        except OSError:
            pass
ans = 7
"""
# Each variant writes some of the payloads (a first garbage frame and a forged one differ in effect).
FORGERIES = {
    "garbage": "payloads[:1]",
    "not-json": "payloads[1:2]",
    "deep-json": "payloads[2:3]",
    "huge-length": "payloads[3:4]",
    "forged-answers": "payloads[4:5]",
    "forged-frames": "payloads[5:6]",
    "claims-sandbox-error": "payloads[6:7]",
    "everything": "payloads",
}


@pytest.mark.parametrize("isolation", ["warm", "fork"])
@pytest.mark.parametrize("forgery", FORGERIES)
def test_bytes_written_anywhere_change_only_their_own_record(backend: str, isolation: str, forgery: str) -> None:
    """The forger's neighbours, before and after it on the same worker (pure programs in the warm
    tier, others forked), keep their own values; the forger gets a verdict of its own, never another's
    and never sandbox_error; the run yields one result per program."""
    forger = _FORGE.replace("PAYLOADS", FORGERIES[forgery])
    neighbours = ["ans = 1 + 1", "import math\nans = math.factorial(5)", "ans = 3 * 3"]
    programs = [*neighbours, forger, *neighbours, forger, *neighbours]
    expected = [2, 120, 9]
    with Sandbox(backend, policy="trusted", isolation=isolation, workers=1, timeout=10) as box:
        results = list(box.run_many(programs))
        assert box.workers_replaced == 0
    assert len(results) == len(programs)
    for index, result in enumerate(results):
        if programs[index] is forger:
            assert result.status is not Status.SANDBOX_ERROR, describe(result)
            assert result.status in (Status.OK, Status.CRASHED, Status.OUTPUT_LIMIT), describe(result)
            if result.status is Status.OK:  # it may forge its own verdict, and only its own
                assert result.value in (7, 42), describe(result)
            if result.status is Status.CRASHED:
                assert result.error_type == "protocol_violation", describe(result)
        else:
            assert result.status is Status.OK, describe(result)
            assert result.value == expected[neighbours.index(programs[index])], describe(result)


def test_a_forged_frame_does_not_end_potrun_check(tmp_path: Path) -> None:
    """The CLI writes every line, whatever a program writes to its descriptors."""
    forger = _FORGE.replace("PAYLOADS", "payloads")
    records = [{"id": i, "code": forger if i % 3 == 1 else f"ans = {i}", "answer": i} for i in range(8)]
    preds = tmp_path / "preds.jsonl"
    preds.write_text("".join(json.dumps(record) + "\n" for record in records))
    out = tmp_path / "out.jsonl"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "potrun.cli",
            "check",
            str(preds),
            "--policy",
            "trusted",
            "--out",
            str(out),
            "--workers",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [line["id"] for line in lines] == list(range(8))
    for line in lines:
        if line["id"] % 3 != 1:
            assert line["status"] == "ok" and line["value"] == line["id"] and line["correct"], line
        else:
            assert line["status"] != "sandbox_error", line


# -- the pool checks answers before it drops a job (a fake worker: glue only) -------------------------


class _ScriptedWorker:
    """A worker connection that answers each request with what `answer(index)` says."""

    def __init__(self, answer: Any) -> None:
        import os

        self._answer = answer
        self._read, self._write = os.pipe()
        self._inbox = bytearray()
        self.sent: deque[int] = deque()
        os.write(self._write, encode({"op": "hello", "pid": 1, "protocol": _protocol()}))

    def read_fd(self) -> int:
        return self._read

    def write_fd(self) -> int:
        return self._write

    def read(self) -> bytes:
        import os

        return os.read(self._read, 1 << 16)

    def write(self, data: bytes) -> int:
        import os

        from potrun.sandbox.wire.protocol import REQUEST_HEADER, FrameReader, request_message

        reader = FrameReader()
        for body in reader.feed(bytes(data)):
            if len(body) > REQUEST_HEADER.size:
                request = request_message(body)
                os.write(self._write, self._answer(request.id))
        return len(data)

    def kill(self) -> None:
        import os

        for fd in (self._read, self._write):
            try:
                os.close(fd)
            except OSError:
                pass


def _protocol() -> int:
    from potrun.sandbox.wire.protocol import PROTOCOL_VERSION

    return PROTOCOL_VERSION


class _ScriptedBackend:
    name = "scripted"

    def __init__(self, answers: list[Any]) -> None:
        self.answers = answers
        self.started = 0

    def start_worker(self, slot: int) -> _ScriptedWorker:
        answer = self.answers[min(self.started, len(self.answers) - 1)]
        self.started += 1
        return _ScriptedWorker(answer)

    def close(self) -> None:
        pass


def _ok(index: int) -> bytes:
    return encode({"op": "result", "id": index, "status": "ok", "value": index, "value_type": "int"})


@pytest.mark.parametrize("lie", ["wrong-id", "extra-frame", "bad-status", "dict-value"])
def test_the_pool_loses_no_job_to_a_worker_that_breaks_the_protocol(lie: str) -> None:
    """The first worker lies; its jobs are retried on the next one, and every program gets its result."""
    lies = {
        "wrong-id": lambda index: _ok(index + 1),
        "extra-frame": lambda index: _ok(index) + _ok(index),
        "bad-status": lambda index: encode({"op": "result", "id": index, "status": "great"}),
        "dict-value": lambda index: encode({"op": "result", "id": index, "status": "ok", "value": {"a": 1}}),
    }
    backend = _ScriptedBackend([lies[lie], _ok])
    pool = Pool(backend, 1)
    pool.start()
    try:
        results = list(pool.run_many(RunRequest(source=f"ans = {i}") for i in range(8)))
    finally:
        pool.close()
    assert [r.value for r in results if r is not None] == list(range(8))
    assert all(r is not None and r.status is Status.OK for r in results)
    assert pool.replaced >= 1


@pytest.mark.parametrize(
    ("message", "problem"),
    [
        ({"status": "sandbox_error"}, "status"),
        ({"status": "timeout"}, "status"),
        ({"status": "ok", "value": {"a": 1}}, "plain data"),
        ({"status": "ok", "value": [[[[[[[[[[[1]]]]]]]]]]]}, "nested"),
        ({"status": "ok", "value": "x" * 2000}, "output limit"),
        ({"status": "ok", "value": ["x" * 600, "y" * 600]}, "output limit"),
        ({"status": "ok", "value": 1, "wall_s": "1"}, "number"),
        ({"status": "ok", "value": 1, "wall_s": float("nan")}, "duration"),
        ({"status": "ok", "value": 1, "entry": "eval"}, "entry"),
        ({"status": "ok", "value": 1, "captured": ["1"]}, "captured"),
        ({"status": "ok", "value": True, "line": 1.5}, "int"),
    ],
)
def test_a_runner_answer_is_checked_field_by_field(message: dict[str, Any], problem: str) -> None:
    with pytest.raises(ProtocolError, match=problem):
        check_result(message, request_id=3, from_runner=True, output_bytes=1000)


def test_a_checked_answer_is_bounded_and_carries_the_request_id() -> None:
    checked = check_result(
        {"id": 99, "status": "error", "error_type": "E" * 10_000, "error": "m" * 10_000, "unknown": "dropped"},
        request_id=3,
        from_runner=True,
        output_bytes=1000,
    )
    assert checked["id"] == 3 and len(checked["error_type"]) <= 100 and len(checked["error"]) <= 500
    assert "unknown" not in checked
    result = result_from_wire(checked, request_id=3, output_bytes=1000)
    assert isinstance(result, ExecResult) and result.status is Status.ERROR


# -- values bounded as a whole, with exact types ------------------------------------------------------

BOUNDED = [
    ("sixty-megabyte-list", "def solution():\n    return ['x' * 1_000_000] * 60", "output_limit"),
    (
        "lying-len",
        "class L(list):\n    def __len__(self):\n        return 1\n    def __iter__(self):\n"
        "        return iter([1])\ndef solution():\n    return L(['x' * 100_000] * 50)",
        "output_limit",
    ),
    ("nested-strings", "def solution():\n    return [['x' * 300_000] * 2] * 3", "output_limit"),
    ("long-class-name", "E = type('E' * 30_000_000, (Exception,), {})\ndef solution():\n    raise E('boom')", "error"),
]


@pytest.mark.parametrize(("source", "status"), [pytest.param(s, t, id=i) for i, s, t in BOUNDED])
def test_values_and_errors_are_bounded(backend: str, source: str, status: str) -> None:
    with Sandbox(backend, policy="trusted", workers=1, timeout=20, output_bytes=1_000_000) as box:
        result = box.run(source)
    assert result.status.value == status, describe(result)
    assert len(result.error_type or "") <= 100 and len(result.error or "") <= 500
    assert result.value is None or len(json.dumps(result.value)) <= 1_000_000


def test_a_list_subclass_is_read_through_list_itself(backend: str) -> None:
    source = (
        "class L(list):\n    def __len__(self):\n        return 10**9\n    def __iter__(self):\n"
        "        return iter([9])\ndef solution():\n    return L([1, 2, 3])"
    )
    with Sandbox(backend, policy="trusted", workers=1, timeout=10) as box:
        result = box.run(source)
    assert result.status is Status.OK and result.value == [1, 2, 3], describe(result)


# -- stdout and stderr apart ---------------------------------------------------------------------------

STREAMS = [
    ("long-printed-integer", "print(10 ** 1000)", 10**1000),
    ("long-printed-line", "print('a' * 5000)", "a" * 5000),
    ("warning-on-stderr", "import sys\nprint(12)\nprint('RuntimeWarning: ans = 99', file=sys.stderr)", 12),
    ("numpy-warning", "import numpy as np\nprint(5)\nx = np.float64(1.0) / np.float64(0.0)", 5),
    ("many-small-writes", "for i in range(20000):\n    print(i, end='')\nprint()\nprint(3)", 3),
]


@pytest.mark.parametrize("policy", ["restricted", "trusted"])
@pytest.mark.parametrize(("source", "value"), [pytest.param(s, v, id=i) for i, s, v in STREAMS])
def test_the_printed_answer_is_the_last_stdout_line_whole(backend: str, policy: str, source: str, value: Any) -> None:
    with Sandbox(backend, policy=policy, workers=1, timeout=10) as box:
        result = box.run(source, entry="stdout")
    if policy == "restricted" and "sys" in source:
        assert result.status is Status.POLICY_VIOLATION, describe(result)
        return
    assert result.status is Status.OK and result.value == value, describe(result)
    assert len(result.stdout) <= 1000 and len(result.stderr) <= 1000


def test_stderr_is_reported_apart(backend: str) -> None:
    with Sandbox(backend, policy="trusted", workers=1, timeout=10) as box:
        result = box.run("import sys\nprint('out')\nprint('err', file=sys.stderr)\nans = 1")
    assert result.stdout == "out\n" and result.stderr == "err\n", describe(result)


# -- every RNG seeded ---------------------------------------------------------------------------------

RNGS = [
    ("random-module", "import random\nans = random.random()"),
    ("random-Random", "import random\nans = [random.Random().random(), random.Random().random()]"),
    ("random-seed-none", "import random\nrandom.seed()\nans = random.random()"),
    ("system-random", "import random\nans = random.SystemRandom().random()"),
    ("numpy-legacy", "import numpy as np\nans = float(np.random.rand())"),
    ("numpy-default-rng", "import numpy as np\nans = float(np.random.default_rng().random())"),
    ("numpy-generator", "import numpy as np\nans = float(np.random.Generator(np.random.PCG64()).random())"),
    ("sympy-random", "from sympy.core import random as r\nans = r.random()"),
    ("secrets", "import secrets\nans = secrets.randbits(64)"),
]


@pytest.mark.parametrize("isolation", ["warm", "fork"])
@pytest.mark.parametrize("source", [pytest.param(s, id=i) for i, s in RNGS])
def test_every_program_runs_twice_with_the_same_value(backend: str, isolation: str, source: str) -> None:
    """The same program, twice on one worker and once on another pool's worker after other programs,
    gives the same value."""
    with Sandbox(backend, policy="trusted", isolation=isolation, workers=1, timeout=30) as box:
        first, second = box.run_many([source, source])
    with Sandbox(backend, policy="trusted", isolation=isolation, workers=1, timeout=30) as box:
        list(box.run_many(["import random\nans = random.random()", "import numpy as np\nans = 1", source]))
        third = box.run(source)
    assert first.status is Status.OK, describe(first)
    assert first.value == second.value == third.value, (describe(first), describe(second), describe(third))


# -- deep recursion is the program's own failure -------------------------------------------------------


@pytest.mark.parametrize("policy", ["restricted", "trusted"])
def test_deep_recursion_is_the_programs_failure(backend: str, policy: str) -> None:
    sources = [
        "def f(n):\n    return f(n + 1)\nans = f(0)",
        "def solution():\n    x = 1\n    for i in range(100000):\n        x = [x]\n    return x",
    ]
    if policy == "trusted":
        sources.append("import sys\nsys.setrecursionlimit(10**7)\ndef f(n):\n    return f(n + 1)\nans = f(0)")
    with Sandbox(backend, policy=policy, workers=1, timeout=20, memory_mb=256) as box:
        results = list(box.run_many(sources))
    for result in results:
        assert result.status not in (Status.SANDBOX_ERROR, Status.OK), describe(result)
        assert result.attempts == 1, describe(result)


def test_a_warm_memory_verdict_is_a_forks(backend: str) -> None:
    """A pure program that runs out of memory in the warm tier is run again in a fork (a warm heap has a
    history a fork's has not), and the warm runner is replaced: the programs after it run warm."""
    programs = ["ans = 1", "x = [0] * (10**9)\nans = len(x)", "ans = 2", "ans = 3"]
    with Sandbox(backend, policy="restricted", workers=1, timeout=10, memory_mb=400) as box:
        results = list(box.run_many(programs))
    assert [(r.status, r.isolation) for r in results] == [
        (Status.OK, "warm"),
        (Status.MEMORY_LIMIT, "fork"),
        (Status.OK, "warm"),
        (Status.OK, "warm"),
    ], [describe(r) for r in results]
    assert [r.value for r in results[2:]] == [2, 3]
