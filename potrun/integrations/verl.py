"""potrun as verl's custom reward function.

    # verl's trainer config
    custom_reward_function:
      path: pkg://potrun.integrations.verl
      name: compute_score            # reward managers naive, dapo, prime and the reward loop
      # name: compute_score_batched  # reward manager batch
      # name: acompute_score         # the reward loop, awaited on its event loop
      reward_kwargs: {shaped: false, mode: pot, details: false}   # optional

What verl calls (its source, verl/workers/reward_manager/ and verl/experimental/reward_loop/):
- `compute_score(data_source=..., solution_str=..., ground_truth=..., extra_info=...)`, one response
  per call: the naive and dapo managers in a loop, the reward loop from its executor's threads;
  prime's manager positionally, `(data_source, solution_str, ground_truth, extra_info)`, from a
  process pool (each process then starts its own shared sandbox: prefer batch);
- `compute_score_batched(data_sources=..., solution_strs=..., ground_truths=..., extra_infos=...)`
  (the batch manager), one result per response: the fastest, one batch through the pool;
- an `async def` is awaited by the reward loop (`inspect.iscoroutinefunction`): `acompute_score`.

Each takes the `reward_kwargs` of the config as keywords (`shaped`, `scale`, `mode`, `preset`,
`compare` for comparator options such as `{abs_value: true}`, `details`) and ignores the keywords verl adds of its own
(`reward_router_address`, `sandbox_fusion_url`, ...). `data_source` and `extra_info` do not change the
scoring. The response (verl decodes it without special tokens) is read as `potrun.rewards` reads a
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

from potrun.pipeline import RecordResult
from potrun.rewards import reward_of, reward_points, score_records
from potrun.sandbox.api import SandboxLike
from potrun.types import json_safe

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
    sandbox: SandboxLike | None = None,
    **verl_keywords: Any,
) -> list[VerlScore]:
    """One result per response, in order, under the signature of verl's batch reward manager.

    `sandbox`: a started Sandbox of your own instead of the shared one (`potrun.rewards.configure`
    sets the shared one's options); `verl_keywords`, verl's own extras, are ignored."""
    points = reward_points(shaped=shaped, scale=scale)
    results = score_records(
        solution_strs, ground_truths, mode=mode, preset=preset, sandbox=sandbox, **dict(compare or {})
    )
    return [_verl_result(result, reward_of(result, points), details=details) for result in results]


def _verl_result(result: RecordResult, reward: float, *, details: bool) -> VerlScore:
    """What verl's managers read back: the reward, or with `details` verl's dict beside it."""
    if not details:
        return reward
    pred = "" if result.value is None else json.dumps(json_safe(result.value))
    return {"score": reward, "acc": bool(result.correct), "pred": pred, "status": str(result.status)}
