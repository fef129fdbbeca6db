"""potrun: a sandboxed program-of-thought execution runtime.

    model output --extract--> program / answer --execute in a sandbox--> value --compare--> verdict
"""

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
]
