"""A call given up cancels its programs, queued and running (issue 36, class 2): the Python API's side.

Each test starts its own small pool (the tests replace its workers), gives it programs that would run
for minutes, gives the call up the three ways the API offers (an asyncio task cancelled, a `run_many`
iterator closed, a `Cancellation` cancelled from another thread), and then checks what a neighbour
sees: its programs run (long before the given-up ones could have ended), none is charged a death
(attempts 1), the workers are healthy, the given-up programs' processes are gone, and no result of a
given-up program reached the cache. Over backends, policies and tiers.
"""

from __future__ import annotations

import asyncio
import subprocess
import threading
import time
from collections.abc import Iterator

import pytest
from conftest import BACKEND_PARAMS, DOCKER_IMAGE, assert_pool_healthy, backend_unavailable, describe, process_table

from potrun import ExecResult, Sandbox, Status
from potrun.check.cache import CachedSandbox, ResultCache
from potrun.sandbox.api import Cancellation, Cancelled

# Minutes of CPU (restricted: pure, so warm where the tier allows) or of sleep (trusted).
LONG = {"restricted": "n = 0\nwhile True:\n    n += 1", "trusted": "import time\ntime.sleep(600)"}
LIMIT_S = 300.0  # the given-up programs' CPU limit: the test would take that long if they ran to it
PATIENCE_S = 120.0  # how long a neighbour may wait at most (a hang, not a timing: LIMIT_S is the limit)


@pytest.fixture(params=[(p, t) for p in ("restricted", "trusted") for t in ("warm", "fork")], ids=lambda p: "-".join(p))
def setting(request: pytest.FixtureRequest) -> tuple[str, str]:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture(params=BACKEND_PARAMS)
def fresh_box(request: pytest.FixtureRequest, setting: tuple[str, str]) -> Iterator[Sandbox]:
    reason = backend_unavailable(request.param)
    if reason is not None:
        pytest.skip(f"{request.param} backend unavailable: {reason}")
    policy, tier = setting
    box = Sandbox(
        request.param, policy=policy, isolation=tier, workers=2, timeout=LIMIT_S, memory_mb=512, image=DOCKER_IMAGE
    )
    with box:
        yield box


def _running(box: Sandbox, count: int) -> None:
    """Wait until `count` workers hold a program (sent whole: it runs or is about to)."""
    pool = box._pool
    assert pool is not None
    deadline = time.monotonic() + PATIENCE_S
    while time.monotonic() < deadline:
        if sum(1 for slot in pool.slots if slot.inflight and slot.written >= slot.inflight[0].sent_end) >= count:
            time.sleep(0.3)  # and let them start
            return
        time.sleep(0.02)
    raise AssertionError("the programs were never sent")


def _roots(box: Sandbox) -> set[int]:
    """The host pids at the roots of the pool's workers; a worker whose container is already gone
    (stopped, its replacement not yet in the slot) has none."""
    from conftest import worker_host_pid

    assert box._pool is not None
    roots: set[int] = set()
    for slot in list(box._pool.slots):
        try:
            roots.add(worker_host_pid(slot.conn))
        except subprocess.CalledProcessError:  # `docker inspect` of a removed container
            continue
    return roots


def _neighbour_runs(box: Sandbox, count: int = 8) -> None:
    """Another caller's programs run, each once, in time no given-up program could have taken."""
    results: list[ExecResult] = []
    thread = threading.Thread(target=lambda: results.extend(box.run_many([f"ans = {k} * 2" for k in range(count)])))
    thread.start()
    thread.join(PATIENCE_S)
    assert not thread.is_alive(), "a neighbour waited for the given-up programs"
    for k, result in enumerate(results):
        assert result.status is Status.OK and result.value == 2 * k and result.attempts == 1, describe(result)


def _given_up_gone(box: Sandbox, before: set[int]) -> None:
    """The workers that ran the given-up programs are stopped (and replaced) once their grace has
    passed: their processes are gone, so are the programs below them."""
    assert box._pool is not None
    deadline = time.monotonic() + PATIENCE_S
    alive: set[int] = set()
    while time.monotonic() < deadline:
        table = process_table()
        alive = {pid for pid in before - _roots(box) if pid in table and table[pid].alive}
        if box._pool.cancelled >= 1 and not alive:
            return
        time.sleep(0.05)
    raise AssertionError(f"given-up programs still run ({box._pool.cancelled} workers stopped; alive: {sorted(alive)})")


def test_a_cancelled_asyncio_task_cancels_its_running_programs(fresh_box: Sandbox, setting: tuple[str, str]) -> None:
    box = fresh_box
    cache = ResultCache()
    cached = CachedSandbox(box, cache)
    before = _roots(box)

    async def main() -> None:
        async def consume() -> None:
            async for _ in box.arun_requests([cached.request(LONG[setting[0]]) for _ in range(2)]):
                raise AssertionError("a program that runs for minutes answered")

        task = asyncio.create_task(consume())
        await asyncio.to_thread(_running, box, 2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    _neighbour_runs(box)
    _given_up_gone(box, before)
    assert len(cache) == 0
    assert_pool_healthy(box)


def test_a_closed_run_many_cancels_its_running_programs(fresh_box: Sandbox, setting: tuple[str, str]) -> None:
    """A caller's run_many interrupted (closed as a `for` loop's exception or a Ctrl-C closes it)."""
    box = fresh_box
    before = _roots(box)
    quick_and_long = ["ans = 1", LONG[setting[0]], LONG[setting[0]]]
    results = box.run_many(quick_and_long)
    assert next(results).value == 1
    _running(box, 2)
    results.close()  # type: ignore[attr-defined]
    _neighbour_runs(box)
    _given_up_gone(box, before)
    assert_pool_healthy(box)


def test_a_cancellation_from_another_thread_cancels_queued_and_running_programs(
    fresh_box: Sandbox, setting: tuple[str, str]
) -> None:
    """The trainer's thread (or the service's scoring thread) blocked on a result raises Cancelled; its
    programs still queued behind the running ones never run; the neighbour's queued behind them on the
    same workers are sent again free (attempts 1)."""
    box = fresh_box
    cache = ResultCache()
    cached = CachedSandbox(box, cache)
    before = _roots(box)
    cancellation = Cancellation()
    raised: list[BaseException] = []

    def call() -> None:
        try:
            with cancellation.active():
                list(cached.run_many([LONG[setting[0]]] * 2 + [f"ans = {k}" for k in range(20)]))
        except BaseException as exc:
            raised.append(exc)

    caller = threading.Thread(target=call)
    caller.start()
    _running(box, 2)
    failures: list[BaseException] = []

    def neighbour_runs() -> None:
        try:
            _neighbour_runs(box, 6)
        except BaseException as exc:
            failures.append(exc)

    neighbour = threading.Thread(target=neighbour_runs)
    neighbour.start()  # its programs queue behind the given-up ones, on the same two workers
    time.sleep(0.2)
    cancellation.cancel()
    caller.join(PATIENCE_S)
    assert not caller.is_alive() and len(raised) == 1 and isinstance(raised[0], Cancelled), raised
    neighbour.join(PATIENCE_S)
    assert not neighbour.is_alive() and not failures, failures
    _given_up_gone(box, before)
    assert len(cache) == 0  # not even the quick ones queued behind: they never ran
    with pytest.raises(Cancelled), cancellation.active():  # a call made after the cancellation: at once
        list(box.run_many(["ans = 1"]))
    assert_pool_healthy(box)
