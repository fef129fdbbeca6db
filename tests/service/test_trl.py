"""Issue 37, item 5: TRL's conventions, with TRL's own call shape.

trl 1.16 is not installed here (it needs torch): GRPOTrainer's call is reproduced from its source, as
its documented reward functions receive it: `reward(prompts=..., completions=..., completion_ids=...,
trainer_state=..., <every other dataset column>=..., log_extra=..., log_metric=...)`, one list entry a
completion; `log_extra(column, values)` adds a column of its completions table, `log_metric(name,
value)` a metric; the reward is logged under its `__name__`; a reward of None means "not applicable"."""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from potrun import UsageError, rewards
from potrun.rewards import make_reward_function, pot_reward, reward_name, shaped_pot_reward

FENCE = "```"


@pytest.fixture(autouse=True, scope="module")
def shared_sandbox() -> Iterator[None]:
    rewards.configure(workers=1, timeout=2.0, memory_mb=512)
    yield
    rewards.close()


def trl_call(
    reward: Callable[..., Any], completions: list[Any], columns: dict[str, list[Any]]
) -> tuple[Any, dict[str, Any], dict[str, float]]:
    """GRPOTrainer's call of one reward function (trl/trainer/grpo_trainer.py, _calculate_rewards):
    keyword arguments only; the loggers collect what the reward gives them."""
    extra: dict[str, Any] = {}
    metrics: dict[str, float] = {}
    result = reward(
        prompts=[[{"role": "user", "content": "How many clips?"}]] * len(completions),
        completions=completions,
        completion_ids=[[1, 2, 3]] * len(completions),
        trainer_state=object(),
        log_extra=lambda column, values: extra.__setitem__(column, list(values)),
        log_metric=lambda name, value: metrics.__setitem__(name, value),
        **columns,
    )
    if asyncio.iscoroutine(result):
        result = asyncio.run(result)
    return result, extra, metrics


def chat(text: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": text}]


COMPLETIONS = [chat("ans = 48 + 24"), chat("ans = 1 / 0"), chat("ans = 5"), chat("ans = 48 + 24")]


def test_none_golds_give_none_and_statuses_reach_trls_logs() -> None:
    rewards_given, extra, metrics = trl_call(
        shaped_pot_reward, COMPLETIONS, {"answer": ["72", "72", None, "72"], "id": [1, 2, 3, 4]}
    )
    assert rewards_given == [1.0, 0.0, None, 1.0]
    assert extra["shaped_pot_reward/status"] == ["ok", "error", "n/a", "ok"]
    assert extra["shaped_pot_reward/error_type"] == ["", "ZeroDivisionError", "", ""]
    assert metrics == {"shaped_pot_reward/status/error": 1 / 3, "shaped_pot_reward/status/ok": 2 / 3}


def test_without_trls_loggers_the_rewards_are_the_same() -> None:
    assert pot_reward(completions=COMPLETIONS, answer=["72", "72", None, "72"]) == [1.0, 0.0, None, 1.0]


@pytest.mark.parametrize("seed", range(3))
def test_each_configuration_has_its_own_name(seed: int) -> None:
    """Two rewards that differ in any setting never share a name (TRL would merge their metrics)."""
    rng = random.Random(seed)
    seen: dict[str, tuple[Any, ...]] = {}
    for _ in range(60):
        config = (
            rng.random() < 0.5,
            rng.choice(["answer", "ground_truth", "solution"]),
            rng.choice(["pot", "cot"]),
            rng.choice(["default", "pot", "mathqa-rel"]),
        )
        shaped, gold_field, mode, preset = config
        compare = {"abs_value": True} if preset in ("default", "pot") and rng.random() < 0.5 else {}
        key = (*config, tuple(compare.items()))
        name = make_reward_function(shaped=shaped, gold_field=gold_field, mode=mode, preset=preset, **compare).__name__
        assert seen.setdefault(name, key) == key, name
        assert name == reward_name(shaped=shaped, gold_field=gold_field, mode=mode, preset=preset, **compare)
    assert pot_reward.__name__ == "pot_reward" and shaped_pot_reward.__name__ == "shaped_pot_reward"
    assert make_reward_function(name="mine").__name__ == "mine"


def test_two_gold_columns_log_apart() -> None:
    by_answer = make_reward_function()
    by_truth = make_reward_function(gold_field="ground_truth")
    assert by_answer.__name__ != by_truth.__name__
    _, extra, _ = trl_call(by_truth, COMPLETIONS[:1], {"ground_truth": ["72"], "answer": ["0"]})
    assert extra == {"pot_reward_ground_truth/status": ["ok"], "pot_reward_ground_truth/error_type": [""]}


def test_the_async_reward_takes_the_same_call() -> None:
    areward = make_reward_function(asynchronous=True, shaped=True)
    given, extra, _ = trl_call(areward, COMPLETIONS, {"answer": ["72", "72", None, "72"]})
    assert given == [1.0, 0.0, None, 1.0] and extra[f"{areward.__name__}/status"][2] == "n/a"


def test_a_missing_gold_column_names_the_columns_given() -> None:
    with pytest.raises(UsageError, match=r"'answer'.*columns given: id"):
        trl_call(pot_reward, COMPLETIONS[:1], {"id": [1]})


MATH = [chat("The answer is $2\\sqrt{2}$."), chat("The answer is $\\frac{\\pi}{2}$."), chat("The answer is 3.")]
MATH_GOLDS = ["\\sqrt{8}", "\\pi/2", "4"]


def test_math_preset_from_any_thread_and_in_asyncio() -> None:
    """verl's reward loop and reward servers call from threads; the async reward runs in asyncio's
    executor: math-verify's alarm works only in a main thread, and potrun's pool gives it one."""
    math_reward = make_reward_function(preset="math", mode="cot")
    expected = [1.0, 1.0, 0.0]
    assert math_reward(completions=MATH, answer=MATH_GOLDS) == expected
    with ThreadPoolExecutor(3) as pool:
        assert list(pool.map(lambda _: math_reward(completions=MATH, answer=MATH_GOLDS), range(3))) == [expected] * 3
    areward = make_reward_function(preset="math", mode="cot", asynchronous=True)

    async def in_a_loop() -> list[Any]:
        return list(await asyncio.gather(*(areward(completions=MATH, answer=MATH_GOLDS) for _ in range(2))))

    assert asyncio.run(in_a_loop()) == [expected] * 2
    found: list[Any] = []
    thread = threading.Thread(target=lambda: found.append(math_reward(completions=MATH, answer=MATH_GOLDS)))
    thread.start()
    thread.join()
    assert found == [expected]
