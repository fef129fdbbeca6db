"""Benchmarks out of the box: `potrun check FILE --benchmark NAME` reads a benchmark's own files and
reproduces its official verdicts and metrics (issue #17; README "Benchmarks").

One module per benchmark, each with `for_file(path, strict) -> BenchmarkRun` (`potrun.check.pipeline`): the
rules for that file (what its path says: DocMath's prompt type, FineReason's puzzle and task), each
record's plan (programs to run, then the official judge of their results) and the benchmark's metrics.
`strict` applies potrun's own rules where they read the model more rightly than the official code
(a later corrected block, a `py` fence); the metrics then say how many records differ.
"""

from __future__ import annotations

import importlib
from typing import Any, Protocol

from potrun.check.pipeline import BenchmarkRun
from potrun.types import UsageError

# name -> module (imported when chosen: a benchmark's rules may need an extra)
BENCHMARKS: dict[str, str] = {
    "docmath": "potrun.benchmarks.docmath",
    "docpuzzle": "potrun.benchmarks.docpuzzle",
    "finereason": "potrun.benchmarks.finereason",
    "longdocurl": "potrun.benchmarks.longdocurl",
}


class BenchmarkModule(Protocol):
    SANDBOX: dict[str, Any]  # sandbox settings the official code implies (policy, timeout), applied by the CLI

    def for_file(self, path: str, strict: bool = False) -> BenchmarkRun: ...


def get_benchmark(name: str) -> BenchmarkModule:
    """The benchmark module registered under `name` (a UsageError names the choices)."""
    if name not in BENCHMARKS:
        raise UsageError(f"unknown benchmark {name!r}; choose one of {', '.join(sorted(BENCHMARKS))}")
    module: BenchmarkModule = importlib.import_module(BENCHMARKS[name])
    return module


__all__ = ["BENCHMARKS", "BenchmarkModule", "get_benchmark"]
