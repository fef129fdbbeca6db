"""The pool's own logic, on the in-process fake backend (`potrun.sandbox.parent.fake`): results in input order
whatever order the workers answer in, a worker that dies mid-job (its jobs retried once, then
sandbox_error), a stream its caller abandons, the budget of answers held, and the watchdog. Fast: no
process is started. The real backends' behaviour is tested where the tests claim it (test_sandbox,
test_docker, test_channel)."""

from __future__ import annotations

import dataclasses
import random
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from potrun.sandbox.parent import pool as pool_module
from potrun.sandbox.parent.fake import FakeBackend, Handler
from potrun.sandbox.parent.pool import MAX_ATTEMPTS, Pool
from potrun.sandbox.wire.protocol import RunRequest
from potrun.types import ExecResult, Limits, Status


def _value_of(request: RunRequest) -> ExecResult:
    """`ans = N` answers N."""
    return ExecResult(Status.OK, value=int(request.source.split("=")[1]), value_type="int")


def _requests(count: int, limits: Limits | None = None) -> list[RunRequest]:
    return [RunRequest(source=f"ans = {i}", limits=limits or Limits()) for i in range(count)]


@pytest.fixture
def start() -> Iterator[Callable[..., Pool]]:
    pools: list[Pool] = []

    def start_pool(handler: Handler, size: int = 2) -> Pool:
        pool = Pool(FakeBackend(handler), size)
        pool.start()
        pools.append(pool)
        return pool

    yield start_pool
    for pool in pools:
        pool.close()


def test_every_field_of_a_result_crosses_the_wire() -> None:
    """The wire's schema is ExecResult's fields: a result with none at its default comes back equal."""
    full = ExecResult(
        Status.ERROR,
        value=[1, 2.5, "x", [True, None]],
        value_type="list",
        entry="solution",
        error_type="ValueError",
        error="boom",
        line=3,
        timeout_kind="cpu",
        stdout="out",
        stderr="err",
        wall_s=0.25,
        cpu_s=0.125,
        peak_rss_mb=21.5,
        captured=(1.0, 2.0),
        isolation="fork",
        exit_code=3,
    )
    defaults = ExecResult(Status.OK)
    differ = [f.name for f in dataclasses.fields(ExecResult) if getattr(full, f.name) != getattr(defaults, f.name)]
    assert differ == [f.name for f in dataclasses.fields(ExecResult) if f.name != "attempts"]
    pool = Pool(FakeBackend(lambda request: dataclasses.replace(full, attempts=9)), 1)
    pool.start()
    try:
        (result,) = pool.run_many([RunRequest(source="ans = 1")])
    finally:
        pool.close()
    assert result == dataclasses.replace(full, attempts=1)  # attempts are the pool's count, not the worker's


def test_results_come_in_input_order_whatever_order_workers_answer_in(start: Callable[..., Pool]) -> None:
    def slow_at_random(request: RunRequest) -> ExecResult:
        time.sleep(random.random() / 500)
        return _value_of(request)

    pool = start(slow_at_random, size=3)
    requests: list[RunRequest | None] = [None if i % 7 == 0 else RunRequest(source=f"ans = {i}") for i in range(300)]
    results = list(pool.run_many(requests))
    assert [None if r is None else r.value for r in results] == [None if i % 7 == 0 else i for i in range(300)]


def test_the_jobs_of_a_worker_that_dies_mid_job_are_retried_once(start: Callable[..., Pool]) -> None:
    """The worker dies on `ans = 5` the first time: the jobs it held are retried on its replacement."""
    seen: set[str] = set()

    def dies_once(request: RunRequest) -> ExecResult:
        if request.source == "ans = 5" and request.source not in seen:
            seen.add(request.source)
            raise RuntimeError("the worker died")
        return _value_of(request)

    pool = start(dies_once, size=1)
    results = list(pool.run_many(_requests(20)))
    assert [r.value for r in results] == list(range(20))
    assert results[5].attempts == 2  # (its neighbours' answers not yet read when it died are retried too)
    assert pool.replaced == 1


