"""potrun's errors at every public edge (#40): a public function given a bad argument raises one of
potrun's errors (README, "Exit codes"; `potrun.types`' hierarchy), never Python's TypeError or
ValueError; and the service answers each error class with the status of the one table beside the
CLI's exit codes (`potrun.types.ERROR_STATUSES`, `ERROR_EXITS`), in every handler."""

from __future__ import annotations

import asyncio
import importlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

import potrun
from potrun import rewards
from potrun.integrations import openrlhf, verl
from potrun.types import (
    ERROR_EXITS,
    ERROR_STATUSES,
    BadRecord,
    ImageBuildError,
    InputError,
    PotrunError,
    SandboxUnavailable,
    UsageError,
    error_code,
)

RECORD = [{"program": "ans = 1", "answer": 1}]


def _box() -> potrun.Sandbox:
    return potrun.Sandbox(workers=1)  # nothing starts: each call below fails before a worker is needed


# Each public edge with a bad argument of the kinds a caller gets wrong: a wrong type, a text where a
# batch is due, a misspelt option or preset. Each raised a TypeError, ValueError, KeyError or
# AttributeError, or was accepted in silence, before.
BAD_CALLS: dict[str, Callable[[], Any]] = {
    "pass_at_k text": lambda: potrun.pass_at_k("3", 1, 1),  # type: ignore[arg-type]
    "pass_at_k k over n": lambda: potrun.pass_at_k(3, 1, 5),
    "pass_at_k bool": lambda: potrun.pass_at_k(3, True, 1),
    "parse_range int": lambda: potrun.parse_range(5),  # type: ignore[arg-type]
    "extract_program int": lambda: potrun.extract_program(5),  # type: ignore[arg-type]
    "extract_program bytes": lambda: potrun.extract_program(b"ans = 1"),  # type: ignore[arg-type]
    "CheckOptions presets text": lambda: potrun.CheckOptions(presets="default"),  # type: ignore[arg-type]
    "CheckOptions unknown preset": lambda: potrun.CheckOptions(presets=("nope",)),
    "CheckOptions unknown option": lambda: potrun.CheckOptions(compare_options={"rel_tole": 0.1}),
    "CheckOptions fields int": lambda: potrun.CheckOptions(code_fields=5),  # type: ignore[arg-type]
    "CheckOptions options list": lambda: potrun.CheckOptions(compare_options=[1]),  # type: ignore[arg-type]
    "check_records no options": lambda: potrun.check_records([], _box(), "x"),  # type: ignore[arg-type]
    "check_records no sandbox": lambda: potrun.check_records([], None, potrun.CheckOptions()),  # type: ignore[arg-type]
    "validate int": lambda: potrun.validate(5),  # type: ignore[arg-type]
    "validate slow_fraction text": lambda: potrun.validate(RECORD, slow_fraction="x"),  # type: ignore[arg-type]
    "validate unknown option": lambda: potrun.validate(RECORD, bogus=1),
    "Sandbox entry": lambda: _box().run("ans = 1", entry="nope"),
    "Sandbox entry int": lambda: _box().run("ans = 1", entry=5),  # type: ignore[arg-type]
    "Sandbox entry list": lambda: _box().request("ans = 1", entry=["auto"]),  # type: ignore[arg-type]
    "Sandbox run_many text": lambda: _box().run_many("ans = 1"),
    "Sandbox run_many int": lambda: _box().run_many(5),  # type: ignore[arg-type]
    "Sandbox arun_many text": lambda: asyncio.run(_first(_box().arun_many("ans = 1"))),
    "Sandbox from_config dict": lambda: potrun.Sandbox.from_config({}),  # type: ignore[arg-type]
    "Sandbox hash_seed text": lambda: potrun.Sandbox(hash_seed="1"),  # type: ignore[arg-type]
    "score_completions int": lambda: rewards.score_completions(5, 5),  # type: ignore[arg-type]
    "score_completions text": lambda: rewards.score_completions("ab", "ab"),
    "score_completions unknown preset": lambda: rewards.score_completions(["a"], [1], preset="nope", sandbox=_box()),
    "score_completions unknown option": lambda: rewards.score_completions(["a"], [1], bogus=1, sandbox=_box()),
    "score_completions scale keys": lambda: rewards.score_completions(["a"], [1], scale={"correct": 1}),
    "score_completions scale int": lambda: rewards.score_completions(["a"], [1], scale=5),  # type: ignore[arg-type]
    "reward_points scale typo": lambda: rewards.reward_points(scale={"correct": 1, "executed": 0, "faild": 0}),
    "reward_points scale nan": lambda: rewards.reward_points(
        scale={"correct": float("nan"), "executed": 0, "failed": 0}
    ),
    "configure typo": lambda: rewards.configure(timout=1),
    "make_reward_function gold_field int": lambda: rewards.make_reward_function(gold_field=5),  # type: ignore[arg-type]
    "make_reward_function mode": lambda: rewards.make_reward_function(mode="program"),
    "openrlhf score_queries int": lambda: openrlhf.score_queries(5, 5, 5),  # type: ignore[arg-type]
    "openrlhf make_reward_func typo": lambda: openrlhf.make_reward_func(timout=1),
    "verl batched int": lambda: verl.compute_score_batched(5, 5, 5),  # type: ignore[arg-type]
    "verl batched scale": lambda: verl.compute_score_batched(["x"], ["a"], [1], scale={"a": 1}),
}


