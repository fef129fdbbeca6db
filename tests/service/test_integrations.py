"""The trainer adapters called the way verl and OpenRLHF call them, on a real sandbox.

verl and OpenRLHF are not installed here (both need torch, and verl ray and transformers too): each
test reproduces its trainer's call from that project's source, quoted with its file and lines, at
verl b178a3cd (2026-01-29) and OpenRLHF 3c3be623 (2026-08-13).
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import inspect
import json
from collections import defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from potrun import Sandbox, UsageError, rewards
from potrun.integrations import openrlhf, verl

FENCE = "```"
# (response, ground truth, binary reward, shaped reward): verl's ground truths are strings
CASES = [
    (f"Natalia sold 48+24 clips.\n{FENCE}python\nans = 48 + 24\n{FENCE}", "72", 1.0, 1.0),
    ("ans = 48 - 24", "72", 0.0, 0.1),
    ("ans = 1 / 0", "72", 0.0, 0.0),
    ("def solution():\n    return 72<|im_end|>", "72", 1.0, 1.0),  # a template token left at the end
    ("The answer is 72.", "72", 0.0, 0.0),  # no program: pot mode scores programs
]
RESPONSES = [case[0] for case in CASES]
GOLDS = [case[1] for case in CASES]
BINARY = [case[2] for case in CASES]
SHAPED = [case[3] for case in CASES]


@pytest.fixture(autouse=True, scope="module")
def shared_sandbox() -> Iterator[None]:
    """The shared sandbox of potrun.rewards: verl's and OpenRLHF's loaders give no way to pass one."""
    rewards.configure(workers=2, timeout=2.0, memory_mb=512)
    yield
    rewards.close()


@pytest.fixture(scope="module")
def box() -> Iterator[Sandbox]:
    with Sandbox(workers=2, timeout=2.0, memory_mb=512) as sandbox:
        yield sandbox


# ---------------------------------------------------------------- verl


def call_with_kwargs(raw_fn: Callable[..., Any], extra_kwargs: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
    """verl/trainer/ppo/reward.py:42-48 (module level there too: prime's process pool pickles it)."""
    return raw_fn(*args, **{**kwargs, **extra_kwargs})


async def call_with_kwargs_async(
    raw_fn: Callable[..., Any], extra_kwargs: dict[str, Any], *args: Any, **kwargs: Any
) -> Any:
    """verl/trainer/ppo/reward.py:51-57."""
    return await raw_fn(*args, **{**kwargs, **extra_kwargs})


def load_verl_reward(name: str, reward_kwargs: dict[str, Any]) -> Callable[..., Any]:
    """verl/trainer/ppo/reward.py:80-96 (get_custom_reward_fn) with verl/utils/import_utils.py:106-108
    (load_module of a "pkg://" path): the module imported by name, the function wrapped in a partial
    that merges the config's reward_kwargs into every call."""

    module_path = "pkg://potrun.integrations.verl"
    module = importlib.import_module(module_path[len("pkg://") :].replace("/", "."))
    raw_fn = getattr(module, name)
    if not inspect.iscoroutinefunction(raw_fn):
        return partial(call_with_kwargs, raw_fn, reward_kwargs)
    return partial(call_with_kwargs_async, raw_fn, reward_kwargs)


def naive_manager(compute_score: Callable[..., Any]) -> tuple[list[float], dict[str, list[Any]]]:
    """verl/workers/reward_manager/naive.py:59-98 (and dapo.py:66-112, the same call): one keyword
    call per response; a dict's "score" is the reward and each of its keys a logged list."""
    scores, reward_extra_info = [], defaultdict(list)
    for response_str, ground_truth in zip(RESPONSES, GOLDS, strict=True):
        extra_info: dict[str, Any] = {"index": 0}
        extra_info["num_turns"] = None
        extra_info["rollout_reward_scores"] = {}
        score = compute_score(
            data_source="openai/gsm8k", solution_str=response_str, ground_truth=ground_truth, extra_info=extra_info
        )
        if isinstance(score, dict):
            reward = score["score"]
            for key, value in score.items():
                reward_extra_info[key].append(value)
        else:
            reward = score
        scores.append(reward)
    return scores, reward_extra_info


def test_verl_naive_manager_gets_floats_and_with_details_verls_dict() -> None:
    assert naive_manager(load_verl_reward("compute_score", {})) == (BINARY, {})
    scores, logged = naive_manager(load_verl_reward("compute_score", {"details": True, "shaped": True}))
    assert scores == SHAPED
    assert logged["acc"] == [True, False, False, True, False]
    assert logged["pred"] == ["72", "24", "", "72", ""]
    assert logged["status"] == ["ok", "ok", "error", "ok", "syntax_error"]  # no program: error_type no_program
    # verl's validation metrics take np.mean of each non-string list, and skip a list whose first is a str
    assert float(np.mean(logged["acc"])) == 0.4
    assert all(isinstance(value, str) for key in ("pred", "status") for value in logged[key])


def test_verl_batch_manager_call() -> None:
    """verl/workers/reward_manager/batch.py:62-76: keyword lists, the config's reward_kwargs merged."""
    compute_score = load_verl_reward("compute_score_batched", {"shaped": True})
    extras = [{} for _ in RESPONSES]
    for extra, rollout_scores in zip(extras, [{} for _ in RESPONSES], strict=True):
        extra["rollout_reward_scores"] = rollout_scores
    scores = compute_score(
        data_sources=np.array(["openai/gsm8k"] * len(RESPONSES), dtype=object),
        solution_strs=RESPONSES,
        ground_truths=GOLDS,
        extra_infos=extras,
    )
    assert scores == SHAPED


def test_verl_prime_manager_calls_positionally_from_a_process_pool() -> None:
    """verl/workers/reward_manager/prime.py:31-35 and 45-60: an event loop hands each response to a
    ProcessPoolExecutor as partial(evaluation_func, task, completion, reference, task_extra_info),
    awaited with asyncio.wait_for; each forked process starts its own shared sandbox."""
    evaluation_func = load_verl_reward("compute_score", {})

    async def single_compute_score(completion: str, reference: str, task: str, executor: ProcessPoolExecutor) -> Any:
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(executor, partial(evaluation_func, task, completion, reference, None))
        return await asyncio.wait_for(future, timeout=300.0)

    async def parallel() -> list[Any]:
        with ProcessPoolExecutor(max_workers=2) as executor:
            tasks = [
                single_compute_score(c, r, "openai/gsm8k", executor) for c, r in zip(RESPONSES, GOLDS, strict=True)
            ]
            return await asyncio.gather(*tasks)

    results = asyncio.run(parallel())
    assert [float(result) for result in results] == BINARY  # prime.py:84-87: numbers only


def test_verl_reward_loop_awaits_the_async_one_and_runs_the_sync_one_in_its_executor() -> None:
    """verl/experimental/reward_loop/reward_manager/naive.py:30 and 66-84: an async compute_score
    (inspect.iscoroutinefunction of the loaded partial) is awaited on the loop, a sync one runs in
    the loop's default executor; both with the keywords verl adds when a reward router is set."""
    extra_reward_kwargs = {"reward_router_address": "127.0.0.1:1", "reward_model_tokenizer": None}

    async def run_single(compute_score: Callable[..., Any], response_str: str, ground_truth: str) -> Any:
        loop = asyncio.get_running_loop()
        kwargs = {"data_source": "openai/gsm8k", "solution_str": response_str, "ground_truth": ground_truth}
        if inspect.iscoroutinefunction(compute_score):
            return await compute_score(**kwargs, extra_info={}, **extra_reward_kwargs)
        return await loop.run_in_executor(None, lambda: compute_score(**kwargs, extra_info={}, **extra_reward_kwargs))

    async def all_of(compute_score: Callable[..., Any]) -> list[Any]:
        return await asyncio.gather(*(run_single(compute_score, r, g) for r, g in zip(RESPONSES, GOLDS, strict=True)))

    asynchronous = load_verl_reward("acompute_score", {"details": True})
    assert inspect.iscoroutinefunction(asynchronous)
    assert [result["score"] for result in asyncio.run(all_of(asynchronous))] == BINARY
    assert asyncio.run(all_of(load_verl_reward("compute_score", {}))) == BINARY


def test_verl_reward_kwargs_choose_mode_comparator_and_scale() -> None:
    """The config's custom_reward_function.reward_kwargs reach the scoring (verl merges them in)."""
    cot = load_verl_reward("compute_score", {"mode": "cot"})
    assert cot(data_source="x", solution_str="So the answer is \\boxed{72}.", ground_truth="72", extra_info={}) == 1.0
    absolute = load_verl_reward("compute_score", {"compare": {"abs_value": True}})
    assert absolute(data_source="x", solution_str="ans = 24 - 96", ground_truth="72", extra_info={}) == 1.0
    assert verl.compute_score("x", "ans = 24 - 96", "72") == 0.0
    dapo_scale = load_verl_reward(
        "compute_score_batched", {"scale": {"correct": 1.0, "executed": -1.0, "failed": -1.0}}
    )
    assert dapo_scale(
        data_sources=["x"] * 3, solution_strs=RESPONSES[:3], ground_truths=GOLDS[:3], extra_infos=[{}] * 3
    ) == [1.0, -1.0, -1.0]


def test_verl_compute_score_from_a_thread_pool_sharing_one_sandbox(box: Sandbox) -> None:
    """The reward loop's executor threads (and users' own pools) call compute_score at once: every
    reward must be that response's own."""
    calls = [(f"ans = {k} * 3", str(k * 3 + (k % 3 == 0))) for k in range(240)]  # every third is wrong

    def call(case: tuple[str, str]) -> Any:
        return verl.compute_score("openai/gsm8k", case[0], case[1], {}, sandbox=box)

    with ThreadPoolExecutor(32) as pool:
        got = list(pool.map(call, calls))
    assert got == [0.0 if k % 3 == 0 else 1.0 for k in range(240)]


# ---------------------------------------------------------------- OpenRLHF

CHATML_PROMPT = (
    "<|im_start|>system\nSolve with a Python program.<|im_end|>\n<|im_start|>user\n"
    f"Example: Natalia sold 48 clips in April and half as many in May. How many in all?\n"
    f"{FENCE}python\nans = 48 + 48 // 2\n{FENCE}\n"  # the few-shot example's code gives the gold, 72
    "Now: Natalia sold 48 clips in April and half as many in May. How many in all?<|im_end|>\n"
    "<|im_start|>assistant\n"
)
# (response with its end-of-turn token, label, reward)
OPENRLHF_CASES = [
    (f"{FENCE}python\nans = 48 + 24\n{FENCE}<|im_end|>", 72, 1.0),
    ("ans = 48 + 24<|im_end|>", 72, 1.0),  # code glued to the token
    ("It is 72, I am sure.<|im_end|>", 72, 0.0),  # no program: the prompt's example is not run
    ("ans = 48 - 24<|im_end|>", 72, 0.0),
]


def load_openrlhf_reward_func(path: str) -> Callable[..., Any]:
    """openrlhf/utils/agent.py:193-200: the .py file that --remote_rm_url names, run as a module
    named "reward_func", and its `reward_func`."""
    spec = importlib.util.spec_from_file_location("reward_func", path)
    assert spec is not None and spec.loader is not None
    reward_module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reward_module)
    return reward_module.reward_func


