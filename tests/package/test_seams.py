"""One type per seam (#40): what crosses a module or process boundary is one type, checked where it
enters, and potrun's own errors at every public edge.

- `SandboxConfig` travels from the caller to the backend: `Sandbox(...)`'s keywords are its fields,
  `from_config` keeps the config itself, and the backends import it from `sandbox/config.py`, never
  from the facade above them.
- Any bad option, of any type, is a UsageError naming it (never Python's TypeError or ValueError).
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import math
import os
import random
from pathlib import Path
from typing import Any

import pytest
from paths import REPO

from potrun import Sandbox, SandboxConfig, SandboxUnavailable, UsageError, rewards
from potrun.sandbox.config import BACKENDS, OPTION_NAMES
from potrun.sandbox.parent import pool as pool_module
from potrun.sandbox.parent.pool import Pool

# A value other than the default for each field the process backend takes (`backend` aside: another
# backend needs its engine).
NON_DEFAULTS: dict[str, Any] = {
    "policy": "trusted",
    "workers": 3,
    "timeout": 1.5,
    "wall_timeout": 7.0,
    "memory_mb": 300,
    "output_bytes": 5000,
    "isolation": "fork",
    "entry": "solution",
    "hash_seed": 9,
    "image": "some/image:tag",
}


def test_sandbox_keywords_are_the_config_fields():
    """One spelling that cannot drift: Sandbox's keywords are SandboxConfig's fields, same order and defaults."""
    parameters = list(inspect.signature(Sandbox.__init__).parameters.values())[1:]
    fields = dataclasses.fields(SandboxConfig)
    assert [p.name for p in parameters] == [f.name for f in fields] == list(OPTION_NAMES)
    assert [p.default for p in parameters] == [f.default for f in fields]


@pytest.mark.parametrize("name", sorted(NON_DEFAULTS))
def test_each_keyword_reaches_the_config(name):
    """Each keyword given to Sandbox arrives in its config (nothing starts: no worker is made)."""
    box = Sandbox(**{name: NON_DEFAULTS[name]})
    assert getattr(box.config, name) == NON_DEFAULTS[name]
    assert box.config == SandboxConfig(**{name: NON_DEFAULTS[name]})


def test_from_config_keeps_the_config_itself():
    config = SandboxConfig(**NON_DEFAULTS)
    box = Sandbox.from_config(config)
    assert box.config is config
    assert (box.workers, box.limits, str(box.isolation)) == (3, config.limits, "fork")
    companion = box.companion("restricted", "warm", workers=2)
    assert companion.config == dataclasses.replace(config, policy="restricted", isolation="warm", workers=2)


def test_from_config_refuses_anything_else():
    with pytest.raises(UsageError, match="SandboxConfig"):
        Sandbox.from_config({"policy": "trusted"})  # type: ignore[arg-type]


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


@pytest.mark.parametrize("module", ["config.py", "parent/process.py", "parent/docker.py", "parent/pool.py"])
def test_the_backends_never_import_the_facade(module):
    """The config and the registry sit below the backends: nothing under the facade imports it back."""
    assert "potrun.sandbox.api" not in _imports(REPO / "sandbox" / module)


def test_the_config_imports_no_backend():
    """The registry names its backends' modules; it imports them only when one is used."""
    backends = {entry.module for entry in BACKENDS.values()}
    assert backends == {"potrun.sandbox.parent.process", "potrun.sandbox.parent.docker"}
    assert not _imports(REPO / "sandbox" / "config.py") & backends


# -- bad options, generated ------------------------------------------------------------------------------

_ODD_VALUES: list[Any] = [
    None,
    True,
    -1,
    0,
    10**5000,
    -(10**30),
    math.nan,
    math.inf,
    -0.0,
    1e300,
    "",
    "x" * 10_000,
    "5",
    b"trusted",
    [],
    {},
    {"a": 1},
    (1,),
    object(),
    1 + 2j,
]


def _is_valid(name: str, value: Any) -> bool:
    try:
        SandboxConfig(**{name: value})
    except UsageError:
        return False
    return True


