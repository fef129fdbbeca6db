"""potrun as OpenRLHF's reward function, in process or over HTTP.

    # in process: OpenRLHF loads `reward_func` from the .py file that --remote_rm_url names
    --remote_rm_url "$(python -c 'import potrun.integrations.openrlhf as m; print(m.__file__)')"
    # other options: a file of your own, `reward_func = make_reward_func(shaped=True, mode="cot")`

    # over HTTP: `potrun serve` answers OpenRLHF's remote reward-model protocol
    --remote_rm_url http://HOST:PORT/openrlhf/reward

What OpenRLHF does (openrlhf/utils/agent.py, SingleTurnAgentExecutor): it loads the file with
`importlib.util.spec_from_file_location("reward_func", path)` (so this module imports only absolute
names), and calls `reward_func(queries, prompts, labels)` with one sample per call from
`asyncio.to_thread`, many at once (the shared sandbox takes them from any number of threads); over
HTTP it POSTs `{"query": [...], "prompts": [...], "labels": [...]}`. It reads back `rewards` (for the
advantage), `scores` (in [0, 1], for dynamic filtering) and `extra_logs` (each key logged), and turns
each into a tensor itself (`torch.tensor([value])`, older versions `torch.as_tensor`): plain lists
serve both ways, so no torch is needed or imported here.

A query is the prompt plus the response, decoded with the chat template's special tokens kept: only
the response is scored (`potrun.extractors.response_text`: the prompt cut off, else everything up to
the last assistant-turn marker; the end-of-turn tokens dropped). A program in the prompt's few-shot
examples is never run.

Results: `rewards` on the `BINARY` scale (`shaped=True`: `SHAPED`; or a `scale` of your own),
`scores` the verdict as 1.0/0.0 (a preset's continuous score where it has one), `extra_logs`
{"executed": 1.0 when the program ran and answered, else 0.0}, each a list with one number a query.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from potrun.check.pipeline import RecordResult
from potrun.comparators import check_compare_options
from potrun.extractors import response_text
from potrun.options import check_batch, check_options
from potrun.rewards import SANDBOX_OPTIONS, configure_if_changed, reward_of, reward_points, score_records
from potrun.sandbox.api import SandboxConfig, SandboxLike
from potrun.types import UsageError

__all__ = ["make_reward_func", "reward_func", "reward_payload", "score_queries"]


def score_queries(
    queries: Sequence[str],
    prompts: Sequence[str | None],
    labels: Sequence[Any],
    *,
    shaped: bool = False,
    scale: Mapping[str, float] | None = None,
    mode: str = "pot",
    preset: str = "default",
    compare: Mapping[str, Any] | None = None,
    sandbox: SandboxLike | None = None,
) -> dict[str, Any]:
    """OpenRLHF's reward dict for (query, prompt, label) triples, in order (module docstring).
    `sandbox`: a started Sandbox of your own instead of the shared one."""
    check_batch("OpenRLHF's reward", queries=queries, prompts=prompts, labels=labels)
    if len(prompts) != len(queries):
        raise UsageError(f"{len(queries)} queries but {len(prompts)} prompts")
    responses = [response_text(query, prompt) for query, prompt in zip(queries, prompts, strict=True)]
    points = reward_points(shaped=shaped, scale=scale)
    results = score_records(responses, labels, mode=mode, preset=preset, sandbox=sandbox, **dict(compare or {}))
    return {
        "rewards": [reward_of(result, points) for result in results],
        "scores": [_verdict_score(result) for result in results],
        "extra_logs": {"executed": [1.0 if result.status == "ok" else 0.0 for result in results]},
    }


_SCORING_OPTIONS = ("shaped", "scale", "mode", "preset", "compare", "sandbox")


def make_reward_func(**options: Any) -> Callable[..., dict[str, Any]]:
    """A `reward_func(queries, prompts, labels, **kwargs)` for OpenRLHF, scoring with `options`: those
    of `score_queries`, and the shared sandbox's (`timeout`, `memory_mb`, `workers`, ...: `Sandbox`'s
    keyword arguments). Any other option, or a comparator option the preset does not take, is a
    UsageError now, naming the closest known one. OpenRLHF's own keywords at call time are ignored."""
    check_options(options, (*_SCORING_OPTIONS, *SANDBOX_OPTIONS), "make_reward_func")
    scoring = {name: value for name, value in options.items() if name in _SCORING_OPTIONS}
    sandbox_options = {name: value for name, value in options.items() if name in SANDBOX_OPTIONS}
    # checked now, not at the first reward
    sandbox_config = SandboxConfig.from_options(sandbox_options, "make_reward_func") if sandbox_options else None
    compare = scoring.get("compare") or {}
    if not isinstance(compare, Mapping):
        raise UsageError("make_reward_func: compare must be a dict of the preset's options")
    check_compare_options(scoring.get("preset", "default"), compare, "make_reward_func: compare")

    def reward_func(queries: Sequence[str], prompts: Sequence[str | None], labels: Sequence[Any], **_: Any) -> Any:
        if sandbox_config is not None and scoring.get("sandbox") is None:
            configure_if_changed(sandbox_config)
        return score_queries(queries, prompts, labels, **scoring)

    return reward_func


reward_func = make_reward_func()


def reward_payload(payload: Mapping[str, Any], sandbox: SandboxLike, **options: Any) -> dict[str, Any]:
    """The answer to one POST of OpenRLHF's remote reward-model protocol: `payload` is its JSON body
    (`query`, `prompts` optional, `labels`), untrusted; a malformed one is a UsageError naming the
    field. `options`: those of `score_queries`."""
    if not isinstance(payload, Mapping):
        raise UsageError("the body must be a JSON object with query, prompts and labels")
    check_options(payload, ("query", "prompts", "labels"), "OpenRLHF's reward body")
    queries = _list_field(payload, "query")
    if not all(isinstance(query, str) for query in queries):
        raise UsageError("'query' must be a list of strings")
    labels = _list_field(payload, "labels")
    prompts = _list_field(payload, "prompts") if payload.get("prompts") is not None else [None] * len(queries)
    if not all(prompt is None or isinstance(prompt, str) for prompt in prompts):
        raise UsageError("'prompts' must be a list of strings")
    return score_queries(queries, prompts, labels, sandbox=sandbox, **options)


def _list_field(payload: Mapping[str, Any], name: str) -> list[Any]:
    value = payload.get(name)
    if not isinstance(value, list):
        raise UsageError(f"the body needs {name!r}, a list (OpenRLHF sends query, prompts and labels)")
    return value


def _verdict_score(result: RecordResult) -> float:
    """In [0, 1] for OpenRLHF's dynamic filtering: the preset's continuous score, else the verdict."""
    return result.score if result.score is not None else (1.0 if result.correct else 0.0)