def test_a_job_that_kills_every_worker_is_a_sandbox_error_and_the_pool_goes_on(start: Callable[..., Pool]) -> None:
    def dies_on_crash(request: RunRequest) -> ExecResult:
        if request.source == "crash":
            raise RuntimeError("the worker died")
        return _value_of(request)

    pool = start(dies_on_crash)
    (lost,) = pool.run_many([RunRequest(source="crash")])
    assert (lost.status, lost.error_type, lost.attempts) == (Status.SANDBOX_ERROR, "WorkerLost", MAX_ATTEMPTS)
    assert lost.error == "the worker exited"
    assert pool.replaced == MAX_ATTEMPTS
    assert [r.value for r in pool.run_many(_requests(20))] == list(range(20))


def test_an_abandoned_stream_lets_go_of_its_answers(start: Callable[..., Pool]) -> None:
    pool = start(_value_of)
    stream = pool.run_many(_requests(2000))
    assert [next(stream).value for _ in range(5)] == list(range(5))
    stream.close()  # the caller gives up with most of its jobs queued or running
    assert pool.held_bytes() == 0
    results = list(pool.run_many(_requests(50)))  # a later stream gets its own results only
    assert [r.value for r in results] == list(range(50))
    assert pool.held_bytes() == 0


def test_answers_held_behind_a_slow_program_stay_within_the_budget(
    start: Callable[..., Pool], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first program blocks; the other worker's answers wait in the pipe, not in potrun's memory,
    once the answers held reach MAX_AHEAD_BYTES (within one read of each worker's pipe)."""
    budget = 4096
    monkeypatch.setattr(pool_module, "MAX_AHEAD_BYTES", budget)
    release = threading.Event()

    def first_blocks(request: RunRequest) -> ExecResult:
        if request.source == "ans = 0":
            release.wait(10)
        return ExecResult(Status.OK, value="x" * 1000 + request.source, value_type="str")

    pool = start(first_blocks)
    results: list[ExecResult | None] = []
    reader = threading.Thread(target=lambda: results.extend(pool.run_many(_requests(1000))))
    reader.start()
    try:
        deadline = time.monotonic() + 0.5
        peak = 0
        while time.monotonic() < deadline:
            peak = max(peak, pool.held_bytes())
            time.sleep(0.005)
        assert budget <= peak <= budget + 2 * 65536
        assert pool.completed < 200  # of 999 answers ready: the rest wait for the slow one
    finally:
        release.set()
        reader.join(30)
    assert [r.value for r in results if r is not None] == ["x" * 1000 + f"ans = {i}" for i in range(1000)]


@pytest.mark.parametrize("hangs", ["once", "always"])
def test_the_watchdog_replaces_a_worker_that_stops_answering(
    start: Callable[..., Pool], monkeypatch: pytest.MonkeyPatch, hangs: str
) -> None:
    """A worker silent past the program's wall limit and the grace is replaced and its jobs retried:
    a program that hangs once gets its result on the retry, one that always hangs a sandbox_error."""
    monkeypatch.setattr(pool_module, "WATCHDOG_GRACE_S", 0.1)
    release = threading.Event()
    hung: list[str] = []

    def hangs_on_3(request: RunRequest) -> ExecResult:
        if request.source == "ans = 3" and (hangs == "always" or not hung):
            hung.append(request.source)
            release.wait(10)
        return _value_of(request)

    pool = start(hangs_on_3, size=1)
    limits = Limits(timeout_s=0.1, wall_timeout_s=0.1)
    requests = _requests(8, limits) if hangs == "once" else [RunRequest(source="ans = 3", limits=limits)]
    started = time.monotonic()
    try:
        results = list(pool.run_many(requests))
    finally:
        release.set()
    assert time.monotonic() - started < 5
    if hangs == "once":
        assert [r.value for r in results] == list(range(8)) and results[3].attempts == 2
    else:
        (lost,) = results
        assert (lost.status, lost.attempts, lost.error) == (
            Status.SANDBOX_ERROR,
            MAX_ATTEMPTS,
            "the worker stopped answering",
        )
    assert pool.replaced == len(hung)


def _stopped_by_the_net(request: RunRequest, cpu_s: float) -> ExecResult:
    """What the worker answers for a program its wall-clock net stopped after `cpu_s` of CPU."""
    limit = request.limits.wall_limit_s
    return ExecResult(Status.TIMEOUT, timeout_kind="wall", wall_s=limit, cpu_s=cpu_s, error=f"{limit:g} s")


@pytest.mark.parametrize("second", ["finishes", "stopped again"])
def test_a_program_the_net_stopped_while_computing_is_run_again_under_a_wider_net(
    start: Callable[..., Pool], second: str
) -> None:
    """Starved, not stuck: 1 s of CPU in the 7.5 s default net of a 1.5 s CPU limit. The confirming run has
    twice the net, and its verdict is the one reported, whichever it is."""
    nets: list[float] = []

    def starved_once(request: RunRequest) -> ExecResult:
        nets.append(request.limits.wall_limit_s)
        if request.source == "ans = 2" and (second == "stopped again" or len(nets) <= 3):
            return _stopped_by_the_net(request, cpu_s=1.0)
        return _value_of(request)

    pool = start(starved_once, size=1)
    results = list(pool.run_many(_requests(4, Limits(timeout_s=1.5))))
    assert [r.attempts for r in results] == [1, 1, 2, 1]
    assert sorted(nets) == [7.5, 7.5, 7.5, 7.5, 15.0]  # the rerun alone has the wider net
    if second == "finishes":
        assert [r.value for r in results] == [0, 1, 2, 3]
    else:
        assert (results[2].status, results[2].timeout_kind, results[2].wall_s) == (Status.TIMEOUT, "wall", 15.0)


@pytest.mark.parametrize(
    ("cpu_s", "limits", "why"),
    [
        (0.01, Limits(timeout_s=1.5), "a sleeper: 0.01 s of CPU in 7.5 s is no computation"),
        (1.5, Limits(timeout_s=1.5), "it used its whole CPU limit: the CPU limit decided"),
        (1.0, Limits(timeout_s=1.5, wall_timeout_s=5.0), "the caller chose the net"),
    ],
)
def test_a_verdict_the_load_could_not_have_caused_is_reported_at_once(
    start: Callable[..., Pool], cpu_s: float, limits: Limits, why: str
) -> None:
    calls: list[RunRequest] = []

    def stopped(request: RunRequest) -> ExecResult:
        calls.append(request)
        return _stopped_by_the_net(request, cpu_s)

    pool = start(stopped, size=1)
    (result,) = pool.run_many(_requests(1, limits))
    assert (result.status, result.attempts, len(calls)) == (Status.TIMEOUT, 1, 1), why


def test_a_confirming_run_whose_worker_dies_is_still_retried(start: Callable[..., Pool]) -> None:
    """The confirming run is not one of the job's retries: a worker lost under it is retried as usual."""
    runs: list[float] = []

    def starved_then_dies(request: RunRequest) -> ExecResult:
        runs.append(request.limits.wall_limit_s)
        if len(runs) == 1:
            return _stopped_by_the_net(request, cpu_s=1.0)
        if len(runs) == 2:
            raise RuntimeError("the worker died")
        return _value_of(request)

    pool = start(starved_then_dies, size=1)
    (result,) = pool.run_many(_requests(1, Limits(timeout_s=1.5)))
    assert (result.status, result.value, result.attempts) == (Status.OK, 0, 3)
    assert runs == [7.5, 15.0, 15.0]
