"""Rewards for RL training loops: score a batch of (completion, gold) pairs, get one float per pair.

    from potrun.rewards import pot_reward
    trainer = GRPOTrainer(model=..., reward_funcs=[pot_reward], train_dataset=dataset)  # an "answer" column

TRL's GRPOTrainer calls each of its `reward_funcs` as `reward(prompts=..., completions=..., **columns)`
and wants `list[float]`, one per completion; every other dataset column comes as a keyword argument of
the same length. `pot_reward(completions, answer, **kwargs)` takes the golds from the `answer` column
(`make_reward_function(gold_field=...)` for another name). A completion is a string, or (conversational
datasets) a list of messages whose last `content` is used: a string, or a list of content blocks
(`[{"type": "text", "text": ...}]`, the text blocks joined). The chat template's special tokens at
its ends (`<|im_end|>`, `<|eot_id|>`, ...: potrun.extractors.strip_special_tokens) are dropped.
verl's and OpenRLHF's signatures: potrun.integrations.

Scales:
- `pot_reward` (binary): 1.0 correct, 0.0 otherwise;
- (either scale: an answer that is NaN or an infinity is never correct unless the gold is exactly that,
  whatever the preset's peer judges: `potrun.comparators.nonfinite`)
- `shaped_pot_reward` (`SHAPED`): 1.0 correct, 0.1 the program ran and gave an answer but it is wrong
  (status ok; for chain of thought: an answer was found), 0.0 anything else (no program, syntax or
  policy error, exception, timeout, crash, no answer). A gold of None is never correct here; the TRL
  reward functions give it None, TRL's "not applicable" (`make_reward_function`).

Each completion goes through the same pipeline as `potrun check` (extraction, the sandbox, the
comparator preset). The sandbox is shared and warm across calls: created on first use in each process
(a forked trainer process gets its own), closed at exit (`close()` to do it sooner), with a dedup cache
of results that also lives across calls (rollouts repeat programs). `configure(...)` sets its options
(Sandbox keyword arguments: workers, timeout, memory_mb, policy, ...) before or between calls; a bad
one is a UsageError at once (they are checked as a SandboxConfig: nothing starts).
The reward functions are safe to call from any number of threads at once (verl's and reward
servers' thread pools), and their programs share the one pool's pipelines: no lock serializes them.
(Per-sample calls from many threads still reach well under the throughput of one batched call: each
call's thread hand-offs and cache-cold work, on the parent's one GIL, not the workers, bound them;
bench/threaded_rewards.py measures the ratio and bench/handoff_floor.py the floor of such hand-offs
without potrun, docs/performance.md has the figures. Batch where you can.)
`make_reward_function(asynchronous=True)` makes an `async def` reward (for trainers whose reward
loops await their rewards).
"""

from __future__ import annotations

import asyncio
import atexit
import math
import os
import re
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import fields, replace
from typing import Any, TypedDict

from potrun.check.cache import CachedSandbox
from potrun.check.pipeline import CheckOptions, RecordResult, check_records
from potrun.check.records import Record
from potrun.comparators import check_compare_options
from potrun.comparators.nonfinite import paid_for_nonfinite
from potrun.extractors import strip_special_tokens
from potrun.options import check_batch, check_options
from potrun.sandbox.api import Sandbox, SandboxConfig, SandboxLike
from potrun.types import UsageError

OUTCOMES = ("correct", "executed", "failed")
BINARY = {"correct": 1.0, "executed": 0.0, "failed": 0.0}
SHAPED = {"correct": 1.0, "executed": 0.1, "failed": 0.0}


class _Shared(TypedDict):
    config: SandboxConfig  # of the next shared sandbox
    box: CachedSandbox | None  # the shared sandbox, once made
    pid: int | None  # the process that made it: a forked child makes its own


_lock = threading.Lock()  # guards _state: the shared sandbox is made, replaced and closed under it
_state: _Shared = {"config": SandboxConfig(), "box": None, "pid": None}


def configure(config: SandboxConfig | None = None, /, **sandbox_options: Any) -> None:
    """Options of the shared sandbox: a SandboxConfig, or `Sandbox` keyword arguments (the others keep
    their defaults); a running one is closed and the next call starts one with these."""
    config = _config_of(config, sandbox_options)  # checked now, not at the first reward
    with _lock:
        _close_locked()
        _state["config"] = config


