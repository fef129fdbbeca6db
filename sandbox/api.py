"""`potrun.Sandbox`: run programs under a policy and OS limits, one or many at a time.

- `SandboxConfig` (config.py): a sandbox's options, the one type that travels from the caller to the
  backend (re-exported here).
- `Sandbox`: a warm pool of workers on one of the `BACKENDS` (config.py), made from a config.
- `SandboxLike`: what the pipeline needs of a sandbox; `Sandbox` and `potrun.check.cache.CachedSandbox`
  have it.
- `Cancellation`: cancels, from another thread, the calls made under it (`Cancelled` is raised in them).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import AsyncGenerator, Iterable, Iterator, Mapping
from contextlib import aclosing, closing
from typing import TYPE_CHECKING, Any, Protocol, TypedDict, Unpack

from potrun.policies import POLICY_NAMES, get_policy
from potrun.sandbox.config import (
    BACKENDS,
    SandboxConfig,
    check_choice,
    check_limits,
    check_megabytes,
    check_seconds,
)
from potrun.sandbox.parent.pool import Arrival, Pool
from potrun.sandbox.parent.pool import Cancellation as Cancellation  # re-exported: the API's
from potrun.sandbox.parent.pool import Cancelled as Cancelled
from potrun.sandbox.wire.protocol import INPUT_LIMIT, MAX_FILES, RunRequest, check_file_name, input_size
from potrun.types import (
    DEFAULT_MEMORY_MB,
    DEFAULT_OUTPUT_BYTES,
    DEFAULT_TIMEOUT_S,
    Entry,
    ExecResult,
    Isolation,
    SandboxUnavailable,
    UsageError,
)

__all__ = ["CallOptions", "Sandbox", "SandboxConfig", "SandboxLike"]

if TYPE_CHECKING:
    import asyncio  # imported where a coroutine needs it: every worker imports this module, and asyncio
    # would double the package's import time


class CallOptions(TypedDict, total=False):
    """The keyword arguments of `Sandbox.run` and `arun`: those of `Sandbox.request`."""

    entry: str | None
    capture: bool
    timeout: float | None
    memory_mb: int | None
    stdin: str | None
    files: Mapping[str, bytes | str] | None
    full_output: bool


def _checked_files(stdin: str | None, files: Mapping[str, bytes | str]) -> tuple[tuple[str, bytes], ...]:
    """A request's files as (name, bytes), each name checked, with stdin within INPUT_LIMIT."""
    if stdin is not None and type(stdin) is not str:
        raise UsageError(f"stdin must be a string, not {type(stdin).__name__}")
    if not isinstance(files, Mapping) or len(files) > MAX_FILES:
        raise UsageError(f"files must be a mapping of at most {MAX_FILES} names to their contents")
    try:
        staged = tuple((check_file_name(name), _file_bytes(name, content)) for name, content in files.items())
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if input_size(stdin, staged) > INPUT_LIMIT:
        raise UsageError(f"stdin and files must hold at most {INPUT_LIMIT} bytes together")
    return staged


def _file_bytes(name: str, content: object) -> bytes:
    """A file's content: bytes as given, text as UTF-8. Nothing else: `bytes(10**12)` would allocate
    a terabyte before any size is checked."""
    if isinstance(content, str):
        return content.encode()
    if isinstance(content, (bytes, bytearray, memoryview)):
        return bytes(content)
    raise ValueError(f"file {name[:80]!r}: its content must be bytes or text, not {type(content).__name__}")


_ENTRY_NAMES = frozenset(entry.value for entry in Entry)


def _check_sources(sources: object) -> None:
    """Many programs: an iterable of sources, not one source (whose characters would each be run)."""
    if isinstance(sources, (str, bytes)) or not hasattr(sources, "__iter__"):
        raise UsageError(f"sources must be an iterable of programs, not {type(sources).__name__}")


_ENTRY_CHOICES = tuple(entry.value for entry in Entry)
_ISOLATION_CHOICES = tuple(tier.value for tier in Isolation)


