"""potrun: a sandboxed program-of-thought execution runtime.

    model output --extract--> program / answer --execute in a sandbox--> value --compare--> verdict

The sandbox worker imports this package inside containers where only numpy and RestrictedPython are
installed, so the names that need more (regex, rich) are loaded on first use.
"""

from __future__ import annotations

from typing import Any

from potrun.sandbox.api import Sandbox
from potrun.types import (
    BadRecord,
    Entry,
    ExecResult,
    InputError,
    Isolation,
    Limits,
    PotrunError,
    SandboxUnavailable,
    Status,
    UsageError,
    Verdict,
)

# Loaded on first use, by name -> module. No name here is also a submodule's name: `from potrun
# import X` reads the package attribute X, and importing a submodule X makes that attribute the
# module (tests/test_public_api.py checks every name).
_LAZY = {
    "compare": "potrun.comparators",
    "compare_many": "potrun.comparators",
    "PRESETS": "potrun.comparators",
    "parse_range": "potrun.comparators",
    "pass_at_k": "potrun.scoring",
    "majority_vote": "potrun.scoring",
    "check_checklist": "potrun.scoring",
    "ChecklistItem": "potrun.scoring",
    "ChecklistResult": "potrun.scoring",
    "CheckOptions": "potrun.pipeline",
    "RecordResult": "potrun.pipeline",
    "check_records": "potrun.pipeline",
    "read_records": "potrun.records",
    "extract_program": "potrun.extractors",
    "extract_answer": "potrun.extractors",
    "parse_number": "potrun.extractors",
    "validate": "potrun.validation",
    "ValidationReport": "potrun.validation",
    "Problem": "potrun.validation",
}


def __getattr__(name: str) -> Any:
    if name == "__version__":
        return _version()
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'potrun' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


def _version() -> str:
    """The installed distribution's version: pyproject.toml's `version` is its only home. A source
    tree that is not installed (a sandbox image runs the worker from one) reports "0+unknown"."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("potrun")
    except PackageNotFoundError:
        return "0+unknown"


__all__ = [
    "BadRecord",
    "Entry",
    "ExecResult",
    "InputError",
    "Isolation",
    "Limits",
    "PotrunError",
    "Sandbox",
    "SandboxUnavailable",
    "Status",
    "UsageError",
    "Verdict",
    *_LAZY,
]
