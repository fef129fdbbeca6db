"""Per-call limits, stdin and files (`Sandbox.run(source, timeout=, memory_mb=, stdin=, files=)`), on
each backend, on the session's trusted pool (2 s, 512 MB): what a call gives changes that program only."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest
from conftest import Pools, describe

from potrun import Limits, Sandbox, Status, UsageError
from potrun.sandbox.wire.protocol import INPUT_LIMIT, STREAM_LIMIT, check_result


@pytest.fixture
def trusted(pools: Pools, backend: str) -> Sandbox:
    return pools.get("trusted", backend)


def test_a_per_call_timeout_stops_that_program_only(trusted: Sandbox) -> None:
    short = trusted.run("while True:\n    pass", timeout=0.3)
    assert short.status is Status.TIMEOUT and short.timeout_kind == "cpu", describe(short)
    assert short.cpu_s < 1.0, describe(short)  # the pool's own limit is 2 s
    after = trusted.run("s = 0\nfor k in range(3 * 10**6):\n    s += k\nans = s")
    assert after.status is Status.OK, describe(after)  # the next program has the pool's limit again


def test_a_per_call_timeout_may_be_longer_than_the_pools(trusted: Sandbox) -> None:
    result = trusted.run(
        "import time\nt = time.process_time()\nwhile time.process_time() - t < 2.3:\n    pass\nans = 1", timeout=4
    )
    assert result.status is Status.OK, describe(result)


def test_a_per_call_memory_limit(trusted: Sandbox) -> None:
    program = "x = bytearray(300 * 1024 * 1024)\nans = len(x)"
    assert trusted.run(program).status is Status.OK  # 512 MB: it fits
    small = trusted.run(program, memory_mb=150)
    assert small.status is Status.MEMORY_LIMIT, describe(small)


@pytest.mark.parametrize(
    ("program", "value"),
    [
        ("import sys\nans = sys.stdin.read()", "one\ntwo\n"),
        ("ans = input() + '+' + input()", "one+two"),
        ("import os\nans = os.read(0, 3).decode()", "one"),
        ("import sys\nans = [line.strip() for line in sys.stdin]", ["one", "two"]),
    ],
    ids=["read", "input", "fd-0", "lines"],
)
def test_stdin_is_what_the_program_reads(trusted: Sandbox, program: str, value: object) -> None:
    result = trusted.run(program, stdin="one\ntwo\n")
    assert result.status is Status.OK and result.value == value, describe(result)


def test_without_stdin_the_program_reads_nothing(trusted: Sandbox) -> None:
    result = trusted.run("import sys\nans = repr(sys.stdin.read())")
    assert result.value == "''", describe(result)


def test_files_are_in_the_scratch_directory_and_only_for_that_program(trusted: Sandbox) -> None:
    files = {"data/in.txt": "text é", "blob.bin": b"\x00\xff"}
    program = "ans = [open('data/in.txt', encoding='utf-8').read(), list(open('blob.bin', 'rb').read())]"
    result = trusted.run(program, files=files)
    assert result.status is Status.OK and result.value == ["text é", [0, 255]], describe(result)
    writable = trusted.run("open('data/in.txt', 'a').write('more')\nans = open('data/in.txt').read()", files=files)
    assert writable.value == "text émore", describe(writable)  # the program's own files
    after = trusted.run("import os\nans = os.listdir('.')")
    assert after.value == [], describe(after)


@pytest.mark.parametrize("name", ["/etc/passwd", "../up.txt", "a/../../b", "", "a//b", "./a", "nul\0x"])
def test_file_names_outside_the_scratch_are_refused(trusted: Sandbox, name: str) -> None:
    with pytest.raises(UsageError):
        trusted.request("ans = 1", files={name: "x"})


def test_inputs_are_bounded(trusted: Sandbox) -> None:
    with pytest.raises(UsageError, match="at most"):
        trusted.request("ans = 1", stdin="x" * (INPUT_LIMIT + 1))


def test_a_pure_program_given_stdin_still_takes_the_warm_tier(trusted: Sandbox) -> None:
    result = trusted.run("ans = 6 * 7", stdin="ignored", files={"f": "x"})
    assert result.status is Status.OK and result.value == 42 and result.isolation == "warm", describe(result)


@pytest.mark.parametrize("option", [{"timeout": 0}, {"timeout": float("nan")}, {"memory_mb": -1}])
def test_bad_per_call_limits_are_usage_errors(trusted: Sandbox, option: dict[str, float]) -> None:
    with pytest.raises(UsageError):
        trusted.request("ans = 1", **option)  # type: ignore[arg-type]


BAD_REQUESTS = {
    "not a request": lambda good: 7,
    "source bytes": lambda good: dataclasses.replace(good, source=b"ans = 1"),
    "unknown policy": lambda good: dataclasses.replace(good, policy="root"),
    "unknown entry": lambda good: dataclasses.replace(good, entry="main"),
    "unknown isolation": lambda good: dataclasses.replace(good, isolation="none"),
    "limits a dict": lambda good: dataclasses.replace(good, limits={"timeout_s": 1}),
    "negative timeout": lambda good: dataclasses.replace(good, limits=Limits(timeout_s=-1)),
    "NaN wall net": lambda good: dataclasses.replace(good, limits=Limits(wall_timeout_s=float("nan"))),
    "text memory": lambda good: dataclasses.replace(good, limits=Limits(memory_mb="512")),  # type: ignore[arg-type]
    "zero output": lambda good: dataclasses.replace(good, limits=Limits(output_bytes=0)),
    "huge processes": lambda good: dataclasses.replace(good, limits=Limits(max_processes=10**9)),
    "capture 1": lambda good: dataclasses.replace(good, capture=1),
    "file outside": lambda good: dataclasses.replace(good, files=(("../x", b"a"),)),
    "file text pairs": lambda good: dataclasses.replace(good, files=("ab",)),
    "file name a list": lambda good: dataclasses.replace(good, files=(([1], b"a"),)),
}


@pytest.mark.parametrize("bad", BAD_REQUESTS.values(), ids=BAD_REQUESTS.keys())
def test_a_bad_prepared_request_is_a_usage_error_naming_it_and_the_pool_goes_on(trusted: Sandbox, bad: Any) -> None:
    """`run_requests` and `arun_requests` take what a caller prepared: each field is checked as it is
    read, as `Sandbox.request` checks its options (never a worker dying on it, retried)."""
    good = trusted.request("ans = 6 * 7")

    async def arun() -> list[Any]:
        return [result async for result in trusted.arun_requests([good, bad(good)])]

    with pytest.raises(UsageError):
        list(trusted.run_requests([good, bad(good)]))
    with pytest.raises(UsageError):
        asyncio.run(arun())
    assert [r.value for r in trusted.run_requests([good, None, good]) if r is not None] == [42, 42]


def test_arun_takes_the_same_per_call_options(trusted: Sandbox) -> None:
    result = asyncio.run(trusted.arun("ans = input()", stdin="async"))
    assert result.value == "async", describe(result)


EXPECTED_OUTPUT = "".join(f"{i:05d}\n" for i in range(5000))  # 30,000 characters


@pytest.mark.parametrize(
    ("program", "tier"),
    [
        ("for i in range(5000):\n    print(f'{i:05d}')\nans = 1", "warm"),
        ("import os\nfor i in range(5000):\n    print(f'{i:05d}')\nans = os.getpid() > 0", "fork"),
    ],
    ids=["warm", "fork"],
)
def test_full_output_sends_the_whole_streams_and_the_default_a_tail(trusted: Sandbox, program: str, tier: str) -> None:
    tail, whole = trusted.run(program), trusted.run(program, full_output=True)
    assert tail.isolation == whole.isolation == tier, describe(whole)
    assert tail.stdout == EXPECTED_OUTPUT[-STREAM_LIMIT:], describe(tail)
    assert whole.stdout == EXPECTED_OUTPUT and whole.value in (1, True), describe(whole)


def test_full_output_is_still_bounded_by_the_output_limit(trusted: Sandbox) -> None:
    result = trusted.run("import os\nprint('x' * 2_000_000)\nans = 1", full_output=True)
    assert result.status is Status.OUTPUT_LIMIT, describe(result)


def test_the_parent_bounds_a_runners_stdout_by_the_output_limit() -> None:
    """A hostile worker may send any stdout: the parent keeps at most the program's output limit of it."""
    message = {"op": "result", "id": 7, "status": "ok", "value": 1, "stdout": "y" * 50_000, "stderr": "z" * 9}
    checked = check_result(message, request_id=7, from_runner=False, output_bytes=20_000)
    assert len(checked["stdout"]) == 20_000 and checked["stderr"] == "z" * 9
    small = check_result(dict(message), request_id=7, from_runner=False, output_bytes=10)
    assert len(small["stdout"]) == STREAM_LIMIT  # never less than the tails' own length