def _checked_request(request: object) -> RunRequest | None:
    """A caller's prepared request, field by field (as `Sandbox.request` makes them): a bad one is
    this call's UsageError, never a worker's death reading it."""
    if request is None:
        return None
    if not isinstance(request, RunRequest):
        raise UsageError(f"requests must be RunRequests (or None), not {type(request).__name__}")
    if type(request.source) is not str:
        raise UsageError(f"a request's source must be a string, not {type(request.source).__name__}")
    check_choice("policy", request.policy, POLICY_NAMES)
    check_choice("entry", request.entry, _ENTRY_CHOICES)
    check_choice("isolation", request.isolation, _ISOLATION_CHOICES)
    check_limits(request.limits)
    for flag in ("capture", "full_output"):
        if type(getattr(request, flag)) is not bool:
            raise UsageError(f"a request's {flag} must be True or False")
    if request.stdin is not None or request.files:
        if not isinstance(request.files, tuple) or not all(
            isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str) for item in request.files
        ):
            raise UsageError("a request's files must be (name, bytes) pairs (Sandbox.request makes them)")
        _checked_files(request.stdin, dict(request.files))
    return request


class SandboxLike(Protocol):
    """What `check_records` needs of a sandbox: requests made under its options, their results in
    order, and a companion sandbox for checker programs."""

    def request(
        self, source: str, entry: str | None = None, *, capture: bool = False, timeout: float | None = None
    ) -> RunRequest: ...
    def run_requests(self, requests: Iterable[RunRequest | None]) -> Iterator[ExecResult | None]: ...
    def companion(self, policy: str = "trusted", isolation: str = "fork", workers: int = 4) -> Sandbox: ...