@pytest.mark.parametrize("seed", range(5))
def test_any_bad_option_is_a_usage_error(seed):
    """Seeded: any field given any odd value is accepted or refused as a UsageError naming the field,
    never a TypeError, ValueError or OverflowError from deeper down; Sandbox refuses it the same."""
    rng = random.Random(seed)
    for _ in range(60):
        name = rng.choice(OPTION_NAMES)
        value = rng.choice(_ODD_VALUES)
        try:
            SandboxConfig(**{name: value})
        except UsageError as exc:
            assert name in str(exc)
            assert len(str(exc)) < 400  # a huge value is quoted cut short
            with pytest.raises(UsageError):
                Sandbox(**{name: value})


@pytest.mark.parametrize(
    "name, value",
    [
        ("workers", 2.0),
        ("workers", True),
        ("hash_seed", "1"),
        ("hash_seed", -1),
        ("hash_seed", 2**32),
        ("output_bytes", 0),
        ("output_bytes", 1.5),
        ("image", 3),
        ("image", ""),
        ("policy", ["trusted"]),
        ("backend", {}),
        ("timeout", 10**5000),
        ("memory_mb", 10**5000),
    ],
    ids=lambda value: value if isinstance(value, str) and len(value) < 20 else type(value).__name__,
)
def test_odd_options_are_refused(name, value):
    """Those that once got through (a float worker count, a text hash seed) or raised Python's own error."""
    assert not _is_valid(name, value)


@pytest.mark.parametrize(
    "call",
    [
        lambda: SandboxConfig.from_options({"timout": 1}, "the test"),
        lambda: rewards.configure(timout=1),
        lambda: rewards.configure_if_changed(wokers=2),
        lambda: rewards.configure(SandboxConfig(), timeout=1),
        lambda: rewards.configure({"timeout": 1}),  # type: ignore[arg-type]
    ],
)
def test_the_shared_sandbox_refuses_unknown_options(call):
    with pytest.raises(UsageError):
        call()


def test_the_shared_sandbox_takes_a_config():
    config = SandboxConfig(timeout=1.0, workers=1)
    try:
        rewards.configure(config)
        assert rewards._state["config"] is config
        rewards.configure_if_changed(SandboxConfig(timeout=1.0, workers=1))
        assert rewards._state["config"] is config  # equal: kept
    finally:
        rewards.configure()


# -- the hello -------------------------------------------------------------------------------------------

from potrun.sandbox.wire.protocol import (  # noqa: E402
    PROTOCOL_VERSION,
    Hello,
    ProtocolError,
    ProtocolMismatch,
    decode,
    encode,
)

_GOOD_HELLO = Hello(
    pid=1, host_pid=4242, fork_server_pid=7, python="3.12.1", capabilities={"seccomp": True, "pid_namespace": False}
)


def test_a_hello_crosses_the_wire_whole():
    message = decode(encode(_GOOD_HELLO.to_wire())[4:])
    assert message["op"] == "hello" and message["protocol"] == PROTOCOL_VERSION
    assert Hello.from_wire(message) == _GOOD_HELLO
    assert Hello.from_wire(Hello(99).to_wire()) == Hello(99)  # a fake worker's: no host pid, no capability


@pytest.mark.parametrize("spoken", [PROTOCOL_VERSION - 1, PROTOCOL_VERSION + 1, None, "4", 4.0, True, "x" * 10**6])
def test_another_protocol_is_a_mismatch(spoken):
    message = {**_GOOD_HELLO.to_wire(), "protocol": spoken}
    with pytest.raises(ProtocolMismatch) as caught:
        Hello.from_wire(message)
    assert len(caught.value.spoken) <= 100


_BAD_FIELDS: list[tuple[str, Any]] = [
    ("op", "result"),
    ("pid", None),
    ("pid", 0),
    ("pid", -5),
    ("pid", 1 << 40),
    ("pid", 12.0),
    ("pid", True),
    ("pid", "12"),
    ("host_pid", "1"),
    ("host_pid", 2**64),
    ("fork_server_pid", [1]),
    ("python", 3.12),
    ("python", "x" * 1000),
    ("capabilities", []),
    ("capabilities", {"seccomp": 1}),
    ("capabilities", {"": True}),
    ("capabilities", {"n" * 1000: True}),
    ("capabilities", {f"c{i}": True for i in range(1000)}),
    ("extra", 1),
]


@pytest.mark.parametrize("name, value", _BAD_FIELDS, ids=[f"{name}-{i}" for i, (name, _) in enumerate(_BAD_FIELDS)])
def test_a_bad_hello_is_a_protocol_error(name, value):
    with pytest.raises(ProtocolError):
        Hello.from_wire({**_GOOD_HELLO.to_wire(), name: value})


