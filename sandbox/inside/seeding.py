"""Every random number generator a program can reach gives the same numbers in every run.

A program's value must not depend on when or where it ran. Python and the libraries potrun allows draw
OS entropy in a few places; the worker makes each of them draw from one deterministic stream instead
(`install`, once, before anything it imports makes a generator), and a runner puts every generator back
in its start state before each program (`reseed`):

- `random`'s module functions: `random.seed(SEED)`;
- `random.Random()` and `random.seed()` with no seed (which CPython seeds from the OS in C): the next
  draws of the stream, through `random.Random.seed`;
- `random.SystemRandom`, `secrets`, and numpy's `SeedSequence()` (so `np.random.default_rng()` and
  every numpy generator made without a seed), which read `random._urandom`: the stream's bytes;
- numpy's legacy global state (`np.random.seed(SEED)`) and sympy's two generators
  (`sympy.core.random.seed(SEED)`), where they are imported.

What remains OS entropy, for trusted programs only: `os.urandom`, `os.getrandom` and reading
/dev/urandom directly (the restricted policy reaches none of them). The stream restarts for each program,
so a program that makes two `Random()` gets two different generators, the same two every run.
"""

from __future__ import annotations

import random
import sys
from typing import Any

SEED = 0

_stream = random.Random(SEED)
_seed_with = random.Random.seed
_installed = False


def install() -> None:
    """Point the OS-entropy draws of `random` (and what uses it) at the stream. Idempotent."""
    global _installed
    if _installed:
        return
    _installed = True

    def seed(self: random.Random, a: Any = None, version: int = 2) -> None:
        _seed_with(self, _stream.getrandbits(128) if a is None else a, version)

    random.Random.seed = seed  # type: ignore[method-assign]
    random.seed = random._inst.seed  # bound to the old method at import
    random._urandom = _stream_bytes  # type: ignore[attr-defined]


def _stream_bytes(size: int) -> bytes:
    return _stream.getrandbits(8 * size).to_bytes(size, "little") if size > 0 else b""


def reseed() -> None:
    """Every generator back to its start state: before each program."""
    _seed_with(_stream, SEED)
    random.seed(SEED)
    numpy_random = sys.modules.get("numpy.random")
    if numpy_random is not None:
        numpy_random.seed(SEED)
    sympy_random = sys.modules.get("sympy.core.random")
    if sympy_random is not None:
        sympy_random.seed(SEED)
