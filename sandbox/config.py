"""A sandbox's options and the backends it can run on: the one type that travels from the caller to
the backend, and the registry of backends by name. The facade (`api.py`) makes a `Sandbox` from a
config; each backend (`parent/process.py`, `parent/docker.py`) makes its workers from the same config.
This module imports no backend and nothing above it: the backends import it.

- `SandboxConfig`: a sandbox's options, checked when it is made and nothing more (no backend is
  touched: nothing connects to Docker or cleans a directory), so a config can be checked early,
  shipped to Ray actors and varied with `dataclasses.replace`. `SandboxConfig.from_options(mapping,
  where)` makes one from options given by name (a trainer's config, a JSON body): an unknown name is
  a UsageError naming the closest known one.
- `BACKENDS`: name -> the module of a backend, which provides two functions (`BackendModule`):
  `make_backend(config)`, the `Backend` (pool.py's interface) for a config, and `unavailable(config)`,
  why it cannot run here (a missing extra, no engine, no image), or None.

A backend's module is imported only when the backend is used: the docker SDK is an extra, and `potrun
check` with the process backend never imports the docker backend. Iterating `BACKENDS` gives the names
(the CLI's `--backend` choices, `potrun doctor`, the tests' backend parameter). Adding a backend: its
module, and one line here.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol, cast

from potrun.options import check_options
from potrun.policies import POLICY_NAMES
from potrun.types import (
    DEFAULT_MEMORY_MB,
    DEFAULT_OUTPUT_BYTES,
    DEFAULT_TIMEOUT_S,
    Entry,
    Isolation,
    Limits,
    UsageError,
)

if TYPE_CHECKING:
    from potrun.sandbox.parent.pool import Backend

__all__ = [
    "BACKENDS",
    "MAX_MEMORY_MB",
    "MAX_TIMEOUT_S",
    "BackendEntry",
    "BackendModule",
    "SandboxConfig",
    "default_workers",
    "unavailable",
]


# -- the backends ----------------------------------------------------------------------------------------


class BackendModule(Protocol):
    """What a backend's module provides."""

    def make_backend(self, config: SandboxConfig) -> Backend: ...
    def unavailable(self, config: SandboxConfig) -> str | None: ...


@dataclass(frozen=True, slots=True)
class BackendEntry:
    """A registered backend: the module that holds it, imported on first use."""

    module: str

    def make(self, config: SandboxConfig) -> Backend:
        return self._load().make_backend(config)

    def unavailable(self, config: SandboxConfig) -> str | None:
        """Why this backend cannot run `config` here, or None when it can."""
        return self._load().unavailable(config)

    def _load(self) -> BackendModule:
        return cast("BackendModule", importlib.import_module(self.module))


BACKENDS: Mapping[str, BackendEntry] = MappingProxyType(
    {
        "process": BackendEntry("potrun.sandbox.parent.process"),
        "docker": BackendEntry("potrun.sandbox.parent.docker"),
    }
)


def unavailable(config: SandboxConfig) -> str | None:
    """Why `config`'s backend cannot run here (the tests skip on it, `doctor` reports it), or None."""
    return BACKENDS[config.backend].unavailable(config)


