"""The idiom corpus (issue 37, item 3): the restricted policy admits the everyday Python models write and
refuses exactly the reviewed set (`tests/policies/idioms.py` says why each refused one stays refused).

Each idiom runs in a fork under the restricted policy (so the policy, not the warm tier's verifier,
decides), on both backends; an admitted idiom gives the value plain Python gives, and the same value as
under the trusted policy. The shared data's programs (DocMath-Eval, the peers' cases; the PoT files with
`-m slow`, on docker a seeded sample of them) are refused exactly where reviewed.
`python bench/idiom_corpus.py` prints the share refused.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator

import pytest
from idioms import IDIOMS, REFUSED_DATA, Idiom, data_programs

from potrun import Sandbox


@pytest.fixture(scope="module")
def fork_boxes(backend: str) -> Iterator[dict[str, Sandbox]]:
    """A restricted and a trusted sandbox of the backend, each program in its own fork."""
    boxes = {
        policy: Sandbox(backend, policy=policy, isolation="fork", workers=2, timeout=10.0, memory_mb=1024)
        for policy in ("restricted", "trusted")
    }
    try:
        for box in boxes.values():
            box.start()
        yield boxes
    finally:
        for box in boxes.values():
            box.close()


def test_the_idioms_get_their_reviewed_verdict(fork_boxes: dict[str, Sandbox]) -> None:
    restricted = list(fork_boxes["restricted"].run_many([idiom.source for idiom in IDIOMS]))
    trusted = list(fork_boxes["trusted"].run_many([idiom.source for idiom in IDIOMS]))
    wrong = []
    for idiom, result, plain in zip(IDIOMS, restricted, trusted, strict=True):
        if not _as_reviewed(idiom, result.status.value, result.value, plain.value):
            wrong.append(
                f"{idiom.id}: {result.status.value} {result.value!r} ({result.error}); trusted {plain.value!r}"
            )
    assert not wrong, "\n".join(wrong)


def _as_reviewed(idiom: Idiom, status: str, value: object, trusted_value: object) -> bool:
    if idiom.expect == "refused":
        return status == "policy_violation"
    return status == "ok" and value == trusted_value and (idiom.value is None or value == idiom.value)


def test_every_refused_idiom_says_why() -> None:
    for idiom in IDIOMS:
        assert (idiom.expect == "refused") == bool(idiom.reason), idiom.id
    assert len({idiom.id for idiom in IDIOMS}) == len(IDIOMS)
    assert sum(idiom.expect == "ok" for idiom in IDIOMS) >= 70


# The docker backend runs the same policy code (its image carries the code's digest): there the PoT files'
# 2,320 programs, each in a fork of a container, are a seeded sample (every reviewed refusal among them,
# and a share of the rest drawn anew by each seed), where the process backend runs them all.
DOCKER_SAMPLE_SHARE = 0.15
SAMPLE_SEED = int(os.environ.get("POTRUN_IDIOMS_SEED", "37"))


def _programs(box: Sandbox, *, pot: bool) -> list[tuple[str, str]]:
    programs = list(data_programs(pot=pot))
    if box.backend_name == "process" or not pot:
        return programs
    draw = random.Random(SAMPLE_SEED)
    return [(pid, source) for pid, source in programs if pid in REFUSED_DATA or draw.random() < DOCKER_SAMPLE_SHARE]


def _refused_data(programs: list[tuple[str, str]], box: Sandbox) -> set[str]:
    results = box.run_many([source for _, source in programs])
    return {
        pid for (pid, _), result in zip(programs, results, strict=True) if result.status.value == "policy_violation"
    }


def _reviewed(programs: list[tuple[str, str]]) -> set[str]:
    return set(REFUSED_DATA) & {pid for pid, _ in programs}


def test_the_data_programs_are_refused_only_where_reviewed(fork_boxes: dict[str, Sandbox]) -> None:
    programs = _programs(fork_boxes["restricted"], pot=False)
    assert _refused_data(programs, fork_boxes["restricted"]) == _reviewed(programs)


@pytest.mark.slow
def test_the_pot_programs_are_refused_only_where_reviewed(fork_boxes: dict[str, Sandbox]) -> None:
    programs = _programs(fork_boxes["restricted"], pot=True)
    assert _refused_data(programs, fork_boxes["restricted"]) == _reviewed(programs)
