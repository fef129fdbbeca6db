"""One Sandbox (and one reward function) shared by many threads and asyncio tasks.

Every caller runs programs whose value is its own (a function of the caller and the program's
number), mixed with programs that fail, fork or print, so that a result delivered to the wrong caller,
out of order, or lost shows as a wrong value. The programs alternate between the warm tier (pure) and
a fork (an import that is not pure), so both paths are shared at once.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from conftest import POLICIES, describe

from potrun import ExecResult, SandboxUnavailable, Status, rewards
from potrun.sandbox.api import Sandbox

THREADS = 8
PER_CALLER = 60


def program(caller: int, number: int) -> tuple[str, Any]:
    """A program and the value it must give (None: it must fail with ZeroDivisionError)."""
    value = caller * 10_000 + number
    kind = number % 4
    if kind == 0:
        return f"def solution():\n    return {caller} * 10000 + {number}", value
    if kind == 1:  # a fork: `random` is not proven pure (its generator's state is shared)
        return f"import random\nans = random.Random({caller}).randint(0, 0) + {value}", value
    if kind == 2:
        return f"print('noise {caller}')\nans = [{value}, 'x'][0]", value
    return f"x = {value}\nans = x / 0", None


def check(result: ExecResult | None, expected: Any, source: str = "") -> str | None:
    """Why the result is not the expected one (or ran in a tier other than the source's), or None."""
    if result is None:
        return "no result"
    if expected is None:
        return None if result.error_type == "ZeroDivisionError" else describe(result)
    if result.status is not Status.OK or result.value != expected:
        return describe(result)
    if result.isolation != ("fork" if "random" in source else "warm"):
        return f"ran in the {result.isolation} tier"
    return None


def run_callers(box: Sandbox, caller: Callable[[Sandbox, int], list[str]]) -> list[str]:
    with ThreadPoolExecutor(THREADS) as pool:
        failures = pool.map(lambda k: caller(box, k), range(THREADS))
    return [f for batch in failures for f in batch]


def one_at_a_time(box: Sandbox, caller: int) -> list[str]:
    failures = []
    for number in range(PER_CALLER):
        source, expected = program(caller, number)
        why = check(box.run(source), expected, source)
        if why:
            failures.append(f"caller {caller} program {number}: {why}")
    return failures


def in_batches(box: Sandbox, caller: int) -> list[str]:
    programs = [program(caller, number) for number in range(PER_CALLER)]
    results = list(box.run_many(source for source, _ in programs))
    assert len(results) == PER_CALLER
    return [
        f"caller {caller} program {n}: {why}"
        for n, (result, (source, expected)) in enumerate(zip(results, programs, strict=True))
        if (why := check(result, expected, source))
    ]


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("calls", [one_at_a_time, in_batches], ids=["run", "run_many"])
def test_threads_sharing_a_sandbox_get_their_own_results(box: Sandbox, calls: Callable[..., list[str]]) -> None:
    assert run_callers(box, calls) == []


@pytest.mark.parametrize("policy", POLICIES)
def test_asyncio_tasks_sharing_a_sandbox_get_their_own_results(box: Sandbox) -> None:
    async def single(caller: int, number: int) -> str | None:
        source, expected = program(caller, number)
        return check(await box.arun(source), expected, source)

    async def stream(caller: int) -> list[str | None]:
        programs = [program(caller, number) for number in range(PER_CALLER)]
        results = [result async for result in box.arun_many(source for source, _ in programs)]
        assert len(results) == PER_CALLER
        return [check(result, expected, source) for result, (source, expected) in zip(results, programs, strict=True)]

    async def everything() -> list[str | None]:
        singles = [single(caller, number) for caller in range(4) for number in range(PER_CALLER)]
        streams = [stream(caller) for caller in range(4, 8)]
        done = await asyncio.gather(*singles, *streams)
        return [why for item in done for why in (item if isinstance(item, list) else [item])]

    assert [why for why in asyncio.run(everything()) if why] == []


@pytest.mark.parametrize("policy", ["restricted"])
def test_threads_and_tasks_at_once(box: Sandbox) -> None:
    """An event loop's tasks and plain threads share the pool at the same time."""

    async def tasks() -> list[str]:
        programs = [program(100 + k, k) for k in range(PER_CALLER)]
        found = await asyncio.gather(*(box.arun(source) for source, _ in programs))
        return [
            why
            for result, (source, expected) in zip(found, programs, strict=True)
            if (why := check(result, expected, source))
        ]

    loop_failures: list[str] = []
    loop_thread = threading.Thread(target=lambda: loop_failures.extend(asyncio.run(tasks())))
    loop_thread.start()
    thread_failures = run_callers(box, in_batches)
    loop_thread.join()
    assert loop_failures == [] and thread_failures == []


@pytest.mark.parametrize("policy", ["restricted"])
def test_an_abandoned_stream_leaves_the_pool_clean(box: Sandbox) -> None:
    """A caller that stops reading halfway gives back what its stream held; the others go on."""
    results = box.run_many(f"ans = {k}" for k in range(500))
    assert [next(results).value for _ in range(3)] == [0, 1, 2]
    results.close()
    assert run_callers(box, in_batches) == []
    assert box._pool is not None and box._pool.held_bytes() == 0 and not box._pool._streams


@pytest.mark.parametrize("policy", ["restricted"])
def test_a_caller_whose_event_loop_closed_does_not_stop_the_dispatcher(box: Sandbox) -> None:
    """A task's stream is left open and its loop closed while programs are in flight: their results
    cannot be handed over; the stream is dropped and every other caller goes on."""
    loop = asyncio.new_event_loop()
    results = box.arun_many(["ans = 1"] + ["ans = sum(range(2_000_000))"] * 6)
    assert loop.run_until_complete(results.__anext__()).value == 1
    loop.close()
    assert run_callers(box, in_batches) == []
    assert box._pool is not None
    for _ in range(500):  # the dispatcher drops the stream when its last results arrive
        if not box._pool._streams:
            break
        threading.Event().wait(0.02)
    assert not box._pool._streams and box._pool.held_bytes() == 0


def test_closing_while_another_thread_runs_raises_there_and_does_not_hang() -> None:
    box = Sandbox(policy="trusted", workers=1, timeout=10, isolation="fork").start()
    errors: list[BaseException] = []

    def slow_caller() -> None:
        try:
            list(box.run_many(["import time\ntime.sleep(30)"] * 4))
        except SandboxUnavailable as exc:
            errors.append(exc)

    caller = threading.Thread(target=slow_caller)
    caller.start()
    while box.completed == 0 and not (box._pool and box._pool.slots and box._pool.slots[0].inflight):
        threading.Event().wait(0.01)
    box.close()
    caller.join(timeout=30)
    assert not caller.is_alive()
    assert len(errors) == 1 and "closed" in str(errors[0])
    assert box.run("ans = 1").value == 1  # a closed Sandbox starts again when used
    box.close()


@pytest.mark.parametrize("policy", ["restricted"])
def test_an_endless_loop_does_not_hold_back_the_calls_made_after_it(box: Sandbox) -> None:
    """A program waiting out its timeout holds back only the calls queued behind it on its worker:
    calls begun a second after it still finish before it does, each with its own value."""
    slow_done = threading.Event()
    began_at = time.monotonic()
    late: list[float] = []  # calls begun a second after the endless loop and finished before it
    faults: list[str] = []

    def slow() -> None:
        result = box.run("while True:\n    pass", timeout=2.0)
        if result.status is not Status.TIMEOUT:
            faults.append(f"the endless loop: {describe(result)}")
        slow_done.set()

    def quick(caller: int) -> None:
        number = 0
        while not slow_done.is_set():
            source, expected = program(caller, number)
            began = time.monotonic()
            why = check(box.run(source), expected, source)
            if why:
                faults.append(f"caller {caller} program {number}: {why}")
            if began - began_at > 1.0 and not slow_done.is_set():
                late.append(began)
            number += 1

    threads = [threading.Thread(target=slow)] + [threading.Thread(target=quick, args=(k,)) for k in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads) and slow_done.is_set()
    assert faults == []
    assert late, "no call begun a second after the endless loop finished before it"


# ------------------------------------------------------------------------------------------- rewards


def completion(caller: int, number: int) -> tuple[str, int, float]:
    """A completion, its gold, and the reward it must get (every third gold is wrong)."""
    value = caller * 1000 + number
    text = f"Let me compute.\n```python\ndef solution():\n    return {caller} * 1000 + {number}\n```"
    wrong = number % 3 == 0
    return text, value + (1 if wrong else 0), 0.0 if wrong else 1.0


def test_a_shared_reward_function_called_per_sample_from_many_threads() -> None:
    rewards.configure(workers=2)
    try:

        def caller(k: int) -> list[str]:
            failures = []
            for number in range(PER_CALLER):
                text, gold, expected = completion(k, number)
                got = rewards.pot_reward([text], answer=[gold])
                if got != [expected]:
                    failures.append(f"caller {k} completion {number}: {got} != {expected}")
            return failures

        with ThreadPoolExecutor(16) as pool:
            failures = [f for batch in pool.map(caller, range(16)) for f in batch]
        assert failures == []
    finally:
        rewards.close()


def test_an_async_reward_function_awaited_by_many_tasks() -> None:
    reward = rewards.make_reward_function(asynchronous=True)
    assert asyncio.iscoroutinefunction(reward) and reward.__name__ == "pot_reward"
    rewards.configure(workers=2)

    async def everything() -> list[tuple[list[float], float]]:
        items = [completion(k, n) for k in range(8) for n in range(20)]
        got = await asyncio.gather(*(reward([text], answer=[gold]) for text, gold, _ in items))
        return list(zip(got, (expected for _, _, expected in items), strict=True))

    try:
        assert all(got == [expected] for got, expected in asyncio.run(everything()))
    finally:
        rewards.close()


@pytest.mark.parametrize("policy", ["restricted"])
def test_streams_behind_a_slow_program_with_the_answer_budget_spent(
    box: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the bytes of held answers past the budget, the dispatcher reads only the workers that have
    a program some stream waits for: every stream still gets all of its results, right and in order."""
    import potrun.sandbox.parent.pool as pool_module

    monkeypatch.setattr(pool_module, "MAX_AHEAD_BYTES", 2_000)
    slow = "ans = sum(range(3_000_000)) * 0 + 7"

    def caller(box: Sandbox, k: int) -> list[str]:
        sources = [slow] + [f"ans = 'x' * 500 + '{k}-{n}'" for n in range(40)]
        results = list(box.run_many(sources))
        expected = [7] + ["x" * 500 + f"{k}-{n}" for n in range(40)]
        return [
            f"caller {k} program {n}" for n, (r, e) in enumerate(zip(results, expected, strict=True)) if r.value != e
        ]

    assert run_callers(box, caller) == []
    assert box._pool is not None and box._pool.held_bytes() == 0
