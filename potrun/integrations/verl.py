"""potrun as verl's custom reward function.

    # verl's trainer config
    custom_reward_function:
      path: pkg://potrun.integrations.verl
      name: compute_score            # reward managers naive, dapo, prime and the reward loop
      # name: compute_score_batched  # reward manager batch
      # name: acompute_score         # the reward loop, awaited on its event loop
      reward_kwargs: {shaped: false, mode: pot, details: false, timeout: 5, workers: 4}   # optional
      # reward_kwargs: {by_data_source: {openai/gsm8k: pot, "*": {preset: default, mode: cot}}}

What verl calls (its source, verl/workers/reward_manager/ and verl/experimental/reward_loop/):
- `compute_score(data_source=..., solution_str=..., ground_truth=..., extra_info=...)`, one response
  per call: the naive and dapo managers in a loop, the reward loop from its executor's threads;
  prime's manager positionally, `(data_source, solution_str, ground_truth, extra_info)`, from a
  process pool (each process then starts its own shared sandbox: prefer batch);
- `compute_score_batched(data_sources=..., solution_strs=..., ground_truths=..., extra_infos=...)`
  (the batch manager), one result per response: the fastest, one batch through the pool;
- an `async def` is awaited by the reward loop (`inspect.iscoroutinefunction`): `acompute_score`.

Each takes the `reward_kwargs` of the config as keywords: the scoring's (`shaped`, `scale`, `mode`,
`preset`, `compare` for comparator options such as `{abs_value: true}`, `details`, `by_data_source`),
the shared sandbox's (`timeout`, `memory_mb`, `workers`, `policy`, ...: `Sandbox`'s keyword arguments,
`potrun.rewards.SANDBOX_OPTIONS`; the running sandbox is kept while they stay the same), and the
keywords verl adds of its own (`VERL_KEYWORDS`: `reward_router_address`, ...), which are ignored. Any
other keyword is a UsageError naming it and the closest known one (a typo `shapped: true` would have
trained on binary rewards in silence), as is a comparator option the preset does not take.

`by_data_source` scores a dataset that mixes benchmarks each by its own rule: it maps a `data_source`
to the scoring options of its responses (`{preset: pot}`, or a preset's name alone; `mode`, `compare`,
`shaped`, `scale` too), and `"*"` to those of any other; a data source the mapping does not name, with
no `"*"`, is a UsageError. Without it, `data_source` does not change the scoring; `extra_info` never
does. The response (verl decodes it without special tokens) is read as `potrun.rewards` reads a
completion: a template token left at its end is dropped.

A result is a float (every manager accepts one: prime's only numbers), or with `details=True` verl's
dict: `score` (the reward), `acc` (correct), `pred` (the value as JSON text, "" without one) and
`status`, which verl logs beside the reward (`pred` is always a string: verl's majority vote reads it).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from typing import Any

from potrun.check.pipeline import RecordResult
from potrun.comparators import check_compare_options
from potrun.options import check_batch, check_options
from potrun.rewards import SANDBOX_OPTIONS, configure_if_changed, reward_of, reward_points, score_records
from potrun.sandbox.api import SandboxConfig, SandboxLike
from potrun.types import UsageError, json_safe

__all__ = ["acompute_score", "compute_score", "compute_score_batched"]

VerlScore = float | dict[str, Any]


def compute_score(
    data_source: Any,
    solution_str: str,
    ground_truth: Any,
    extra_info: Any = None,
    **options: Any,
) -> VerlScore:
    """The reward of one response, under verl's `compute_score` signature (module docstring)."""
    return compute_score_batched([data_source], [solution_str], [ground_truth], [extra_info], **options)[0]


async def acompute_score(
    data_source: Any,
    solution_str: str,
    ground_truth: Any,
    extra_info: Any = None,
    **options: Any,
) -> VerlScore:
    """`compute_score` for verl's async reward loop: the event loop goes on while the program runs
    (on a thread of the loop's executor; concurrent awaits share the one sandbox pool)."""
    return await asyncio.to_thread(compute_score, data_source, solution_str, ground_truth, extra_info, **options)