# The options of the shared sandbox a trainer's config may set beside the scoring's (verl's reward_kwargs,
# OpenRLHF's make_reward_func): `Sandbox`'s keyword arguments.
SANDBOX_OPTIONS = tuple(option.name for option in fields(SandboxConfig))


def configure_if_changed(config: SandboxConfig | None = None, /, **sandbox_options: Any) -> None:
    """`configure(...)`, unless the shared sandbox already has exactly these options: a trainer's config
    gives them with every call, and the running sandbox is kept while they stay the same."""
    config = _config_of(config, sandbox_options)
    with _lock:
        if config == _state["config"]:
            return
        _close_locked()
        _state["config"] = config


def _config_of(config: SandboxConfig | None, sandbox_options: Mapping[str, Any]) -> SandboxConfig:
    if config is None:
        return SandboxConfig.from_options(sandbox_options, "the shared sandbox")
    if not isinstance(config, SandboxConfig) or sandbox_options:
        raise UsageError("configure takes a SandboxConfig or Sandbox keyword arguments, not both")
    return config


def close() -> None:
    """Close the shared sandbox (its workers go); the next call starts a fresh one."""
    with _lock:
        _close_locked()


def _close_locked() -> None:
    box = _state["box"]
    if box is not None and _state["pid"] == os.getpid():  # a forked child must not close its parent's
        box.close()
    _state["box"] = None


def _shared_sandbox() -> CachedSandbox:
    with _lock:
        box = _state["box"]
        if box is None or _state["pid"] != os.getpid():
            box = CachedSandbox(Sandbox.from_config(_state["config"]).start())
            _state["box"], _state["pid"] = box, os.getpid()
        return box


atexit.register(close)


def completion_text(completion: Any) -> str:
    """The model's output, without the chat template's special tokens at its ends: a string, or the
    content of a conversational completion's last assistant message (a string, or a list of content
    blocks whose text blocks are joined by newlines, as vLLM's chat parser joins them). Messages of
    other roles are not the model's answer: a multi-turn rollout that ends with a tool's output or a
    user turn is scored on the model's last word before it; a message without a role counts as the
    model's."""
    if isinstance(completion, str):
        return strip_special_tokens(completion)
    if isinstance(completion, Mapping):
        return _content_text(completion.get("content"))
    if isinstance(completion, Sequence):
        for message in reversed(completion):
            if not isinstance(message, Mapping) or message.get("role", "assistant") == "assistant":
                return completion_text(message)
    return ""


def _content_text(content: Any) -> str:
    """A message's `content`: a string, or blocks such as `[{"type": "text", "text": "..."}]` (the
    others, images or tool calls, carry no text to score)."""
    if isinstance(content, str):
        return strip_special_tokens(content)
    if isinstance(content, Sequence):
        texts = [block["text"] for block in content if _is_text_block(block)]
        return strip_special_tokens("\n".join(texts))
    return ""


def _is_text_block(block: Any) -> bool:
    return isinstance(block, Mapping) and block.get("type", "text") == "text" and isinstance(block.get("text"), str)


def score_completions(
    completions: Sequence[Any],
    golds: Sequence[Any],
    *,
    shaped: bool = False,
    scale: Mapping[str, float] | None = None,
    mode: str = "pot",
    preset: str = "default",
    sandbox: SandboxLike | None = None,
    **compare_options: Any,
) -> list[float]:
    """One reward per (completion, gold) pair, in order (`SHAPED` scale when `shaped`, else `BINARY`;
    or a `scale` of your own with the keys correct, executed, failed). `sandbox`: your own started
    Sandbox instead of the shared one."""
    points = reward_points(shaped=shaped, scale=scale)
    results = score_records(completions, golds, mode=mode, preset=preset, sandbox=sandbox, **compare_options)
    return [reward_of(result, points) for result in results]


def score_records(completions: Sequence[Any], golds: Sequence[Any], **options: Any) -> list[RecordResult]:
    """The full RecordResult of each pair (status, value, correct, ...), for logging beside the rewards
    (the options are `iter_records`')."""
    return list(iter_records(completions, golds, **options))


