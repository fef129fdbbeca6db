"""Caches hold only verdicts a program earns alone (issue 35, class 2): no `crashed`, `memory_limit`,
`sandbox_error` or unconfirmed timeout enters the rewards' cache or the service's, and the service's
cache is per client (credentials and address), tested with two real clients on 127.0.0.1/127.0.0.2."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator

import httpx
import pytest

from potrun import rewards
from potrun.check.cache import ResultCache, cacheable
from potrun.types import ExecResult, Status

# A program for each status, under the trusted policy (the OS boundary decides), and whether the
# status is one the program earns alone.
PROGRAMS = {
    "ok": ("ans = 7", True),
    "wrong": ("ans = 8", True),
    "error": ("ans = 1 / 0", True),
    "memory": ("x = bytearray(900 * 1024 * 1024)\nans = 7", False),
    "crash": ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", False),
    "cpu-timeout": ("while True:\n    pass", None),  # None: cached only once the pool confirmed it
}


@pytest.fixture(autouse=True, scope="module")
def shared_sandbox() -> Iterator[None]:
    rewards.configure(workers=1, timeout=0.5, memory_mb=512, policy="trusted")
    yield
    rewards.close()


def test_the_cache_keeps_no_status_a_neighbour_or_the_machine_can_cause() -> None:
    cache = ResultCache()
    for status in Status:
        for attempts in (1, 2):
            result = ExecResult(status, attempts=attempts, timeout_kind="cpu" if status is Status.TIMEOUT else None)
            key = f"{status.value}-{attempts}".encode()
            cache.put(key, result)
            assert (cache.get(key) is not None) == cacheable(result)
    assert not cacheable(ExecResult(Status.CRASHED)) and not cacheable(ExecResult(Status.MEMORY_LIMIT))
    assert not cacheable(ExecResult(Status.SANDBOX_ERROR)) and not cacheable(ExecResult(Status.TIMEOUT))
    assert cacheable(ExecResult(Status.TIMEOUT, attempts=2))  # the pool confirmed it under a wider net


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_rewards_cache_serves_again_only_what_a_program_earned_alone(seed: int) -> None:
    """Generated batches (seeded: which programs, in which order): the second call's cache hits are
    exactly the programs of a status a program earns alone."""
    rng = random.Random(seed)
    names = rng.sample(sorted(PROGRAMS), rng.randint(2, len(PROGRAMS)))
    box = rewards._shared_sandbox()
    box.cache = ResultCache()  # each seed starts empty
    first = rewards.score_records([PROGRAMS[n][0] for n in names], [7] * len(names))
    for name, record in zip(names, first, strict=True):
        if PROGRAMS[name][1] is not None:
            assert (record.status in ("ok", "error")) == PROGRAMS[name][1], (name, record.status)
    for name in names:
        before = box.hits
        rewards.score_records([PROGRAMS[name][0]], [7])
        # A timeout: the pool confirms one the load may have caused (a second run, attempts 2), and
        # only that one is kept (the unit test above); on an idle machine the CPU limit decides at once.
        if PROGRAMS[name][1] is not None:
            assert box.hits - before == int(PROGRAMS[name][1]), name


# -- the service: two clients, one cache each ---------------------------------------------------------

pytest.importorskip("starlette", reason="the serve extra: pip install 'potrun[serve]'")


@pytest.fixture(scope="module")
def service() -> Iterator[str]:
    import served

    started = served.start_service("--timeout", "0.5")
    yield started.url
    assert started.stop() == served.STOPPED


def _score(url: str, programs: list[str], local_address: str) -> list[dict[str, object]]:
    transport = httpx.HTTPTransport(local_address=local_address)
    with httpx.Client(transport=transport, timeout=60) as client:
        answer = client.post(f"{url}/v1/score", json={"completions": programs, "golds": [7] * len(programs)})
    assert answer.status_code == 200, answer.text
    return [json.loads(line) for line in answer.text.splitlines() if line.strip()]


def test_the_service_s_cache_is_per_client_and_keeps_only_earned_results(service: str) -> None:
    """A result served from the cache is the first run's, timings included: the same wall_s and value
    (a clock read in ns) again means a hit, different ones a run."""
    clock = "import time\nans = time.time_ns()"
    first = _score(service, [clock], "127.0.0.1")[0]
    again = _score(service, [clock], "127.0.0.1")[0]
    other = _score(service, [clock], "127.0.0.2")[0]
    assert again["value"] == first["value"]  # the same client: served from its cache
    assert other["value"] != first["value"]  # another client: never from the first one's
    for name in ("memory", "crash"):
        source = PROGRAMS[name][0]
        runs = [_score(service, [source], "127.0.0.1")[0] for _ in range(2)]
        assert runs[0]["status"] != "ok", runs
        assert (runs[0]["wall_s"], runs[0]["cpu_s"]) != (runs[1]["wall_s"], runs[1]["cpu_s"]), name
