"""Shared fixtures for the sandbox tests.

Pools are expensive (each worker imports numpy), so one `Sandbox` per (policy, backend) serves a whole
session (one per xdist process). Backends are a fixture parameter: "process" always, "docker" marked
`docker` and skipped with the reason when it cannot run here (the registry's own check: no docker SDK,
no engine or no `potrun-sandbox:latest` image), except under POTRUN_REQUIRE_DOCKER=1 (CI), where that
is a failure.

The helpers at the bottom look at the machine from outside the sandbox (the process table, the test
process's own memory, a socket the test listens on): what a program did must be checked where it
would show, never by asking the sandbox.
"""

from __future__ import annotations

import functools
import json
import math
import os
import secrets
import signal
import socket
import subprocess
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import potrun.sandbox.parent.docker
from potrun import ExecResult, Sandbox, Status
from potrun.sandbox.api import SandboxConfig
from potrun.sandbox.config import BACKENDS, unavailable
from potrun.sandbox.wire.protocol import RunRequest

# Tests send SIGINT to the potrun commands they start (Ctrl-C's path). A shell starts a background job with
# SIGINT ignored, and an ignored signal is inherited through exec: the commands would then ignore it too.
# A handler is not inherited (exec resets it to the default), so the children get Python's KeyboardInterrupt.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

POLICIES = ("restricted", "trusted")
WORKERS = 2
TIMEOUT_S = 2.0  # the hostile programs' limit
# Not the 2 GiB default: a program reaches its memory limit by page-faulting all of it, 0.9-1.7 s of CPU
# for 2 GiB on this 2-core VM, and under `-n 2` load (busy loops timing out alongside) it gets a third of
# a core, so the 2 s wall limit would strike first. 512 MiB is ~0.2 s; numpy and sympy still import.
MEMORY_MB = 512
CANARY_ENV = "POTRUN_CANARY_SECRET"
# The image the docker tests run: POTRUN_TEST_IMAGE names another (one's own build, so as not to replace
# the image others test with); every docker backend the tests make then defaults to it.
DOCKER_IMAGE = os.environ.get("POTRUN_TEST_IMAGE", potrun.sandbox.parent.docker.DEFAULT_IMAGE)
potrun.sandbox.parent.docker.DEFAULT_IMAGE = DOCKER_IMAGE
WORKER_MODULE = "potrun.sandbox.inside.worker"

# Every registered backend; each but the process backend needs more than potrun (an engine, an image)
# and carries the marker of its name (`-m "not docker"`; a new backend registers its marker in
# pyproject.toml).
BACKEND_PARAMS = [
    pytest.param(name, id=name, marks=() if name == "process" else getattr(pytest.mark, name)) for name in BACKENDS
]


# ---------------------------------------------------------------------------------------- backends


@functools.cache
def backend_unavailable(name: str) -> str | None:
    """Why the backend `name` cannot run the tests' sandboxes here, or None: asked as the backend
    itself would ask (for docker: the SDK importable, an engine answering, the test image present)."""
    return unavailable(SandboxConfig(name, image=DOCKER_IMAGE))


@pytest.hookimpl(trylast=True)
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every test that uses `backend` runs on each backend; the backend comes last in the test id
    (program-policy-backend), hence a late hook rather than fixture params."""
    if "backend" in metafunc.fixturenames:
        metafunc.parametrize("backend", BACKEND_PARAMS, indirect=True, scope="session")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A soak is slow too: `-m "not slow and not docker"` (the fast loop) replaces pyproject's
    `-m "not soak"`, and must still leave the soaks out."""
    for item in items:
        if item.get_closest_marker("soak") is not None and item.get_closest_marker("slow") is None:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def backend(request: pytest.FixtureRequest) -> str:
    reason = backend_unavailable(request.param)
    if reason is not None:
        if os.environ.get("POTRUN_REQUIRE_DOCKER") == "1":
            pytest.fail(f"POTRUN_REQUIRE_DOCKER=1 but the {request.param} backend cannot run: {reason}")
        pytest.skip(f"{request.param} backend unavailable: {reason}")
    return request.param