def iter_records(
    completions: Sequence[Any],
    golds: Sequence[Any],
    *,
    mode: str = "pot",
    preset: str = "default",
    sandbox: SandboxLike | None = None,
    **compare_options: Any,
) -> Iterator[RecordResult]:
    """Each pair's RecordResult, in order, each as soon as it is known (the options are checked before
    the first is asked for: a bad one raises here). `sandbox`: your own started Sandbox instead of the
    shared one."""
    check_batch("the rewards", completions=completions, golds=golds)
    if len(completions) != len(golds):
        raise UsageError(f"{len(completions)} completions but {len(golds)} golds")
    options = CheckOptions(
        code_fields=("output",),
        gold_fields=("gold",),
        id_fields=(),
        mode=mode,
        presets=(preset,),
        compare_options=compare_options,
    )
    records = [
        Record(n, {"output": completion_text(c), "gold": g})
        for n, (c, g) in enumerate(zip(completions, golds, strict=True), 1)
    ]
    results = check_records(records, sandbox if sandbox is not None else _shared_sandbox(), options)
    return (_unpaid_if_nonfinite(result) for result in results)


def _unpaid_if_nonfinite(result: RecordResult) -> RecordResult:
    """A reward never pays for NaN or an infinity unless the gold is exactly that: some presets' peers
    judge NaN correct against any nonzero gold (DocMath), and `ans = float('nan')` would be paid on
    every record (`potrun.comparators.nonfinite`)."""
    if not result.correct or not paid_for_nonfinite(result.value, result.gold, result.answer_text):
        return result
    verdicts = None if result.verdicts is None else dict.fromkeys(result.verdicts, False)
    return replace(result, correct=False, verdicts=verdicts)


def reward_points(*, shaped: bool = False, scale: Mapping[str, float] | None = None) -> Mapping[str, float]:
    """The reward of each outcome (keys correct, executed, failed): `scale`, else `SHAPED` or `BINARY`.
    A scale is checked before any record is scored (a bad one would end a stream half way): exactly
    those keys, each a finite number; else a UsageError."""
    if scale is None:
        return SHAPED if shaped else BINARY
    if not isinstance(scale, Mapping):
        raise UsageError(f"scale must map correct, executed and failed to rewards, not {type(scale).__name__}")
    check_options(scale, OUTCOMES, "scale")
    for outcome in OUTCOMES:
        reward: Any = scale.get(outcome)
        if type(reward) not in (int, float) or not math.isfinite(reward):
            raise UsageError(f"scale[{outcome!r}] must be a finite number")
    return dict(scale)


def reward_of(result: RecordResult, points: Mapping[str, float]) -> float:
    """The reward `points` give one scored record."""
    if result.correct:
        return float(points["correct"])
    if result.status == "ok":
        return float(points["executed"])
    return float(points["failed"])


async def ascore_completions(completions: Sequence[Any], golds: Sequence[Any], **options: Any) -> list[float]:
    """`score_completions` for asyncio: the event loop goes on while the batch is scored (on a thread
    of the loop's executor; the sandbox is shared, so concurrent awaits are batched into one pool)."""
    return await asyncio.to_thread(score_completions, completions, golds, **options)


_OWN_OPTIONS = ("shaped", "gold_field", "mode", "preset", "name", "asynchronous")
# What GRPOTrainer passes a reward beside the dataset's columns (trl/trainer/grpo_trainer.py)
_TRL_KEYWORDS = ("prompts", "completion_ids", "trainer_state", "log_extra", "log_metric")