@pytest.mark.parametrize("seed", range(5))
def test_generated_hellos_parse_or_are_refused(seed):
    """Seeded: a hello whose fields are drawn from good and hostile values either parses into exactly
    its fields' types, or is a ProtocolError; nothing else escapes the parse."""
    rng = random.Random(seed)
    pool: list[Any] = [None, 0, 1, 4242, -1, 2**70, 1.5, True, "", "3.12", "x" * 500, [], {}, {"a": True}, {"a": 1}]
    for _ in range(200):
        message = {"op": "hello", "protocol": PROTOCOL_VERSION, "pid": 12}
        for name in rng.sample(["pid", "host_pid", "fork_server_pid", "python", "capabilities"], rng.randint(1, 3)):
            message[name] = rng.choice(pool)
        try:
            hello = Hello.from_wire(message)
        except ProtocolError:
            continue
        assert type(hello.pid) is int and hello.pid > 0
        assert hello.host_pid is None or type(hello.host_pid) is int
        assert type(hello.python) is str and len(hello.python) <= 40
        assert all(type(k) is str and type(v) is bool for k, v in hello.capabilities.items())


def test_the_pool_holds_each_workers_hello():
    """A real worker's hello arrives typed: the pool's slots hold a Hello, the capabilities come from it."""
    with Sandbox(workers=1, timeout=5) as box:
        box.run("ans = 1")
        assert box._pool is not None
        hello = box._pool.slots[0].hello
        assert isinstance(hello, Hello) and hello.host_pid and hello.fork_server_pid
        assert box.capabilities == hello.capabilities and box.capabilities


class _Greeter:
    """A worker that says `hello` (a message, not necessarily a good one) and nothing else."""

    def __init__(self, hello: dict[str, Any]) -> None:
        self._read, write = os.pipe()
        os.write(write, encode(hello))
        os.close(write)
        self.killed = False

    def read_fd(self) -> int:
        return self._read

    def write_fd(self) -> int:
        return self._read

    def read(self) -> bytes:
        return os.read(self._read, 1 << 16)

    def write(self, data: bytes) -> int:
        raise BrokenPipeError

    def kill(self) -> None:
        if not self.killed:
            self.killed = True
            os.close(self._read)


class _GreeterBackend:
    name = "greeter"

    def __init__(self, hello: dict[str, Any]) -> None:
        self.hello = hello
        self.workers: list[_Greeter] = []

    def start_worker(self, slot: int) -> _Greeter:
        self.workers.append(_Greeter(self.hello))
        return self.workers[-1]

    def close(self) -> None:
        pass


def test_a_worker_of_another_protocol_is_refused_at_once():
    backend = _GreeterBackend({**_GOOD_HELLO.to_wire(), "protocol": PROTOCOL_VERSION - 1})
    with pytest.raises(SandboxUnavailable, match="rebuild the sandbox image"):
        Pool(backend, 1).start()
    assert len(backend.workers) == 1 and backend.workers[0].killed  # not tried again: it would not change


@pytest.mark.parametrize("name, value", [("pid", "1"), ("capabilities", {"x": "yes"}), ("extra", 0)])
def test_a_worker_with_a_bad_hello_is_killed_and_tried_again(monkeypatch, name, value):
    monkeypatch.setattr(pool_module, "START_PAUSES_S", (0.01, 0.01, 0.01))
    backend = _GreeterBackend({**_GOOD_HELLO.to_wire(), name: value})
    with pytest.raises(SandboxUnavailable, match="its hello was not the protocol's"):
        Pool(backend, 1).start()
    assert len(backend.workers) == pool_module.START_TRIES and all(worker.killed for worker in backend.workers)


def test_the_enums_are_choices_too():
    """An Isolation or Entry (a StrEnum) is as good as its text: the pipeline's checker companion asks
    for Isolation.FORK."""
    from potrun.types import Entry, Isolation

    config = SandboxConfig(isolation=Isolation.FORK, entry=Entry.SOLUTION)
    assert config.tier is Isolation.FORK
    box = Sandbox(policy="trusted")
    assert box.companion("trusted", Isolation.FORK).isolation is Isolation.FORK
    assert box.request("ans = 1", Entry.ANS).entry == "ans"
