"""The idiom corpus (issue 37, item 3): the restricted policy admits the everyday Python models write and
refuses exactly the reviewed set (`tests/policies/idioms.py` says why each refused one stays refused).

Each idiom runs in a fork under the restricted policy (so the policy, not the warm tier's verifier,
decides), on both backends; an admitted idiom gives the value plain Python gives, and the same value as
under the trusted policy. The shared data's programs (DocMath-Eval, the peers' cases; the PoT files with
`-m slow`) are refused exactly where reviewed. `python bench/idiom_corpus.py` prints the share refused.
"""

from __future__ import annotations

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


def _refused_data(box: Sandbox, *, pot: bool) -> set[str]:
    programs = list(data_programs(pot=pot))
    results = box.run_many([source for _, source in programs])
    return {
        pid for (pid, _), result in zip(programs, results, strict=True) if result.status.value == "policy_violation"
    }


def _reviewed(*, pot: bool) -> set[str]:
    return {pid for pid in REFUSED_DATA if pot or not pid.startswith(("gsm8k:", "svamp:"))}


def test_the_data_programs_are_refused_only_where_reviewed(fork_boxes: dict[str, Sandbox]) -> None:
    assert _refused_data(fork_boxes["restricted"], pot=False) == _reviewed(pot=False)


@pytest.mark.slow
def test_the_pot_programs_are_refused_only_where_reviewed(fork_boxes: dict[str, Sandbox]) -> None:
    assert _refused_data(fork_boxes["restricted"], pot=True) == _reviewed(pot=True)
