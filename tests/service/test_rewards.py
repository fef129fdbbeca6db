"""`potrun.rewards`: one float per (completion, gold), TRL's reward-function signature, a warm sandbox
shared across calls."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from potrun import UsageError, rewards

FENCE = "```"
COMPLETIONS = [
    f"Let me compute.\n{FENCE}python\ndef solution():\n    return 6 * 7\n{FENCE}",  # correct
    "ans = 41",  # ran, wrong
    "ans = 1 / 0",  # raised
    [{"role": "assistant", "content": "ans = 40 + 2"}],  # conversational, correct
    "I think the answer is 42.",  # no program
    "import os\nans = 42",  # refused by the policy
]
GOLDS = [42, 42, 42, "42", 42, 42]


@pytest.fixture(autouse=True, scope="module")
def shared_sandbox() -> Iterator[None]:
    rewards.configure(workers=1, timeout=2.0, memory_mb=512)
    yield
    rewards.close()


def test_binary_and_shaped_scales() -> None:
    assert rewards.pot_reward(COMPLETIONS, answer=GOLDS) == [1.0, 0.0, 0.0, 1.0, 0.0, 0.0]
    assert rewards.shaped_pot_reward(COMPLETIONS, answer=GOLDS) == [1.0, 0.1, 0.0, 1.0, 0.0, 0.0]
    custom = {"correct": 2.0, "executed": 0.5, "failed": -1.0}
    assert rewards.score_completions(COMPLETIONS[:3], GOLDS[:3], scale=custom) == [2.0, 0.5, -1.0]


def test_trl_signature() -> None:
    """GRPOTrainer calls reward(prompts=..., completions=..., completion_ids=..., **dataset columns)."""
    reward = rewards.pot_reward
    assert reward.__name__ == "pot_reward"  # TRL logs each reward under its function's name
    kwargs = {"prompts": ["q"] * 2, "completion_ids": [[1], [2]], "question": ["a", "b"], "trainer_state": None}
    assert reward(completions=["ans = 3", "ans = 4"], answer=[3, 5], **kwargs) == [1.0, 0.0]
    other = rewards.make_reward_function(gold_field="ground_truth", shaped=True, name="pot_shaped")
    assert other.__name__ == "pot_shaped"
    assert other(["ans = 3", "ans = 4"], ground_truth=[3, 5]) == [1.0, 0.1]
    with pytest.raises(UsageError, match="dataset column 'answer'"):
        reward(["ans = 3"], prompts=["q"])
    with pytest.raises(UsageError, match="1 completions but 2 golds"):
        reward(["ans = 3"], answer=[3, 4])


def test_gold_none_is_never_correct() -> None:
    """For TRL a gold of None is "not applicable" (the reward None); scored directly, never correct."""
    assert rewards.shaped_pot_reward(["ans = 3", "ans = 1/0"], answer=[None, None]) == [None, None]
    assert rewards.score_completions(["ans = 3", "ans = 1/0"], [None, None], shaped=True) == [0.1, 0.0]


def test_sandbox_stays_warm_across_calls() -> None:
    rewards.pot_reward(["ans = 1"], answer=[1])
    box = rewards._state["box"]
    workers = [slot.conn.process.pid for slot in box.sandbox._pool.slots]
    hits = box.hits
    assert rewards.pot_reward(["ans = 1", "ans = 2"], answer=[1, 1]) == [1.0, 0.0]
    assert rewards._state["box"] is box and box.hits == hits + 1  # the repeated program: from the cache
    assert [slot.conn.process.pid for slot in box.sandbox._pool.slots] == workers
    rewards.close()
    assert box.sandbox._pool is None
    assert rewards.pot_reward(["ans = 1"], answer=[1]) == [1.0]  # a fresh one on the next call


def test_score_records_for_logging() -> None:
    results = rewards.score_records(["ans = 6 * 7", "ans = 1 / 0"], [42, 42])
    assert [(r.status, r.value, r.correct) for r in results] == [("ok", 42, True), ("error", None, False)]
    assert results[1].error_type == "ZeroDivisionError"


def test_closed_at_exit() -> None:
    """A script that uses the reward and exits leaves no sandbox worker behind."""
    script = (
        "from potrun.rewards import pot_reward, _state\n"
        "print(pot_reward(['ans = 2'], answer=[2]))\n"
        "print(*[s.conn.process.pid for s in _state['box'].sandbox._pool.slots])\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    first, pids = done.stdout.splitlines()
    assert first == "[1.0]"
    for pid in map(int, pids.split()):
        assert not os.path.exists(f"/proc/{pid}") or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]


@pytest.mark.parametrize(
    ("completion", "text"),
    [
        ([{"role": "assistant", "content": "ans = 73"}], "ans = 73"),
        ([{"role": "assistant", "content": "ans = 73"}, {"role": "user", "content": "ans = 72"}], "ans = 73"),
        ([{"role": "assistant", "content": "call"}, {"role": "tool", "content": "ans = 72"}], "call"),
        ([{"role": "user", "content": "ans = 72"}], ""),  # no word of the model's
        ([{"content": "ans = 72"}], "ans = 72"),  # a message without a role is the model's
        ({"role": "assistant", "content": [{"type": "text", "text": "ans = 72"}]}, "ans = 72"),
    ],
)
def test_a_conversation_is_scored_on_the_model_s_last_message(completion: object, text: str) -> None:
    assert rewards.completion_text(completion) == text