# ------------------------------------------------------------------------------------------- pools


class Pools:
    """Started sandboxes, one per (policy, backend), created on first use and closed at the end.

    Every pool is started from `launch_dir` (an empty directory that must stay empty) and after the
    canary variable is set, so that env_scrubbed and cwd_untouched test what they claim to. A pool that
    failed to start is not retried: its error is reported again at once (a docker backend that hangs
    at start must not cost every test a start timeout)."""

    def __init__(self, launch_dir: Path) -> None:
        self.launch_dir = launch_dir
        self._boxes: dict[tuple[str, str], Sandbox] = {}
        self._failed: dict[tuple[str, str], str] = {}

    def get(self, policy: str, backend: str) -> Sandbox:
        key = (policy, backend)
        if key in self._failed:
            pytest.fail(f"the {backend} pool ({policy}) failed to start earlier: {self._failed[key]}")
        box = self._boxes.get(key)
        if box is None:
            try:
                box = self._start(policy, backend)
            except Exception as exc:
                self._failed[key] = f"{type(exc).__name__}: {exc}"
                raise
            self._boxes[key] = box
        return box

    def _start(self, policy: str, backend: str) -> Sandbox:
        assert os.environ.get(CANARY_ENV), "the canary must be set before any worker starts"
        box = Sandbox(backend, policy=policy, workers=WORKERS, timeout=TIMEOUT_S, memory_mb=MEMORY_MB)
        with pytest.MonkeyPatch.context() as patch:
            patch.chdir(self.launch_dir)
            box.start()
        return box

    def close(self) -> None:
        for box in self._boxes.values():
            box.close()
        self._boxes.clear()


@pytest.fixture(scope="session")
def pools(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pools]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(CANARY_ENV, "canary-" + secrets.token_hex(8))
        shared = Pools(tmp_path_factory.mktemp("launch"))
        try:
            yield shared
        finally:
            shared.close()


@pytest.fixture
def box(pools: Pools, policy: str, backend: str) -> Sandbox:
    """The session pool for the test's `policy` (a parametrize argument) and `backend`."""
    return pools.get(policy, backend)


# ---------------------------------------------------------------------------------------- results


def describe(result: ExecResult) -> str:
    """A result in one line, for assertion messages."""
    value = repr(result.value)
    return (
        f"status={result.status.value} value={value[:80]} type={result.value_type} entry={result.entry} "
        f"error_type={result.error_type} error={(result.error or '')[:120]!r} "
        f"timeout_kind={result.timeout_kind} attempts={result.attempts} "
        f"wall={result.wall_s:.2f}s cpu={result.cpu_s:.2f}s"
    )


def same_value(a: Any, b: Any) -> bool:
    """Equal values of the same plain type; NaN equals NaN (the value is typed, not compared)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, list):
        return len(a) == len(b) and all(map(same_value, a, b))
    return a == b


PROBE_OK = "ans = 6 * 7"
REPLACEMENT_PATIENCE_S = 120.0  # how long a replacement may take to start at most (a hang, not a timing)


def settled(box: Sandbox) -> None:
    """Wait until no replacement of a lost worker is starting: a replacement starts aside while the
    other workers run on, so a call can return before it is up. What a test then reads of
    `box._pool.slots` (roots, hellos, connections) is the new workers'. (A pool that failed meanwhile
    is the test's to find: its slots are read as they are.)"""
    if box._pool is not None:
        box._pool.settled(REPLACEMENT_PATIENCE_S)


