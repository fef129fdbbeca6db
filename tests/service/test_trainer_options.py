"""Issue 37, item 3: a trainer's options are never dropped in silence.

verl's reward_kwargs, OpenRLHF's and TRL's options: an unknown key is a UsageError naming it and the
closest known one; the shared sandbox's limits and workers come from the trainer's config; verl's
`data_source` chooses the scoring by a mapping the user gives. Each trainer's call is reproduced from its
source as tests/service/test_integrations.py does (verl b178a3cd: verl/trainer/ppo/reward.py get_custom_reward_fn
merges the config's reward_kwargs into every call; the naive manager calls by keyword, prime's
positionally from a process pool, the reward loop adds reward_router_address and reward_model_tokenizer)."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import pytest

from potrun import UsageError, rewards
from potrun.integrations import openrlhf
from potrun.sandbox.api import SandboxConfig

FENCE = "```"
PROGRAM = f"Natalia sold 48+24 clips.\n{FENCE}python\nans = 48 + 24\n{FENCE}"
PROSE = "48 + 24 = 72. The answer is 72."
ENDLESS = f"{FENCE}python\nwhile True:\n    pass\n{FENCE}"


@pytest.fixture(autouse=True, scope="module")
def shared_sandbox() -> Iterator[None]:
    rewards.configure(workers=1, timeout=2.0, memory_mb=512)
    yield
    rewards.close()


def call_with_kwargs(raw_fn: Callable[..., Any], extra_kwargs: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
    """verl/trainer/ppo/reward.py:42-48."""
    return raw_fn(*args, **{**kwargs, **extra_kwargs})


def load_verl_reward(name: str, reward_kwargs: dict[str, Any]) -> Callable[..., Any]:
    """verl/trainer/ppo/reward.py:80-96 with a "pkg://" path: the function in a partial that merges
    the config's reward_kwargs into every call."""
    raw_fn = getattr(importlib.import_module("potrun.integrations.verl"), name)
    assert not inspect.iscoroutinefunction(raw_fn)
    return partial(call_with_kwargs, raw_fn, reward_kwargs)


def naive_call(compute_score: Callable[..., Any], response: str, gold: str, data_source: str = "openai/gsm8k") -> Any:
    """verl/workers/reward_manager/naive.py: one keyword call per response."""
    extra_info = {"index": 0, "num_turns": None, "rollout_reward_scores": {}}
    return compute_score(data_source=data_source, solution_str=response, ground_truth=gold, extra_info=extra_info)


@pytest.mark.parametrize(
    ("reward_kwargs", "named", "suggested"),
    [
        ({"shapped": True}, "shapped", "shaped"),
        ({"timout": 1}, "timout", "timeout"),
        ({"detials": True}, "detials", "details"),
        ({"compare": {"abs_valu": True}}, "abs_valu", "abs_value"),
        ({"preset": "pot", "compare": {"rel_tol": 0.1}}, "rel_tol", None),
        ({"by_data_source": {"openai/gsm8k": {"presett": "pot"}}}, "presett", "preset"),
    ],
)
def test_verl_unknown_reward_kwargs_are_usage_errors_naming_the_closest(
    reward_kwargs: dict[str, Any], named: str, suggested: str | None
) -> None:
    for name in ("compute_score", "compute_score_batched"):
        compute_score = load_verl_reward(name, reward_kwargs)
        with pytest.raises(UsageError, match=repr(named)) as raised:
            if name == "compute_score":
                naive_call(compute_score, PROGRAM, "72")
            else:  # verl/workers/reward_manager/batch.py: keyword lists
                compute_score(
                    data_sources=["openai/gsm8k"], solution_strs=[PROGRAM], ground_truths=["72"], extra_infos=[{}]
                )
        if suggested is not None:
            assert f"did you mean {suggested!r}" in str(raised.value)


def test_verl_keeps_accepting_its_own_keywords() -> None:
    """The reward loop's call: reward_router_address and reward_model_tokenizer beside the kwargs."""
    compute_score = load_verl_reward("compute_score", {"shaped": True})
    extra = {"reward_router_address": "127.0.0.1:1", "reward_model_tokenizer": None}
    assert (
        compute_score(data_source="openai/gsm8k", solution_str=PROGRAM, ground_truth="72", extra_info={}, **extra)
        == 1.0
    )