class Sandbox:
    """A warm pool of sandboxed workers.

    >>> with Sandbox(policy="restricted", workers=2, timeout=5) as box:
    ...     box.run("def solution():\\n    return 6 * 7").value
    42

    `timeout`: the CPU seconds a program may use, which decide a timeout (`timeout_kind` "cpu"); they
    do not count the time a program waits for a core on a busy machine. `wall_timeout`: the wall-clock
    safety net for what burns no CPU (a trusted `time.sleep`; `timeout_kind` "wall"); None:
    `default_wall_timeout(timeout)`, WALL_MULTIPLE times it, at least WALL_FLOOR_S.

    `isolation`: "warm" (the default, under either policy: a program that the verifier proves pure,
    unable to reach anything shared, runs in a long-lived warm runner; every other program in a fresh
    fork of the pre-imported worker) or "fork" (a fresh fork for every program). Each result says which
    tier ran it (`ExecResult.isolation`).

    The keyword arguments are a `SandboxConfig`'s; `Sandbox.from_config(config)` takes one made
    before. Making a Sandbox makes its backend (the docker backend connects to the engine here); the
    workers start on first use (or `start()`).

    One Sandbox may be shared: any number of threads may call `run` / `run_many` at once, and asyncio
    tasks `arun` / `arun_many`; each call gets its own results, and the calls' programs share the
    workers' pipelines (no lock serializes the callers).

    A call given up cancels its programs, queued and running (a program still running a moment later
    is stopped with its worker, which is replaced; no one else's program is charged): a `run_many`
    iterator closed or interrupted, an asyncio task cancelled in `arun`/`arun_many`, or a call made
    under a `Cancellation` (`with cancellation.active(): ...`) that another thread cancels, where the
    call raises `Cancelled`.
    """

    def __init__(
        self,
        backend: str = "process",
        *,
        policy: str = "restricted",
        workers: int | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        wall_timeout: float | None = None,
        memory_mb: int = DEFAULT_MEMORY_MB,
        output_bytes: int = DEFAULT_OUTPUT_BYTES,
        isolation: str | None = None,
        entry: str = "auto",
        hash_seed: int = 0,
        image: str | None = None,
    ) -> None:
        self._setup(
            SandboxConfig(
                backend,
                policy=policy,
                workers=workers,
                timeout=timeout,
                wall_timeout=wall_timeout,
                memory_mb=memory_mb,
                output_bytes=output_bytes,
                isolation=isolation,
                entry=entry,
                hash_seed=hash_seed,
                image=image,
            )
        )

    @classmethod
    def from_config(cls, config: SandboxConfig) -> Sandbox:
        """The Sandbox of a config made before: the config itself, not its fields again."""
        if not isinstance(config, SandboxConfig):
            raise UsageError(f"from_config takes a SandboxConfig, not {type(config).__name__}")
        box = cls.__new__(cls)
        box._setup(config)
        return box

    def _setup(self, config: SandboxConfig) -> None:
        self.config = config
        self.policy = get_policy(config.policy)
        self.limits = config.limits
        self.isolation = config.tier
        self.entry = Entry(config.entry)
        self.workers = config.worker_count
        self.backend_name = config.backend
        self._backend = BACKENDS[config.backend].make(config)
        self._pool: Pool | None = None
        self._completed_before = 0  # by pools closed before the current one
        self._companions: dict[tuple[str, str], Sandbox] = {}
        self._lock = threading.RLock()  # start, close and companions, from any thread

    # -- life cycle ----------------------------------------------------------------------------------------

    def start(self) -> Sandbox:
        with self._lock:
            if self._pool is None:
                pool = Pool(self._backend, self.workers)
                pool.start()
                self._pool = pool
        return self

    def close(self) -> None:
        """Stop the workers. A call still running on another thread raises SandboxUnavailable."""
        with self._lock:
            for companion in self._companions.values():
                companion.close()
            self._companions.clear()
            if self._pool is not None:
                self._completed_before += self._pool.completed
                self._pool.close()
                self._pool = None

    def __enter__(self) -> Sandbox:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def capabilities(self) -> dict[str, Any]:
        return self.start()._pool.capabilities  # type: ignore[union-attr]

    @property
    def completed(self) -> int:
        """Programs whose results have arrived, from every caller, since this sandbox was made (in the
        order they finished, not the order they were given: a progress display reads it)."""
        return self._completed_before + (self._pool.completed if self._pool is not None else 0)

    @property
    def workers_replaced(self) -> int:
        return self._pool.replaced if self._pool is not None else 0

    def companion(self, policy: str = "trusted", isolation: str = "fork", workers: int = 4) -> Sandbox:
        """A second sandbox with this one's backend and limits under another policy (checker golds run
        trusted, in fork isolation, beside restricted model programs); started on first use, reused,
        and closed with this one."""
        key = (policy, isolation)
        with self._lock:
            if key not in self._companions:
                config = dataclasses.replace(
                    self.config, policy=policy, isolation=isolation, workers=min(workers, self.workers)
                )
                self._companions[key] = Sandbox.from_config(config)
            return self._companions[key]

    # -- running -----------------------------------------------------------------------------------------

    def request(
        self,
        source: str,
        entry: str | None = None,
        *,
        capture: bool = False,
        timeout: float | None = None,
        memory_mb: int | None = None,
        stdin: str | None = None,
        files: Mapping[str, bytes | str] | None = None,
        full_output: bool = False,
    ) -> RunRequest:
        """The request for one program under this sandbox's policy, isolation and limits. `capture`:
        also send back the numbers the program's variables held (`ExecResult.captured`), for checklists.

        Per call: `timeout` (CPU seconds; the wall-clock net follows it, `default_wall_timeout`) and
        `memory_mb` replace the sandbox's limits for this program; `stdin` is what it reads on its
        standard input; `files` (name -> bytes, or text written as UTF-8) are written into its scratch
        directory before it starts, each name a relative path inside it. A bad one is a UsageError.
        `full_output`: the result's stdout and stderr whole (up to the output limit), not their last
        1,000 characters (SandboxFusion's /run_code answers with the whole streams)."""
        if type(source) is not str:  # else the worker dies reading the request (and is retried once)
            raise UsageError(f"a program's source must be a string, not {type(source).__name__}")
        if entry and (not isinstance(entry, str) or entry not in _ENTRY_NAMES):
            check_choice("entry", entry, tuple(_ENTRY_NAMES))
        limits = self.limits
        if timeout is not None:
            check_seconds("timeout", timeout)
            limits = dataclasses.replace(limits, timeout_s=timeout, wall_timeout_s=None)
        if memory_mb is not None:
            check_megabytes("memory_mb", memory_mb)
            limits = dataclasses.replace(limits, memory_mb=memory_mb)
        return RunRequest(
            source=source,
            policy=self.policy.name,
            entry=str(Entry(entry)) if entry else str(self.entry),
            isolation=str(self.isolation),
            limits=limits,
            capture=capture,
            stdin=stdin,
            files=() if stdin is None and files is None else _checked_files(stdin, files or {}),  # the hot path: none
            full_output=full_output,
        )

    def run(self, source: str, **options: Unpack[CallOptions]) -> ExecResult:
        """One program's ExecResult; the keyword arguments are `request`'s (CallOptions)."""
        with closing(self._running_pool().run_many([self.request(source, **options)])) as results:  # type: ignore[type-var]
            return next(results)  # type: ignore[return-value]

    def run_many(
        self, sources: Iterable[str], *, entry: str | None = None, capture: bool = False
    ) -> Iterator[ExecResult]:
        """One ExecResult per source, in input order; sources are read lazily."""
        _check_sources(sources)
        requests = (self.request(source, entry, capture=capture) for source in sources)
        return self._running_pool().run_many(requests)  # type: ignore[return-value]  # (made here: checked)

    def run_requests(self, requests: Iterable[RunRequest | None]) -> Iterator[ExecResult | None]:
        """Like run_many, for prepared requests; a None request yields None in its place. Each is
        checked as it is read: a bad one is a UsageError naming its field."""
        _check_sources(requests)
        return self._running_pool().run_many(_checked_request(request) for request in requests)

    # -- running, from asyncio -----------------------------------------------------------------------------

    async def arun(self, source: str, **options: Unpack[CallOptions]) -> ExecResult:
        """`run` for asyncio: the event loop goes on while the program runs."""
        request = self.request(source, **options)
        async with aclosing(self.arun_requests([request])) as results:
            async for result in results:
                return result  # type: ignore[return-value]
        raise AssertionError("a stream of one request yields one result")

    async def arun_many(
        self, sources: Iterable[str], *, entry: str | None = None, capture: bool = False
    ) -> AsyncGenerator[ExecResult, None]:
        """`run_many` for asyncio: `async for result in box.arun_many(sources)`, in input order."""
        _check_sources(sources)
        requests = (self.request(source, entry, capture=capture) for source in sources)
        async with aclosing(self.arun_requests(requests)) as results:
            async for result in results:
                yield result  # type: ignore[misc]

    async def arun_requests(self, requests: Iterable[RunRequest | None]) -> AsyncGenerator[ExecResult | None, None]:
        """`run_requests` for asyncio. (Starting the pool, on first use, blocks the loop meanwhile:
        `await asyncio.to_thread(box.start)` first to avoid it.)"""
        import asyncio

        pool = self._running_pool()
        loop = asyncio.get_running_loop()
        arrivals: asyncio.Queue[Arrival] = asyncio.Queue()

        def deliver(arrival: Arrival) -> None:  # on the dispatcher's thread
            loop.call_soon_threadsafe(arrivals.put_nowait, arrival)

        _check_sources(requests)
        stream = pool.open_stream(deliver)
        source = (_checked_request(request) for request in requests)
        try:
            while not stream.finished:
                for result in pool.advance(stream, source, arrivals):
                    yield result
                if stream.waits():
                    pool.take(stream, await arrivals.get())
        finally:
            pool.close_stream(stream)

    def _running_pool(self) -> Pool:
        with self._lock:
            if self._pool is not None and self._pool.failed:
                # It stopped for good (a worker that would not start again, tried START_TRIES times): the
                # calls running then were told why; this one tries a fresh pool rather than fail forever.
                self._completed_before += self._pool.completed
                self._pool.close()
                self._pool = None
        self.start()
        pool = self._pool
        if pool is None:
            raise SandboxUnavailable("the sandbox was closed")
        return pool