def dying_once_on(deaths: set[int]) -> Callable[[RunRequest], ExecResult]:
    """A fake worker's handler for programs `ans = k`: the worker dies on each k of `deaths`, once;
    any other program gives k."""
    died: set[int] = set()

    def dies_on(request: RunRequest) -> ExecResult:
        k = int(request.source.split("=")[1])
        if k in deaths and k not in died:
            died.add(k)
            raise RuntimeError("the worker died")
        return ExecResult(Status.OK, value=k, value_type="int")

    return dies_on


def assert_pool_healthy(box: Sandbox) -> None:
    """Every worker of the pool runs a plain program normally (two probes per worker reach them all:
    the pool hands each new request to the least busy worker, and none is being replaced). A worker
    lost meanwhile has its replacement up when this returns."""
    settled(box)
    results = list(box.run_many([PROBE_OK] * (2 * box.workers)))
    for result in results:
        assert result.status is Status.OK and result.value == 42, describe(result)
    settled(box)


# ----------------------------------------------------------------------------- the process table


@dataclass(frozen=True, slots=True)
class Proc:
    pid: int
    ppid: int
    sid: int
    state: str
    cgroup: str  # the pids cgroup (cgroup v1), else the unified one
    cmdline: str

    @property
    def alive(self) -> bool:
        return self.state not in ("Z", "X")

    @property
    def is_worker(self) -> bool:
        return WORKER_MODULE in self.cmdline


def process_table() -> dict[int, Proc]:
    table = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            proc = _read_proc(int(entry.name))
            if proc is not None:
                table[proc.pid] = proc
    return table


def _read_proc(pid: int) -> Proc | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cgroups = Path(f"/proc/{pid}/cgroup").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:  # gone meanwhile
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    return Proc(pid, int(fields[1]), int(fields[3]), fields[0], _pids_cgroup(cgroups), cmdline.strip())


def _pids_cgroup(text: str) -> str:
    unified = "/"
    for line in text.splitlines():
        _, controllers, path = line.split(":", 2)
        if "pids" in controllers.split(","):
            return path
        if controllers == "":
            unified = path
    return unified