def fetch_rewards_via_func(
    reward_func: Callable[..., Any], queries: list[str], prompts: list[str], labels: list[Any]
) -> list[tuple[Any, Any, Any]]:
    """openrlhf/utils/agent.py:303-320 (_fetch_rewards_via_func): one sample per call, each on
    asyncio.to_thread, gathered; then lines 288-297: the first dict's rewards, scores, extra_logs."""

    async def gather() -> list[Any]:
        tasks = [
            asyncio.to_thread(reward_func, queries[i : i + 1], prompts[i : i + 1], labels[i : i + 1])
            for i in range(len(queries))
        ]
        return await asyncio.gather(*tasks)

    read = []
    for rewards_info in asyncio.run(gather()):
        score_value = rewards_info.get("scores")
        if score_value is None:
            score_value = rewards_info.get("rewards")
        read.append((rewards_info.get("rewards"), score_value, rewards_info.get("extra_logs") or {}))
    return read


def test_openrlhf_loads_the_module_file_and_scores_only_the_responses() -> None:
    reward_func = load_openrlhf_reward_func(openrlhf.__file__)
    queries = [CHATML_PROMPT + response for response, _, _ in OPENRLHF_CASES]
    labels = [label for _, label, _ in OPENRLHF_CASES]
    read = fetch_rewards_via_func(reward_func, queries, [CHATML_PROMPT] * len(queries), labels)
    assert [reward for reward, _, _ in read] == [[expected] for _, _, expected in OPENRLHF_CASES]
    assert [score for _, score, _ in read] == [[expected] for _, _, expected in OPENRLHF_CASES]
    assert [logs["executed"] for _, _, logs in read] == [[1.0], [1.0], [0.0], [1.0]]


