"""A worker's replacement never stalls the pool: it starts off the dispatcher's thread.

A worker lost (killed from outside here, as an OOM killer or a hostile program would) is replaced while
the other workers go on: the neighbours' programs keep completing on them while the replacement is
held (a thin wrapper around the real backend holds every worker made after the first ones, until the
test lets it go). A replacement that never starts still fails the pool with every reason, and a pool
closed while a replacement starts closes and leaves nothing: no process, no container. Real workers,
on both backends; no timing is asserted (the waits are bounds against a hang; the throughput this buys
is measured by `bench/replacement_stall.py`).
"""

from __future__ import annotations

import itertools
import os
import random
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import pytest
from conftest import DOCKER_IMAGE, assert_pool_healthy, describe, dying_once_on, process_table, worker_host_pid

from potrun import ExecResult, Sandbox, Status
from potrun.sandbox.kernel.isolation import PIDS_CGROUP_ROOT, pids_cgroup_name
from potrun.sandbox.parent import pool as pool_module
from potrun.sandbox.parent.fake import FakeBackend
from potrun.sandbox.parent.pool import START_TRIES, Pool
from potrun.sandbox.wire.protocol import RunRequest
from potrun.types import SandboxUnavailable

PATIENCE_S = 60.0  # a bound against a hang, never a timing
WORKERS = 2
T = TypeVar("T")


class HeldReplacements:
    """The sandbox's real backend, except that every worker made after the first `first` waits until
    `release` is set before it is made (`held` says one waits), or fails to launch when `fail` (an
    OSError, as when no process can be made). Glue: the workers themselves are the real ones."""

    def __init__(self, real: Any, first: int) -> None:
        self.real = real
        self.name = real.name
        self.first = first
        self.made: list[Any] = []  # the connections made, in order
        self.asked = 0
        self.held = threading.Event()
        self.release = threading.Event()
        self.fail = False

    def start_worker(self, slot: int) -> Any:
        self.asked += 1
        if self.asked > self.first:
            if self.fail:
                raise OSError("no process can be made now (the test's)")
            self.held.set()
            self.release.wait()
        conn = self.real.start_worker(slot)
        self.made.append(conn)
        return conn

    def close(self) -> None:
        self.real.close()


def held_sandbox(backend: str) -> tuple[Sandbox, HeldReplacements]:
    box = Sandbox(backend, workers=WORKERS, timeout=5, image=DOCKER_IMAGE if backend == "docker" else None)
    held = HeldReplacements(box._backend, WORKERS)
    box._backend = held
    return box, held


def within(call: Callable[[], T], what: str) -> T:
    """`call()` on another thread, bounded against a hang (the stalled dispatcher's symptom)."""
    executor = ThreadPoolExecutor(1)
    future = executor.submit(call)
    try:
        return future.result(timeout=PATIENCE_S)
    except TimeoutError:
        raise AssertionError(f"{what}: no answer in {PATIENCE_S:g} s (the dispatcher is stalled)") from None
    finally:
        executor.shutdown(wait=False)  # a stalled call is left to end once the test lets the hold go


def pool_of(box: Sandbox) -> Pool:
    assert box._pool is not None
    return box._pool


def kill_worker(box: Sandbox, number: int) -> None:
    """SIGKILL the host process at the root of worker `number` (a container's first process)."""
    os.kill(worker_host_pid(pool_of(box).slots[number].conn), signal.SIGKILL)


def square(k: int) -> str:
    return f"ans = {k} * {k}"


def assert_squares(results: list[ExecResult], count: int, *, death: bool = False) -> None:
    """Each program's square, in order, run once (`death`: the program written to the killed worker
    ran twice)."""
    assert len(results) == count
    for k, result in enumerate(results):
        runs = result.attempts == 1 or (death and result.attempts == 2)
        assert result.status is Status.OK and result.value == k * k and runs, describe(result)