async def _first(results: Any) -> Any:
    async for result in results:
        return result


@pytest.mark.parametrize("name", sorted(BAD_CALLS))
def test_a_public_edge_given_a_bad_argument_raises_a_usage_error(name: str) -> None:
    with pytest.raises(UsageError):
        BAD_CALLS[name]()


# -- the two tables ----------------------------------------------------------------------------------------

ERRORS: list[PotrunError] = [
    UsageError("a bad option"),
    InputError("an unreadable file"),
    BadRecord(3, "a bad record", "answer"),
    SandboxUnavailable("no sandbox here"),
    ImageBuildError("a build step failed"),
    PotrunError("potrun's own"),
]
EXPECTED_STATUSES = {UsageError: 400, InputError: 400, BadRecord: 400, SandboxUnavailable: 503}
EXPECTED_STATUSES |= {ImageBuildError: 500, PotrunError: 400}
EXPECTED_EXITS = {UsageError: 2, InputError: 2, BadRecord: 2, SandboxUnavailable: 3, ImageBuildError: 1, PotrunError: 2}


def test_every_error_class_has_its_code_in_both_tables() -> None:
    classes = {UsageError, InputError, SandboxUnavailable, ImageBuildError, PotrunError}
    assert set(ERROR_STATUSES) == set(ERROR_EXITS) == classes
    for error in ERRORS:
        assert error_code(error, ERROR_STATUSES) == EXPECTED_STATUSES[type(error)]
        assert error_code(error, ERROR_EXITS) == EXPECTED_EXITS[type(error)]


def test_the_cli_reads_the_same_table() -> None:
    from potrun import cli

    assert cli.ERROR_EXITS is ERROR_EXITS
    assert [cli.error_exit(error) for error in ERRORS] == [EXPECTED_EXITS[type(error)] for error in ERRORS]


# -- the service, for real on 127.0.0.1 ----------------------------------------------------------------------

starlette = pytest.importorskip("starlette", reason="the serve extra: pip install 'potrun[serve]'")
uvicorn = pytest.importorskip("uvicorn", reason="the serve extra: pip install 'potrun[serve]'")


@pytest.fixture(scope="module")
def served() -> Iterator[str]:
    """The service's app under uvicorn in this process (so that a test can make a handler's callee
    raise), on a free loopback port."""
    from potrun.sandbox.config import SandboxConfig
    from potrun.service.app import ServiceConfig, make_app

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    app = make_app(ServiceConfig(SandboxConfig(policy="trusted", workers=1, timeout=2, memory_mb=512)))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the service did not start"
        time.sleep(0.05)
    yield url
    server.should_exit = True
    thread.join(30)


def _raising(error: PotrunError) -> Callable[..., Any]:
    def raise_it(*args: Any, **kwargs: Any) -> Any:
        raise error

    return raise_it


# Each route with a JSON body, and the callee of its handler that a test makes raise.
ROUTES = {
    "/v1/score": ("potrun.service.app", "iter_records", {"completions": ["ans = 1"], "golds": [1]}),
    "/v1/run": ("potrun.service.app.Service", "_run_requests", {"programs": ["ans = 1"]}),
    "/openrlhf/reward": ("potrun.integrations.openrlhf", "reward_payload", {"query": ["a"], "labels": [1]}),
}


@pytest.mark.parametrize("route", sorted(ROUTES))
@pytest.mark.parametrize("error", ERRORS, ids=[type(error).__name__ for error in ERRORS])
def test_each_handler_answers_each_error_with_its_status(
    served: str, route: str, error: PotrunError, monkeypatch: pytest.MonkeyPatch
) -> None:
    where, name, body = ROUTES[route]
    module = where.removesuffix(".Service")
    target = importlib.import_module(module)
    monkeypatch.setattr(target.Service if where.endswith(".Service") else target, name, _raising(error))
    answer = httpx.post(served + route, json=body, timeout=30)
    assert answer.status_code == EXPECTED_STATUSES[type(error)], answer.text
    assert answer.json() == {"error": str(error)}


@pytest.mark.parametrize(
    "route, body",
    [
        ("/v1/run", {"programs": "ans = 1"}),
        ("/v1/run", {"programs": [5]}),
        ("/v1/run", {"programs": [{"entry": "auto"}]}),  # no code: was a KeyError
        ("/v1/run", {"programs": ["ans = 1"], "entry": "nope"}),
        ("/v1/score", {"completions": ["a"], "golds": [1], "scale": {"correct": 1}}),
        ("/v1/score", {"completions": ["a"], "golds": [1], "preset": "nope"}),
        ("/v1/score", {"completions": ["a"], "golds": [1], "compare_options": {"rel_tole": 1}}),
        ("/openrlhf/reward", {"query": "a", "labels": [1]}),
    ],
)
def test_bad_bodies_are_a_400_from_potrun_own_errors(served: str, route: str, body: Any) -> None:
    answer = httpx.post(served + route, json=body, timeout=30)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]
