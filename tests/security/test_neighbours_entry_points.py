"""The neighbours invariant through the entry points that keep state across calls (issue 35): the
rewards' shared sandbox and dedup cache (`potrun.rewards`), and `potrun serve` with two clients.

The victims and aggressors are tests/security/test_neighbours.py's generated programs. Each pair is drawn by a
seeded generator (POTRUN_NEIGHBOURS_SEED): the victim's record alone must equal its record right after
the aggressor in the same one-worker pool, and again when asked a second time (from the cache, where its
result was one the program earned alone). Through the service the aggressor comes from one client and the
victim from another, each victim under credentials of its own (the service's cache is per client), so
every victim runs.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from test_neighbours import MEMORY_MB, SEED, Program, _victims, generated_aggressors

from potrun import rewards
from potrun.check.cache import ResultCache
from potrun.check.pipeline import RecordResult

PAIRS = 24
TIMEOUT_S = 2.0  # one limit for every program of an entry point: far above any victim's CPU time


def drawn_pairs(seed: int, count: int, trusted: bool) -> list[tuple[Program, Program]]:
    """`count` (aggressor, victim) pairs, drawn: every aggressor kind in turn, a victim at random (the
    trusted-only victims where the policy is trusted)."""
    rng = random.Random(seed)
    victims = [v for v in _victims(random.Random(seed)) if trusted or not v.kind.startswith("trusted")]
    aggressors = generated_aggressors(seed, count)
    return [(aggressor, rng.choice(victims)) for aggressor in aggressors]


def record_key(record: RecordResult | dict[str, Any]) -> tuple[object, ...]:
    """What must not depend on a neighbour: status, value, verdict and error type (a timeout by its
    status alone: the wall net may strike first on a loaded machine)."""
    data = record if isinstance(record, dict) else record.to_json()
    if data["status"] == "timeout":
        return ("timeout",)
    return (data["status"], json.dumps(data["value"]), data["correct"], data["error_type"])


# ----------------------------------------------------------------------------------------- rewards


@pytest.fixture(scope="module")
def rewards_sandbox() -> Iterator[None]:
    rewards.configure(workers=1, timeout=TIMEOUT_S, memory_mb=MEMORY_MB)
    yield
    rewards.close()


@pytest.mark.slow
def test_a_reward_alone_equals_the_reward_after_any_aggressor(rewards_sandbox: None) -> None:
    box = rewards._shared_sandbox()
    failures = []
    for number, (aggressor, victim) in enumerate(drawn_pairs(SEED, PAIRS, trusted=False)):
        box.cache = ResultCache()  # the victim runs alone, for real
        alone = rewards.score_records([victim.source], [0])[0]
        gold = alone.value if alone.status == "ok" else 0
        alone = rewards.score_records([victim.source], [gold])[0]
        box.cache = ResultCache()  # ...and right after the aggressor, for real
        after = rewards.score_records([aggressor.source, victim.source], [0, gold])[1]
        again = rewards.score_records([victim.source], [gold])[0]  # from the cache, if it kept the result
        if not record_key(alone) == record_key(after) == record_key(again):
            failures.append(
                f"seed {SEED} pair {number}: {victim}\n  after {aggressor}\n"
                f"  alone {record_key(alone)}, after {record_key(after)}, again {record_key(again)}"
            )
    assert not failures, f"{len(failures)} of {PAIRS} pairs differ:\n" + "\n".join(failures[:6])


# ----------------------------------------------------------------------------------------- service

pytest.importorskip("starlette", reason="the serve extra: pip install 'potrun[serve]'")


@pytest.fixture(scope="module")
def one_worker_service() -> Iterator[str]:
    import served

    started = served.start_service("--sandbox-workers", "1", "--timeout", str(TIMEOUT_S), "--memory", str(MEMORY_MB))
    yield started.url
    assert started.stop() == served.STOPPED


def _score(url: str, source: str, gold: object, address: str, credentials: str) -> dict[str, Any]:
    transport = httpx.HTTPTransport(local_address=address)
    headers = {"Authorization": f"Bearer {credentials}"}
    with httpx.Client(transport=transport, headers=headers, timeout=120) as client:
        answer = client.post(f"{url}/v1/score", json={"completions": [source], "golds": [gold]})
    assert answer.status_code == 200, answer.text
    records: list[dict[str, Any]] = [json.loads(line) for line in answer.text.splitlines() if line.strip()]
    return records[0]


@pytest.mark.slow
def test_a_client_s_reward_alone_equals_it_after_another_client_s_aggressor(one_worker_service: str) -> None:
    url = one_worker_service
    failures = []
    for number, (aggressor, victim) in enumerate(drawn_pairs(SEED + 100, PAIRS // 2, trusted=True)):
        probe = _score(url, victim.source, 0, "127.0.0.2", f"alone-probe-{number}")
        gold = probe["value"] if probe["status"] == "ok" else 0
        alone = _score(url, victim.source, gold, "127.0.0.2", f"alone-{number}")
        _score(url, aggressor.source, 0, "127.0.0.1", "aggressor")
        after = _score(url, victim.source, gold, "127.0.0.2", f"victim-{number}")
        if record_key(alone) != record_key(after):
            failures.append(
                f"seed {SEED + 100} pair {number}: {victim}\n  after {aggressor}\n"
                f"  alone {record_key(alone)}, after {record_key(after)}"
            )
    assert not failures, f"{len(failures)} of {PAIRS // 2} pairs differ:\n" + "\n".join(failures[:6])