def assert_nothing_left(backend: str, held: HeldReplacements) -> None:
    """No process of any worker made (nor its scratch directory, nor its cgroup); on docker, no
    container of the session."""
    if backend == "docker":
        left = subprocess.run(
            ["docker", "ps", "-a", "-q", "--filter", f"label=potrun.session={held.real.session}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        assert left == [], f"containers left behind: {left}"
        return
    roots = {conn.process.pid for conn in held.made}
    deadline = time.monotonic() + 10  # SIGKILLed processes leave the table as they are reaped
    alive: list[str] = []
    while time.monotonic() < deadline:
        alive = [p.cmdline for p in process_table().values() if p.alive and (p.pid in roots or p.sid in roots)]
        if not alive:
            break
        time.sleep(0.05)
    assert alive == [], "worker processes outlived the pool"
    assert not [conn.scratch for conn in held.made if os.path.exists(conn.scratch)], "scratch left behind"
    if PIDS_CGROUP_ROOT.is_dir():
        assert not [pid for pid in roots if (PIDS_CGROUP_ROOT / pids_cgroup_name(pid)).exists()], "cgroups left"


def test_neighbours_programs_complete_while_a_replacement_is_held(backend: str) -> None:
    """One worker killed; its replacement held: every program of the neighbours completes on the other
    worker while the replacement is still held (on the synchronous replacement they all waited for
    it). Let go, the replacement takes its slot and runs programs."""
    box, held = held_sandbox(backend)
    with box:
        pool = pool_of(box)
        lost = pool.slots[0].conn
        try:
            kill_worker(box, 0)
            # Two programs a worker: the lost worker's are retried on the other.
            assert_squares(
                within(lambda: list(box.run_many(map(square, range(4)))), "the call that met the death"), 4, death=True
            )
            assert held.held.wait(PATIENCE_S), "no replacement was asked for"
            for round_ in range(3):  # several neighbours' calls, each all completed while it is held
                results = within(lambda: list(box.run_many(map(square, range(40)))), f"neighbours' call {round_}")
                assert_squares(results, 40)
                assert pool.slots[0].starting and not held.release.is_set()
            assert held.asked == WORKERS + 1  # the replacement, not retried
        finally:
            held.release.set()
        assert pool.settled(PATIENCE_S), "the replacement did not take its slot"
        assert pool.slots[0].conn is not lost and pool.slots[0].conn is held.made[-1]
        assert pool.replaced == 1
        assert_pool_healthy(box)
        assert_squares(list(box.run_many(map(square, range(20)))), 20)


@pytest.fixture
def short_pauses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pool_module, "START_PAUSES_S", (0.01, 0.01, 0.01))


@pytest.mark.usefixtures("short_pauses")
def test_a_replacement_that_never_starts_fails_the_pool_with_every_reason(backend: str) -> None:
    """A replacement whose every try fails (no process can be made): the pool fails, and a call
    running then gets SandboxUnavailable naming each try's reason. Nothing is left after close."""
    box, held = held_sandbox(backend)
    held.fail = True
    with box:
        sent: list[int] = []

        def endless() -> Iterator[str]:  # read lazily: the call runs until the pool fails
            for k in itertools.count():
                if k == 50:
                    kill_worker(box, 0)
                sent.append(k)
                yield square(k % 1000)

        with pytest.raises(SandboxUnavailable) as failure:
            within(lambda: list(box.run_many(endless())), "the call running when the pool failed")
        assert f"worker 0 did not start in {START_TRIES} tries" in str(failure.value)
        assert str(failure.value).count("it could not be launched (no process can be made now") == START_TRIES
        assert pool_of(box).failed and held.asked == WORKERS + START_TRIES
    assert_nothing_left(backend, held)


@pytest.mark.parametrize("held_at", ["launch", "hand-over"])
def test_close_during_a_held_replacement_leaves_nothing(backend: str, held_at: str) -> None:
    """close() while a replacement starts: held at its launch (it is made only once the pool closes),
    or after its hello (handed over only once the pool closes). close returns, and the worker made
    is killed: no process, no container left."""
    box, held = held_sandbox(backend)
    box.start()
    pool = pool_of(box)
    hello = threading.Event()
    if held_at == "launch":
        held.release = pool._closed  # made once close() has begun
    else:
        held.release.set()
        started = pool._start_slot

        def hand_over_after_close(number: int, failed: list[str] | None = None) -> Any:
            slot = started(number, failed)
            hello.set()
            pool._closed.wait()
            return slot

        pool._start_slot = hand_over_after_close  # type: ignore[method-assign]
    try:
        kill_worker(box, 0)
        assert_squares(
            within(lambda: list(box.run_many(map(square, range(4)))), "the call that met the death"), 4, death=True
        )
        assert (hello if held_at == "hand-over" else held.held).wait(PATIENCE_S), "the replacement did not start"
        assert pool.slots[0].starting
    finally:
        within(box.close, "close during a replacement")
    assert held.asked == WORKERS + 1 and len(held.made) == WORKERS + 1  # the replacement was made, then killed
    assert_nothing_left(backend, held)
    assert pool._launcher is None and not pool._starters  # the pool's threads ended with it


class HeldFakeReplacements(FakeBackend):
    """Fake workers (the pool's own logic, many deaths cheaply); those made after the first `first`
    wait for `release` before they are made."""

    def __init__(self, handler: Any, first: int) -> None:
        super().__init__(handler)
        self.first = first
        self.release = threading.Event()

    def start_worker(self, slot: int) -> Any:
        if self.started >= self.first:
            self.release.wait()
        return super().start_worker(slot)


@pytest.mark.parametrize("seed", range(4))
def test_seeded_deaths_with_every_replacement_held_stall_no_program(seed: int) -> None:
    """Seeded: a pool of 2-4 workers, all but one killed by programs at random places in a call, and no
    replacement let go: every program completes on the workers left, while every replacement is held;
    only the programs the deaths hit ran twice. Let go, each slot holds a new worker."""
    rng = random.Random(seed)
    size = rng.randint(2, 4)
    count = rng.randint(100, 400)
    deaths = set(rng.sample(range(count), size - 1))
    dies_on = dying_once_on(deaths)

    backend = HeldFakeReplacements(dies_on, size)
    pool = Pool(backend, size)
    pool.start()
    try:
        results = within(
            lambda: list(pool.run_many([RunRequest(source=f"ans = {k}") for k in range(count)])), "the call"
        )
        assert [r.value for r in results] == list(range(count))
        assert {k for k, r in enumerate(results) if r.attempts > 1} == deaths
        assert pool.replaced == size - 1 and sum(slot.starting for slot in pool.slots) == size - 1
        assert backend.started == size and not backend.release.is_set()  # every replacement still held
    finally:
        backend.release.set()
    try:
        assert pool.settled(PATIENCE_S)
        assert not any(slot.starting for slot in pool.slots) and backend.started == 2 * size - 1
        assert [r.value for r in pool.run_many([RunRequest(source=f"ans = {k}") for k in range(50)])] == list(range(50))
    finally:
        pool.close()


def test_a_pool_started_on_a_thread_that_ended_keeps_its_workers(backend: str) -> None:
    """A worker dies with the thread that made it (PR_SET_PDEATHSIG is a thread's): the pool makes
    every worker on a thread of its own, so a sandbox first started on a short-lived thread (a
    trainer's executor) keeps its workers once that thread ends, and nothing is replaced."""
    box = Sandbox(backend, workers=WORKERS, timeout=5, image=DOCKER_IMAGE if backend == "docker" else None)
    starter = threading.Thread(target=box.start)
    starter.start()
    starter.join()
    with box:
        roots = [worker_host_pid(slot.conn) for slot in pool_of(box).slots]
        assert_squares(list(box.run_many(map(square, range(40)))), 40)
        assert box.workers_replaced == 0
        assert [worker_host_pid(slot.conn) for slot in pool_of(box).slots] == roots
