"""Small reward calls from many threads, combined into a few shared streams (potrun.combine).

Every call scores records whose right result is known from the call itself (its caller and number), so
a result handed to the wrong caller, out of order, lost or doubled shows as a wrong verdict. Real
worker processes throughout; the pool's handling of PAUSE alone is also checked on the fake backend.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from potrun import SandboxUnavailable, rewards
from potrun.cache import CachedSandbox
from potrun.combine import Combiner
from potrun.pipeline import CheckOptions, check_records
from potrun.records import Record
from potrun.sandbox.api import Sandbox
from potrun.sandbox.fake import FakeBackend
from potrun.sandbox.pool import Pool
from potrun.sandbox.protocol import PAUSE, RunRequest, StreamRequest
from potrun.types import ExecResult, Status, UsageError

OPTIONS = CheckOptions(code_fields=("output",), gold_fields=("gold",), id_fields=(), presets=("default",))


def record(caller: int, number: int, line: int = 1) -> tuple[Record, str, bool]:
    """A record, the status it must get and whether it must be correct: right and wrong golds, a
    program that raises, a fork (an import that is not pure), prose with no program in it."""
    value = caller * 1000 + number
    kind = number % 5
    if kind == 0:
        text, gold, status, correct = f"```python\ndef solution():\n    return {value}\n```", value, "ok", True
    elif kind == 1:
        text, gold, status, correct = f"```python\ndef solution():\n    return {value}\n```", value + 1, "ok", False
    elif kind == 2:
        text, gold, status, correct = f"```python\nx = {value}\nans = x / 0\n```", value, "error", False
    elif kind == 3:
        text = f"```python\nimport random\nans = random.Random(1).randint(0, 0) + {value}\n```"
        gold, status, correct = value, "ok", True
    else:
        text, gold, status, correct = f"I think it is {value}.", value, "syntax_error", False
    return Record(line, {"output": text, "gold": gold}), status, correct


@pytest.fixture(scope="module")
def box() -> Iterator[CachedSandbox]:
    with CachedSandbox(Sandbox(policy="restricted", workers=2)) as sandbox:
        yield sandbox


def hammer(combiner: Combiner, threads: int, calls: int, size: int) -> list[str]:
    """`threads` threads each making `calls` calls of `size` records; the faults found."""
    faults: list[str] = []

    def caller(k: int) -> None:
        for n in range(calls):
            expected = [record(k, n * size + j, line=j + 1) for j in range(size)]
            results = combiner.score([r for r, _, _ in expected])
            if len(results) != size:
                faults.append(f"caller {k} call {n}: {len(results)} results for {size} records")
                continue
            for j, (result, (_, status, correct)) in enumerate(zip(results, expected, strict=True)):
                if (result.status, result.correct, result.line) != (status, correct, j + 1):
                    faults.append(f"caller {k} call {n} record {j}: {result.status} {result.correct} {result.line}")

    workers = [threading.Thread(target=caller, args=(k,)) for k in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return faults


@pytest.mark.parametrize(("threads", "size", "lanes", "window"), [(16, 1, 3, 16), (8, 3, 2, 4), (32, 1, 1, 2)])
def test_every_caller_gets_its_own_results_in_order(
    box: CachedSandbox, threads: int, size: int, lanes: int, window: int
) -> None:
    combiner = Combiner(box, OPTIONS, lanes=lanes, window=window)
    try:
        assert hammer(combiner, threads, calls=25, size=size) == []
    finally:
        combiner.close()


def test_a_slow_program_does_not_gather_every_caller_behind_it(box: CachedSandbox) -> None:
    """A program that waits out its timeout holds back only the calls in its own lane: calls begun
    long after it (when a lane that went on taking calls would hold every caller) still finish first."""
    slow_box = CachedSandbox(Sandbox(policy="restricted", workers=2, timeout=3))
    slow_combiner = Combiner(slow_box.start(), OPTIONS, lanes=2, window=64)
    slow_done = threading.Event()
    slow_began = time.monotonic()
    finished_late: list[float] = []  # calls begun a second after the slow one, done before it

    def slow() -> None:
        spin = Record(1, {"output": "```python\nwhile True:\n    pass\n```", "gold": 1})
        assert slow_combiner.score([spin])[0].status == "timeout"
        slow_done.set()

    def quick(k: int) -> None:
        n = 0
        while not slow_done.is_set():
            item, status, correct = record(k, n)
            began = time.monotonic()
            result = slow_combiner.score([item])[0]
            assert (result.status, result.correct) == (status, correct)
            if began - slow_began > 1.0 and not slow_done.is_set():
                finished_late.append(began)
            n += 1

    threads = [threading.Thread(target=slow)] + [threading.Thread(target=quick, args=(k,)) for k in range(32)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert slow_done.is_set() and not any(thread.is_alive() for thread in threads)
        assert finished_late, "no call begun a second after the slow program finished before it"
    finally:
        slow_combiner.close()
        slow_box.close()


def test_a_closed_sandbox_fails_the_calls_and_none_hangs() -> None:
    sandbox = CachedSandbox(Sandbox(policy="restricted", workers=1, timeout=10)).start()
    combiner = Combiner(sandbox, OPTIONS, lanes=2, window=4)
    outcomes: list[str] = []
    lock = threading.Lock()

    def caller(k: int) -> None:
        for n in range(200):
            try:
                combiner.score([record(k, n)[0]])
            except SandboxUnavailable:
                with lock:
                    outcomes.append("unavailable")
                return
        with lock:
            outcomes.append("done")

    threads = [threading.Thread(target=caller, args=(k,)) for k in range(6)]
    for thread in threads:
        thread.start()
    while sandbox.sandbox.completed < 20:
        time.sleep(0.01)
    sandbox.close()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads)
    assert len(outcomes) == 6 and "unavailable" in outcomes
    combiner.close()
    with pytest.raises(SandboxUnavailable):
        combiner.score([record(0, 0)[0]])


def test_calls_queued_before_close_are_answered(box: CachedSandbox) -> None:
    combiner = Combiner(box, OPTIONS, lanes=1, window=2)
    answers: list[list[str]] = []

    def caller(k: int) -> None:
        answers.append([r.status for r in combiner.score([record(k, n)[0] for n in range(3)])])

    threads = [threading.Thread(target=caller, args=(k,)) for k in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    combiner.close()
    assert answers == [["ok", "ok", "error"]] * 6
    assert combiner.score([]) == []


# ------------------------------------------------------------------------------ PAUSE through the layers


def test_the_pool_asks_a_paused_source_again_and_keeps_its_order() -> None:
    def value_of(request: RunRequest) -> ExecResult:
        return ExecResult(Status.OK, value=int(request.source.split("=")[1]), value_type="int")

    pool = Pool(FakeBackend(value_of), 2)
    pool.start()
    try:
        asked: list[int] = []

        def source() -> Iterator[StreamRequest]:
            for n in range(50):
                asked.append(n)
                yield RunRequest(source=f"ans = {n}")
                if n % 7 == 0:
                    yield PAUSE
                if n % 11 == 0:
                    yield None

        results = list(pool.run_many(source()))
        expected = []
        for n in range(50):
            expected.append(n)
            if n % 11 == 0:
                expected.append(None)
        assert [r.value if r is not None else None for r in results] == expected
        assert asked == list(range(50))
    finally:
        pool.close()


def test_check_records_passes_pause_through_the_cache_and_the_plans(box: CachedSandbox) -> None:
    items = [record(0, n, line=n + 1) for n in range(20)]
    stream = [x for n, (r, _, _) in enumerate(items) for x in ([r, PAUSE] if n % 3 == 0 else [r])]
    # a PAUSE with nothing due makes the stream ask again at once: each is followed by more records
    results = list(check_records(stream, box, OPTIONS))
    assert [(r.status, r.correct) for r in results] == [(s, c) for _, s, c in items]


# ------------------------------------------------------------------------------------- the reward path


def test_small_reward_calls_with_other_options_get_combiners_of_their_own() -> None:
    rewards.configure(workers=2)
    try:
        text = "```python\ndef solution():\n    return 1.0\n```"
        assert rewards.pot_reward([text], answer=[1.00001]) == [1.0]  # within the default tolerance
        strict = rewards.make_reward_function(rel_tol=0.0)
        assert strict([text], answer=[1.00001]) == [0.0]
        assert strict([text], answer=[1.0]) == [1.0]
        assert len(rewards._state["combiners"]) == 2
        with pytest.raises(UsageError):  # checked when its combiner is made, before anything is queued
            rewards.score_completions([text], [1], rel_tol="x")
        assert rewards._options_key("pot", "default", {"rel_tol": [0.1]}) is None
        with pytest.raises(UsageError):  # not hashable: it runs as a stream of its own, and is checked
            rewards.score_completions([text], [1], rel_tol=[0.1])
    finally:
        rewards.close()
    assert rewards._state["combiners"] == {}