def test_openrlhf_reward_func_of_your_own_options(tmp_path: Path) -> None:
    """The documented way to other options: a file of one's own that --remote_rm_url names."""
    path = tmp_path / "potrun_reward.py"
    path.write_text(
        "from potrun.integrations.openrlhf import make_reward_func\nreward_func = make_reward_func(shaped=True)\n"
    )
    reward_func = load_openrlhf_reward_func(str(path))
    queries = [CHATML_PROMPT + response for response, _, _ in OPENRLHF_CASES]
    result = reward_func(queries, [CHATML_PROMPT] * 4, [72] * 4, extra="ignored")
    assert result["rewards"] == [1.0, 1.0, 0.0, 0.1]
    assert result["scores"] == [1.0, 1.0, 0.0, 0.0]  # dynamic filtering reads the verdict, not the shaping


def test_openrlhf_queries_without_their_prompt_are_cut_at_the_assistant_marker() -> None:
    queries = [CHATML_PROMPT + response for response, _, _ in OPENRLHF_CASES]
    result = openrlhf.reward_func(queries, [None] * 4, [72] * 4)
    assert result["rewards"] == [expected for _, _, expected in OPENRLHF_CASES]


def test_openrlhf_remote_rm_payload(box: Sandbox) -> None:
    """openrlhf/utils/agent.py:332-336: the JSON body it POSTs to each --remote_rm_url server."""
    queries = [CHATML_PROMPT + response for response, _, _ in OPENRLHF_CASES]
    payload = {"query": queries, "prompts": [CHATML_PROMPT] * 4, "labels": [72, "72", 72, 72]}
    answer = openrlhf.reward_payload(json.loads(json.dumps(payload)), box)
    assert json.loads(json.dumps(answer, allow_nan=False)) == answer  # plain JSON, as the server sends it
    assert answer["rewards"] == [1.0, 1.0, 0.0, 0.0]
    assert openrlhf.reward_payload({"query": ["ans = 1"], "labels": [1]}, box)["rewards"] == [1.0]  # no prompts


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (["ans = 1"], "JSON object"),
        ({"labels": [1]}, "'query', a list"),
        ({"query": "ans = 1", "labels": [1]}, "'query', a list"),
        ({"query": [1], "labels": [1]}, "list of strings"),
        ({"query": ["ans = 1"]}, "'labels', a list"),
        ({"query": ["ans = 1"], "labels": [1, 2]}, "1 completions but 2 golds"),
        ({"query": ["ans = 1"], "prompts": [1], "labels": [1]}, "'prompts' must be a list of strings"),
        ({"query": ["ans = 1"], "prompts": ["a", "b"], "labels": [1]}, "1 queries but 2 prompts"),
    ],
)
def test_openrlhf_payload_that_is_not_the_protocol_is_a_usage_error(payload: Any, message: str, box: Sandbox) -> None:
    with pytest.raises(UsageError, match=message):
        openrlhf.reward_payload(payload, box)


# ---------------------------------------------------------------- TRL


def test_trl_conversational_completions_with_content_blocks() -> None:
    """TRL passes conversational completions as message lists; a multimodal dataset's content is a
    list of blocks (before this change: no_program, reward 0)."""
    completions = [
        [{"role": "assistant", "content": [{"type": "text", "text": "ans = 48 + 24"}]}],
        [
            {
                "role": "assistant",
                "content": [{"type": "text", "text": "x = 48"}, {"type": "text", "text": "ans = x - 24"}],
            }
        ],
    ]
    assert rewards.shaped_pot_reward(completions, answer=["#### 72", "#### 72"]) == [1.0, 0.1]
