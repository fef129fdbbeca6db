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

__version__ = "0.1.0"

_LAZY = {
    "compare": "potrun.compare",
    "compare_many": "potrun.compare",
    "PRESETS": "potrun.compare",
    "parse_range": "potrun.compare",
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
    "validate": "potrun.validate",
    "ValidationReport": "potrun.validate",
    "Problem": "potrun.validate",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'potrun' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


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