def test_verl_reward_kwargs_set_the_shared_sandboxs_limits() -> None:
    """`timeout: 1` in reward_kwargs is the CPU limit the endless program meets (it was ignored: the
    default 20 s); the sandbox is started once for the config, and kept across calls."""
    compute_score = load_verl_reward("compute_score", {"details": True, "timeout": 1.0, "workers": 1})
    result = naive_call(compute_score, ENDLESS, "72")
    assert result["status"] == "timeout"
    assert rewards._state["config"] == SandboxConfig(timeout=1.0, workers=1)
    box = rewards._state["box"]
    assert naive_call(compute_score, PROGRAM, "72")["score"] == 1.0
    assert rewards._state["box"] is box  # the same options: the running sandbox is kept
    rewards.configure(workers=1, timeout=2.0, memory_mb=512)


def test_verl_data_source_dispatches_by_the_users_mapping() -> None:
    """A dataset mixing a PoT benchmark and a chain-of-thought one, each scored by its own rule."""
    mapping = {"openai/gsm8k": "default", "math_cot": {"mode": "cot"}}
    compute_score = load_verl_reward("compute_score_batched", {"by_data_source": mapping})
    scores = compute_score(
        data_sources=["openai/gsm8k", "math_cot", "openai/gsm8k", "math_cot"],
        solution_strs=[PROGRAM, PROSE, PROSE, PROGRAM],
        ground_truths=["72", "72", "72", "72"],
        extra_infos=[{}] * 4,
    )
    assert scores == [1.0, 1.0, 0.0, 0.0]  # prose is no program; a program is no stated answer
    single = load_verl_reward("compute_score", {"by_data_source": mapping})
    assert naive_call(single, PROSE, "72", data_source="math_cot") == 1.0
    with pytest.raises(UsageError, match="'other/source' is not in by_data_source"):
        naive_call(single, PROSE, "72", data_source="other/source")
    fallback = load_verl_reward("compute_score", {"by_data_source": {**mapping, "*": {"mode": "cot"}}})
    assert naive_call(fallback, PROSE, "72", data_source="other/source") == 1.0


def test_verl_prime_manager_positional_call_checks_the_kwargs_too() -> None:
    """verl/workers/reward_manager/prime.py: `evaluation_func(data_source, solution_str, ground_truth,
    extra_info)` positionally, the config's kwargs merged."""
    compute_score = load_verl_reward("compute_score", {"shapped": True})
    with pytest.raises(UsageError, match="'shaped'"):
        compute_score("openai/gsm8k", PROGRAM, "72", None)


def test_openrlhf_options_are_checked_when_the_function_is_made() -> None:
    with pytest.raises(UsageError, match="did you mean 'shaped'"):
        openrlhf.make_reward_func(shapd=True)
    with pytest.raises(UsageError, match="'is_clse'"):
        openrlhf.make_reward_func(preset="pot", compare={"is_clse": True})
    with pytest.raises(UsageError, match="timeout"):
        openrlhf.make_reward_func(timeout=-1)


def test_openrlhf_reward_func_with_sandbox_limits() -> None:
    """OpenRLHF's agent executor: `reward_func(queries, prompts, labels)` for one sample."""
    reward_func = openrlhf.make_reward_func(shaped=True, timeout=1.0, workers=1)
    answer = reward_func([f"Q: How many?\n{ENDLESS}"], ["Q: How many?\n"], ["72"])
    assert answer["rewards"] == [0.0] and answer["extra_logs"]["executed"] == [0.0]
    assert rewards._state["config"] == SandboxConfig(timeout=1.0, workers=1)
    rewards.configure(workers=1, timeout=2.0, memory_mb=512)


def test_openrlhf_remote_body_with_an_unknown_field() -> None:
    with pytest.raises(UsageError, match=r"'label'.*did you mean 'labels'"):
        openrlhf.reward_payload({"query": ["ans = 72"], "label": ["72"], "labels": ["72"]}, sandbox=None)  # type: ignore[arg-type]


def test_trl_reward_options_are_checked_when_the_function_is_made() -> None:
    with pytest.raises(UsageError, match="did you mean 'gold_field'"):
        rewards.make_reward_function(gold_feild="solution")
    with pytest.raises(UsageError, match="did you mean 'abs_value'"):
        rewards.make_reward_function(preset="pot", abs_valu=True)
    with pytest.raises(UsageError, match="unknown preset"):
        rewards.make_reward_function(preset="pott")