def worker_host_pid(conn: Any) -> int:
    """The host pid at the root of one worker: the worker process itself (process backend) or the
    container's first process (docker backend), whose death takes the whole worker down."""
    container = getattr(conn, "container", None)
    if container is not None:
        container.reload()
        return int(container.attrs["State"]["Pid"])
    container_id = getattr(conn, "container_id", None)
    if container_id:
        out = subprocess.run(
            ["docker", "inspect", "--format", "{{.State.Pid}}", container_id],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        return int(out.strip())
    process = getattr(conn, "process", None)
    if process is not None:
        return int(process.pid)
    raise AssertionError(
        f"cannot find the host process of a {type(conn).__name__} worker "
        "(expected .process, .container or .container_id)"
    )


@dataclass(frozen=True, slots=True)
class PoolTree:
    """Where a pool's processes live: its worker roots and their own pids cgroups."""

    roots: frozenset[int]
    cgroups: frozenset[str]


def pool_tree(box: Sandbox) -> PoolTree:
    settled(box)
    assert box._pool is not None
    roots = frozenset(worker_host_pid(slot.conn) for slot in box._pool.slots)
    cgroups = set()
    for pid in roots:
        proc = _read_proc(pid)
        if proc is not None and proc.cgroup != "/":  # the host's root cgroup would match everything
            cgroups.add(proc.cgroup)
    return PoolTree(roots, frozenset(cgroups))


def leftover_processes(trees: Iterable[PoolTree], warm: bool) -> list[Proc]:
    """Live processes of the pools that are not their machinery. A program's process is found two
    ways that it cannot both escape: by descent from a worker root (workers are subreapers, so
    orphans stay below them) and by membership of a worker's pids cgroup (which survives setsid,
    double forks and reparenting). Allowed: the workers, and with warm isolation one runner per
    worker (its direct child, leader of its own session). Trusted programs run in forks that are
    killed before the verdict is sent, so none may remain."""
    table = process_table()
    roots = frozenset().union(*(tree.roots for tree in trees))
    cgroups = frozenset().union(*(tree.cgroups for tree in trees))
    children: dict[int, list[int]] = {}
    for proc in table.values():
        children.setdefault(proc.ppid, []).append(proc.pid)
    members = {
        pid
        for pid, proc in table.items()
        if proc.cgroup in cgroups or proc.cgroup.startswith(tuple(c + "/" for c in cgroups))
    }
    stack = [pid for pid in roots if pid in table]
    while stack:
        pid = stack.pop()
        members.add(pid)
        stack.extend(children.get(pid, ()))
    live = {pid for pid in members if table[pid].alive}
    workers = _workers(roots, table)
    allowed = set(roots) | workers
    if warm:
        for worker in workers:
            runners = [c for c in children.get(worker, ()) if c in live and table[c].sid == c]
            allowed.update(runners[:1])
    return sorted((table[pid] for pid in live - allowed), key=lambda p: p.pid)


def _workers(roots: frozenset[int], table: dict[int, Proc]) -> set[int]:
    """The worker processes: the roots themselves (process backend), or the worker a container's
    first process started; and below either, the worker that a root made init of its own PID
    namespace (the root then only waits for it, with the same command line), and below that the
    worker's fork server (a copy of it, in its session). Not their other children: a runner is a fork
    of the worker or of its fork server, with its command line, but leads its own session."""
    workers = {pid for pid in roots if pid in table and table[pid].is_worker}
    inits = {pid for pid in roots if pid in table and not table[pid].is_worker}
    workers |= {p.pid for p in table.values() if p.ppid in inits and p.is_worker and p.alive}
    while True:
        below = {p.pid for p in table.values() if p.ppid in workers and p.is_worker and p.alive and p.sid != p.pid}
        if below <= workers:
            return workers
        workers |= below


def runner_thread_counts(box: Sandbox) -> dict[int, int]:
    """Threads of each live runner (a worker's child leading its own session), read from /proc."""
    table = process_table()
    workers = _workers(pool_tree(box).roots, table)
    counts = {}
    for proc in table.values():
        if proc.ppid in workers and proc.sid == proc.pid and proc.alive:
            status = _status_fields(proc.pid)
            if "Threads" in status:
                counts[proc.pid] = int(status["Threads"])
    return counts


# --------------------------------------------------------------------------- the test's own memory


def _status_fields(pid: int | str = "self") -> dict[str, str]:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return {}
    fields = (line.partition(":") for line in text.splitlines())
    return {key: value.split()[0] for key, _, value in fields if value.split()}


def reset_peak_rss() -> bool:
    """Reset this process's peak resident set (VmHWM) to its current size; False where not allowed."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def rss_kib() -> tuple[int, int]:
    """(current, peak) resident set of this process, in KiB."""
    fields = _status_fields()
    return int(fields["VmRSS"]), int(fields["VmHWM"])


# ---------------------------------------------------------------------------------------- network


@pytest.fixture
def canary_listener() -> Iterator[socket.socket]:
    """A TCP listener on 127.0.0.1 only; `connections_seen` tells whether anything reached it."""
    server = socket.create_server(("127.0.0.1", 0), backlog=16)
    server.setblocking(False)
    try:
        yield server
    finally:
        server.close()


def connections_seen(server: socket.socket) -> int:
    """Connections completed to the listener (the kernel queues them whether or not we accept)."""
    seen = 0
    while True:
        try:
            conn, _ = server.accept()
        except BlockingIOError:
            return seen
        conn.close()
        seen += 1


def lines_of(path: Path) -> list[dict[str, Any]]:
    """An --out file's lines without what describes the invocation (timings) or follows the verdict
    (the digest): what a clean run's lines must equal."""
    found = []
    for text in path.read_text().splitlines():
        data = json.loads(text)
        for key in ("wall_s", "cpu_s", "digest"):
            data.pop(key, None)
        found.append(data)
    return found