def default_workers(isolation: Isolation = Isolation.WARM) -> int:
    """One worker per core; two for fork isolation, where a worker waits while its fork runs and exits
    (two per core gave more programs/s than one, more than two no gain: docs/performance.md)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return 2 * cores if isolation is Isolation.FORK else cores


# -- the config ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SandboxConfig:
    """The options of a Sandbox (its keyword arguments), checked as the config is made: a bad one is a
    UsageError that names it."""

    backend: str = "process"
    policy: str = "restricted"
    workers: int | None = None  # None (or 0): default_workers(), which reads this machine's cores
    timeout: float = DEFAULT_TIMEOUT_S
    wall_timeout: float | None = None
    memory_mb: int = DEFAULT_MEMORY_MB
    output_bytes: int = DEFAULT_OUTPUT_BYTES
    isolation: str | None = None  # None: "warm"
    entry: str = "auto"
    hash_seed: int = 0
    image: str | None = None  # --backend docker; None: the docker backend's DEFAULT_IMAGE

    def __post_init__(self) -> None:
        check_choice("backend", self.backend, tuple(BACKENDS))
        check_choice("policy", self.policy, POLICY_NAMES)
        if self.isolation is not None:
            check_choice("isolation", self.isolation, tuple(tier.value for tier in Isolation))
        check_choice("entry", self.entry, tuple(entry.value for entry in Entry))
        check_seconds("timeout", self.timeout)
        check_megabytes("memory_mb", self.memory_mb)
        _check_whole("output_bytes", self.output_bytes, 1, MAX_OUTPUT_BYTES)
        if self.wall_timeout is not None:
            check_seconds("wall_timeout", self.wall_timeout)
        if self.workers is not None:
            _check_whole("workers", self.workers, 0, MAX_WORKERS)
        _check_whole("hash_seed", self.hash_seed, 0, MAX_HASH_SEED)
        if self.image is not None and (type(self.image) is not str or not 0 < len(self.image) <= MAX_IMAGE_CHARS):
            raise UsageError(f"image must be an image's name, not {_shown(self.image)}")

    @classmethod
    def from_options(cls, options: Mapping[Any, Any], where: str) -> SandboxConfig:
        """The config of options given by name (`where` names their source in the error): an unknown
        name is a UsageError naming the closest known one, not Python's TypeError."""
        check_options(options, OPTION_NAMES, where)
        return cls(**options)

    @property
    def tier(self) -> Isolation:
        return Isolation(self.isolation) if self.isolation else Isolation.WARM

    @property
    def worker_count(self) -> int:
        return self.workers or default_workers(self.tier)

    @property
    def limits(self) -> Limits:
        return Limits(
            timeout_s=self.timeout,
            wall_timeout_s=self.wall_timeout,
            memory_mb=self.memory_mb,
            output_bytes=self.output_bytes,
        )


OPTION_NAMES = tuple(option.name for option in fields(SandboxConfig))

# The largest limits a program may be given. Past them the pool's own arithmetic breaks (a wall net
# past time_t made select() raise on the pool's thread, which then failed every later program; a
# float memory_mb broke the request header's struct), so they are refused here, as the call is made.
MAX_TIMEOUT_S = 24 * 3600.0
MAX_MEMORY_MB = 1024 * 1024
MAX_OUTPUT_BYTES = 1 << 40
MAX_WORKERS = 4096
MAX_PROCESSES = 4096
MAX_HASH_SEED = 4294967295  # PYTHONHASHSEED's range
MAX_IMAGE_CHARS = 4096


def check_choice(option: str, value: object, choices: tuple[str, ...]) -> None:
    if not isinstance(value, str) or value not in choices:  # not `in` alone: an unhashable value would raise
        raise UsageError(f"unknown {option} {_shown(value)}; choose one of {', '.join(choices)}")


def check_seconds(option: str, value: object) -> None:
    if type(value) not in (int, float) or not 0 < value <= MAX_TIMEOUT_S:  # type: ignore[operator]
        raise UsageError(f"{option} must be a number of seconds in (0, {MAX_TIMEOUT_S:g}], not {_shown(value)}")


def check_megabytes(option: str, value: object) -> None:
    _check_whole(option, value, 1, MAX_MEMORY_MB, unit=" of MB")


def check_limits(limits: object) -> None:
    """A caller's own Limits (in a prepared RunRequest): each field's type and bounds, as a Sandbox's."""
    if not isinstance(limits, Limits):
        raise UsageError(f"limits must be a Limits, not {type(limits).__name__}")
    check_seconds("limits.timeout_s", limits.timeout_s)
    if limits.wall_timeout_s is not None:
        check_seconds("limits.wall_timeout_s", limits.wall_timeout_s)
    check_megabytes("limits.memory_mb", limits.memory_mb)
    _check_whole("limits.output_bytes", limits.output_bytes, 1, MAX_OUTPUT_BYTES)
    _check_whole("limits.max_processes", limits.max_processes, 1, MAX_PROCESSES)


def _check_whole(option: str, value: object, low: int, high: int, unit: str = "") -> None:
    """`value` is an int (not a bool) in [low, high]; NaN, floats and text are refused too."""
    if type(value) is not int or not low <= value <= high:
        raise UsageError(f"{option} must be a whole number{unit} in [{low}, {high}], not {_shown(value)}")


def _shown(value: object) -> str:
    """A bad option as the error quotes it: plain data's repr, cut short (an option may come from a
    client's JSON body); anything else by its type alone."""
    if type(value) is int and value.bit_length() > 64:  # repr() of a 10**5000 raises (int_max_str_digits)
        return "a very large int"
    if type(value) in (str, int, float, bool, type(None)):
        text = repr(value)
        return text if len(text) <= 80 else text[:77] + "..."
    return f"a {type(value).__name__}"
