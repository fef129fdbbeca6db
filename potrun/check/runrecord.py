"""The run's record: what a reported number can be traced back to.

potrun's version and a fingerprint of the rules that decide a verdict (the sources of the extractors,
comparators, benchmarks and policies: two runs under different rules never share a trace, even where a
version was not bumped), every option and limit in force (the check options and the SandboxConfig), the
inputs (path, size and SHA-256), when the run started and ended (UTC, ISO 8601) and the machine (cores,
Python, numpy, platform, and which tiers this Python has, with why). A regular file is hashed whole
after the run, in chunks (a 10 GB file is not held); a stream (standard input, a pipe, a FIFO) was read
once and is gone, so its size and hash are null with the reason.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib
import os
import platform
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from potrun.check.pipeline import CheckOptions
    from potrun.sandbox.api import SandboxConfig

_HASH_CHUNK = 1 << 20
# The packages whose code decides a verdict: what is read from an output, how it is compared, a
# benchmark's official rules, and what the policy refuses.
RULE_PACKAGES = ("potrun.extractors", "potrun.comparators", "potrun.benchmarks", "potrun.policies")


def utc_now() -> str:
    """The current time, UTC, ISO 8601 to the second (`2026-12-02T05:27:40Z`)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def file_identity(path: str | Path) -> dict[str, Any]:
    """`path` (as given, and resolved), `size_bytes` and `sha256` of an input; for a stream size and
    hash are null and a `reason` says why."""
    from potrun.check.records import is_stream

    if is_stream(path):
        return {"path": str(path), "size_bytes": None, "sha256": None, "reason": "a stream: read once, not hashed"}
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as handle:
        while chunk := handle.read(_HASH_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return {
        "path": str(path),
        "absolute_path": str(Path(path).resolve()),
        "size_bytes": size,
        "sha256": digest.hexdigest(),
    }


def machine() -> dict[str, Any]:
    """The machine that ran: cores, Python, numpy, platform, and the tiers this Python has (`tiers`,
    and `tiers_why`: the warm tier needs a release whose bytecode the verifier's review covers; the
    process backend's, since a container runs the image's own Python)."""
    import numpy

    from potrun.policies.pure import warm_tier_refusal

    refusal = warm_tier_refusal()
    return {
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "numpy": numpy.__version__,
        "platform": platform.platform(),
        "tiers": ["fork"] if refusal else ["warm", "fork"],
        "tiers_why": refusal
        or f"Python {platform.python_version()}'s bytecode is reviewed: programs proven pure "
        "take the warm tier, every other forks",
    }


@functools.cache
def rules_fingerprint() -> dict[str, Any]:
    """SHA-256 over the Python sources of each of RULE_PACKAGES (file names and bytes, sorted), and
    one `digest` over those: what a verdict's rules were, whatever the version string says."""
    parts = {package.removeprefix("potrun."): _package_digest(package) for package in RULE_PACKAGES}
    whole = hashlib.sha256("".join(f"{name}={digest}\n" for name, digest in parts.items()).encode())
    return {"digest": whole.hexdigest(), "parts": parts}


def _package_digest(package: str) -> str:
    folder = Path(importlib.import_module(package).__path__[0])
    digest = hashlib.sha256()
    for source in sorted(folder.rglob("*.py")):
        digest.update(source.relative_to(folder).as_posix().encode() + b"\0")
        digest.update(source.read_bytes() + b"\0")
    return digest.hexdigest()


def run_record(
    *,
    inputs: dict[str, str | Path],
    check_options: CheckOptions,
    sandbox_config: SandboxConfig,
    command: list[str] | None = None,
) -> dict[str, Any]:
    """The record of one `potrun check`: `inputs` by role (`preds`, `gold`), the CheckOptions and the
    SandboxConfig as data (with the limits the config resolves to) and the machine. The Summary adds
    the start and end times and the tiers used."""
    import potrun

    limits = sandbox_config.limits
    config = dataclasses.asdict(sandbox_config) | {
        "tier": str(sandbox_config.tier),
        "worker_count": sandbox_config.worker_count,
        "limits": dataclasses.asdict(limits) | {"wall_limit_s": limits.wall_limit_s},
    }
    return {
        "potrun_version": potrun.__version__,
        "rules": rules_fingerprint(),
        "command": ["potrun", *command] if command is not None else None,
        "inputs": {role: file_identity(path) for role, path in inputs.items()},
        "check_options": _options(check_options),
        "sandbox_config": config,
        "machine": machine(),
    }


def _options(check_options: CheckOptions) -> dict[str, Any]:
    """The check options as data; a benchmark's rules (code, not data) by the benchmark's name."""
    options = {option.name: getattr(check_options, option.name) for option in dataclasses.fields(check_options)}
    options["compare_options"] = dict(check_options.compare_options)
    options["benchmark"] = check_options.benchmark.name if check_options.benchmark is not None else None
    return options


__all__ = ["RULE_PACKAGES", "file_identity", "machine", "rules_fingerprint", "run_record", "utc_now"]