def make_reward_function(
    *,
    shaped: bool = False,
    gold_field: str = "answer",
    mode: str = "pot",
    preset: str = "default",
    name: str | None = None,
    asynchronous: bool = False,
    **compare_options: Any,
) -> Callable[..., Any]:
    """A reward function with TRL's signature, `reward(completions, **kwargs) -> list[float | None]`,
    reading the golds from the dataset column `gold_field`; with `asynchronous`, an `async def` of the
    same signature (awaited, it gives the list). An option the preset does not take is a UsageError
    now, naming the closest known one (`gold_feild=` is no comparator option).

    TRL's conventions: a gold of None gives the reward None ("not applicable": TRL leaves that
    completion out of this reward, it is not a wrong answer); where TRL passes `log_extra` and
    `log_metric`, each completion's status and error type go to its completions table
    (`<name>/status`, `<name>/error_type`) and each status's share of the batch to its metrics
    (`<name>/status/<status>`); the name (`__name__`, under which TRL logs the reward) is distinct for
    each configuration (`reward_name`), so two potrun rewards never merge their metrics."""
    check_compare_options(preset, compare_options, "make_reward_function", also=_OWN_OPTIONS)
    if type(gold_field) is not str or not gold_field:
        raise UsageError(f"make_reward_function: gold_field must be a column's name, not {type(gold_field).__name__}")
    CheckOptions(mode=mode, presets=(preset,), compare_options=compare_options)  # checked now, not at the first call
    label = name or reward_name(shaped=shaped, gold_field=gold_field, mode=mode, preset=preset, **compare_options)
    options = {"shaped": shaped, "mode": mode, "preset": preset, **compare_options}

    def golds_of(kwargs: Mapping[str, Any]) -> Any:
        if gold_field not in kwargs:
            columns = sorted(key for key in kwargs if key not in _TRL_KEYWORDS)
            raise UsageError(
                f"the reward needs the golds: a dataset column {gold_field!r} "
                f"(columns given: {', '.join(columns) or 'none'})"
            )
        return kwargs[gold_field]

    def reward(completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        golds = golds_of(kwargs)
        return _trl_rewards(completions, golds, options, kwargs.get("log_extra"), kwargs.get("log_metric"), label)

    async def areward(completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        golds = golds_of(kwargs)
        log_extra, log_metric = kwargs.get("log_extra"), kwargs.get("log_metric")
        return await asyncio.to_thread(_trl_rewards, completions, golds, options, log_extra, log_metric, label)

    chosen: Callable[..., Any] = areward if asynchronous else reward
    chosen.__name__ = chosen.__qualname__ = label
    return chosen


def reward_name(
    *, shaped: bool = False, gold_field: str = "answer", mode: str = "pot", preset: str = "default", **compare: Any
) -> str:
    """The name a reward of this configuration logs under: `pot_reward` (`shaped_pot_reward`) for the
    defaults, then each setting that differs ("pot_reward_ground_truth_pot_cot_abs_value")."""
    parts = ["shaped_pot_reward" if shaped else "pot_reward"]
    if gold_field != "answer":
        parts.append(gold_field)
    if preset != "default":
        parts.append(preset)
    if mode != "pot":
        parts.append(mode)
    for option, value in sorted(compare.items()):
        parts.append(option if value is True else f"{option}_{value}")
    return re.sub(r"[^0-9A-Za-z_]+", "_", "_".join(parts))


def _trl_rewards(
    completions: Sequence[Any],
    golds: Sequence[Any],
    options: Mapping[str, Any],
    log_extra: Any,
    log_metric: Any,
    label: str,
) -> list[float | None]:
    """TRL's rewards: None where the gold is None; the statuses logged where TRL offers its loggers."""
    if len(completions) != len(golds):
        raise UsageError(f"{len(completions)} completions but {len(golds)} golds")
    applicable = [index for index, gold in enumerate(golds) if gold is not None]
    points = reward_points(shaped=options["shaped"])
    compare = {key: value for key, value in options.items() if key not in ("shaped", "mode", "preset")}
    results = score_records(
        [completions[i] for i in applicable],
        [golds[i] for i in applicable],
        mode=options["mode"],
        preset=options["preset"],
        **compare,
    )
    rewards: list[float | None] = [None] * len(completions)
    statuses, error_types = ["n/a"] * len(completions), [""] * len(completions)
    for index, result in zip(applicable, results, strict=True):
        rewards[index] = reward_of(result, points)
        statuses[index], error_types[index] = str(result.status), result.error_type or ""
    if callable(log_extra):
        log_extra(f"{label}/status", statuses)
        log_extra(f"{label}/error_type", error_types)
    if callable(log_metric) and applicable:
        for status, count in sorted(Counter(statuses[i] for i in applicable).items()):
            log_metric(f"{label}/status/{status}", count / len(applicable))
    return rewards


pot_reward = make_reward_function()
shaped_pot_reward = make_reward_function(shaped=True)
