"""potrun: a sandboxed program-of-thought execution runtime.

    model output --extract--> program / answer --execute in a sandbox--> value --compare--> verdict

Every public name is loaded on first use: the sandbox worker imports this package (inside containers
where only numpy and RestrictedPython are installed), and must import only what it runs, not the
pool and the facade, nor what needs more (regex, rich).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what type checkers see; at run time `__getattr__` imports each name on first use
    from potrun.check.pipeline import CheckOptions, RecordResult, check_records  # noqa: F401
    from potrun.check.records import read_records  # noqa: F401
    from potrun.check.scoring import (  # noqa: F401
        ChecklistItem,
        ChecklistResult,
        check_checklist,
        majority_vote,
        pass_at_k,
    )
    from potrun.comparators import PRESETS, compare, compare_many, parse_range  # noqa: F401
    from potrun.extractors import extract_answer, extract_program, parse_number  # noqa: F401
    from potrun.sandbox.api import Sandbox, SandboxConfig  # noqa: F401
    from potrun.types import (  # noqa: F401
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
    from potrun.validation import Problem, ValidationReport, validate  # noqa: F401

# Loaded on first use, by name -> module. No name here is also a submodule's name: `from potrun
# import X` reads the package attribute X, and importing a submodule X makes that attribute the
# module (tests/test_public_api.py checks every name).
_LAZY = {
    "Sandbox": "potrun.sandbox.api",
    "SandboxConfig": "potrun.sandbox.api",
    "BadRecord": "potrun.types",
    "Entry": "potrun.types",
    "ExecResult": "potrun.types",
    "InputError": "potrun.types",
    "Isolation": "potrun.types",
    "Limits": "potrun.types",
    "PotrunError": "potrun.types",
    "SandboxUnavailable": "potrun.types",
    "Status": "potrun.types",
    "UsageError": "potrun.types",
    "Verdict": "potrun.types",
    "compare": "potrun.comparators",
    "compare_many": "potrun.comparators",
    "PRESETS": "potrun.comparators",
    "parse_range": "potrun.comparators",
    "pass_at_k": "potrun.check.scoring",
    "majority_vote": "potrun.check.scoring",
    "check_checklist": "potrun.check.scoring",
    "ChecklistItem": "potrun.check.scoring",
    "ChecklistResult": "potrun.check.scoring",
    "CheckOptions": "potrun.check.pipeline",
    "RecordResult": "potrun.check.pipeline",
    "check_records": "potrun.check.pipeline",
    "read_records": "potrun.check.records",
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


__all__ = list(_LAZY)