def compute_score_batched(
    data_sources: Sequence[Any],
    solution_strs: Sequence[str],
    ground_truths: Sequence[Any],
    extra_infos: Sequence[Any] | None = None,
    *,
    shaped: bool = False,
    scale: Mapping[str, float] | None = None,
    mode: str = "pot",
    preset: str = "default",
    compare: Mapping[str, Any] | None = None,
    details: bool = False,
    by_data_source: Mapping[str, Any] | None = None,
    sandbox: SandboxLike | None = None,
    **keywords: Any,
) -> list[VerlScore]:
    """One result per response, in order, under the signature of verl's batch reward manager.

    `sandbox`: a started Sandbox of your own instead of the shared one; `keywords`: the shared
    sandbox's options and verl's own (module docstring)."""
    check_batch(
        "potrun's verl reward", data_sources=data_sources, solution_strs=solution_strs, ground_truths=ground_truths
    )
    sandbox_config = _sandbox_config(keywords)
    if sandbox is None and sandbox_config is not None:
        configure_if_changed(sandbox_config)
    base = {"shaped": shaped, "scale": scale, "mode": mode, "preset": preset, "compare": compare}
    routes = _routes(data_sources, base, by_data_source, len(solution_strs))
    scores: list[VerlScore] = [0.0] * len(solution_strs)
    for options, indices in routes:
        points = reward_points(shaped=options["shaped"], scale=options["scale"])
        results = score_records(
            [solution_strs[i] for i in indices],
            [ground_truths[i] for i in indices],
            mode=options["mode"],
            preset=options["preset"],
            sandbox=sandbox,
            **dict(options["compare"] or {}),
        )
        for i, result in zip(indices, results, strict=True):
            scores[i] = _verl_result(result, reward_of(result, points), details=details)
    return scores


# The keywords verl itself adds to a custom reward function's call (its reward loop's, and its sandbox
# settings where configured), beside the config's reward_kwargs: accepted and ignored.
VERL_KEYWORDS = (
    "reward_router_address",
    "reward_model_tokenizer",
    "sandbox_fusion_url",
    "concurrent_semaphore",
    "memory_limit_mb",
)
SCORING_OPTIONS = ("shaped", "scale", "mode", "preset", "compare")  # what `by_data_source` may set
_OWN_OPTIONS = (*SCORING_OPTIONS, "details", "by_data_source", "sandbox")


def _sandbox_config(keywords: Mapping[str, Any]) -> SandboxConfig | None:
    """The shared sandbox's config of its options among `keywords` (None: none given); a keyword that
    is neither one nor verl's own is a UsageError naming the closest known one."""
    known = (*_OWN_OPTIONS, *SANDBOX_OPTIONS, *VERL_KEYWORDS)
    check_options(keywords, known, "potrun's verl reward (reward_kwargs)")
    options = {name: value for name, value in keywords.items() if name in SANDBOX_OPTIONS}
    return SandboxConfig(**options) if options else None


def _routes(
    data_sources: Sequence[Any], base: Mapping[str, Any], by_data_source: Mapping[str, Any] | None, count: int
) -> list[tuple[dict[str, Any], list[int]]]:
    """The responses grouped by the scoring options their data source takes: (options, indices)."""
    if len(data_sources) != count:
        raise UsageError(f"{len(data_sources)} data sources but {count} responses")
    if by_data_source is None:
        _check_scoring(base, "reward_kwargs")
        return [(dict(base), list(range(count)))]
    if not isinstance(by_data_source, Mapping):
        raise UsageError("by_data_source must map a data_source to its options (or to a preset's name)")
    chosen: dict[str, dict[str, Any]] = {}
    groups: dict[str, list[int]] = {}
    for index, data_source in enumerate(data_sources):
        key = str(data_source) if str(data_source) in by_data_source else "*"
        if key not in by_data_source:
            raise UsageError(
                f"data_source {str(data_source)[:80]!r} is not in by_data_source "
                f"(it names {', '.join(map(repr, list(by_data_source)[:20]))}; add it, or '*' for any other)"
            )
        if key not in chosen:
            chosen[key] = _options_for(base, by_data_source[key], key)
        groups.setdefault(key, []).append(index)
    return [(chosen[key], indices) for key, indices in groups.items()]


def _options_for(base: Mapping[str, Any], given: Any, data_source: str) -> dict[str, Any]:
    """`base` with a data source's options: a dict of SCORING_OPTIONS, or a preset's name."""
    where = f"by_data_source[{data_source[:80]!r}]"
    if isinstance(given, str):
        given = {"preset": given}
    if not isinstance(given, Mapping):
        raise UsageError(f"{where} must be a preset's name or a dict of {', '.join(SCORING_OPTIONS)}")
    check_options(given, SCORING_OPTIONS, where)
    options = {**base, **given}
    _check_scoring(options, where)
    return options


def _check_scoring(options: Mapping[str, Any], where: str) -> None:
    """The preset exists and takes the comparator options given (before any response runs)."""
    compare = options["compare"] or {}
    if not isinstance(compare, Mapping):
        raise UsageError(f"{where}: compare must be a dict of the preset's options")
    check_compare_options(options["preset"], compare, f"{where}: compare")


def _verl_result(result: RecordResult, reward: float, *, details: bool) -> VerlScore:
    """What verl's managers read back: the reward, or with `details` verl's dict beside it."""
    if not details:
        return reward
    pred = "" if result.value is None else json.dumps(json_safe(result.value))
    return {"score": reward, "acc": bool(result.correct), "pred": pred, "status": str(result.status)}
