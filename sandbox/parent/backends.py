"""The backends a `Sandbox` runs on, by name: how to make each, and whether it can run here.

Each backend is one module that provides two functions (`BackendModule`):

- `make_backend(config)`: the `Backend` (pool.py's interface) for a `SandboxConfig`;
- `unavailable(config)`: why it cannot run here (a missing extra, no engine, no image), or None.

A module is imported only when its backend is used: the docker SDK is an extra, and `potrun check`
with the process backend never imports the docker backend. Iterating `BACKENDS` gives the names (the
CLI's `--backend` choices, `potrun doctor`, the tests' backend parameter). Adding a backend: its
module, and one line here.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Protocol, cast

if TYPE_CHECKING:
    from potrun.sandbox.api import SandboxConfig
    from potrun.sandbox.parent.pool import Backend


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
