"""`potrun.Sandbox`: run programs under a policy and OS limits, one or many at a time."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import aclosing, closing
from typing import TYPE_CHECKING, Any

from potrun.policies import get_policy
from potrun.sandbox.pool import Arrival, Backend, Pool, default_workers
from potrun.sandbox.protocol import RunRequest
from potrun.types import Entry, ExecResult, Isolation, Limits, SandboxUnavailable, UsageError

if TYPE_CHECKING:
    import asyncio  # imported where a coroutine needs it: every worker imports this module, and asyncio
    # would double the package's import time

BACKENDS = ("process", "docker")


class Sandbox:
    """A warm pool of sandboxed workers.

    >>> with Sandbox(policy="restricted", workers=2, timeout=5) as box:
    ...     box.run("def solution():\\n    return 6 * 7").value
    42

    `timeout`: the CPU seconds a program may use, which decide a timeout (`timeout_kind` "cpu"); they
    do not count the time a program waits for a core on a busy machine. `wall_timeout`: the wall-clock safety net for what burns
    no CPU (a trusted `time.sleep`; `timeout_kind` "wall"); None: `default_wall_timeout(timeout)`,
    WALL_MULTIPLE times it, at least WALL_FLOOR_S.

    `isolation`: "warm" (the default, under either policy: a program that the verifier proves pure,
    unable to reach anything shared, runs in a long-lived warm runner; every other program in a fresh
    fork of the pre-imported worker) or "fork" (a fresh fork for every program). Each result says which
    tier ran it (`ExecResult.isolation`).

    One Sandbox may be shared: any number of threads may call `run` / `run_many` at once, and asyncio
    tasks `arun` / `arun_many`; each call gets its own results, and the calls' programs share the
    workers' pipelines (no lock serializes the callers).
    """

    def __init__(
        self,
        backend: str = "process",
        *,
        policy: str = "restricted",
        workers: int | None = None,
        timeout: float = 5.0,
        wall_timeout: float | None = None,
        memory_mb: int = 2048,
        output_bytes: int = 1_000_000,
        isolation: str | None = None,
        entry: str = "auto",
        hash_seed: int = 0,
        image: str | None = None,
    ) -> None:
        self.policy = get_policy(policy)
        self.limits = Limits(
            timeout_s=timeout, wall_timeout_s=wall_timeout, memory_mb=memory_mb, output_bytes=output_bytes
        )
        if timeout <= 0 or self.limits.wall_limit_s <= 0 or memory_mb <= 0 or output_bytes <= 0:
            raise UsageError("timeout, memory and output limits must be positive")
        if isolation not in (None, *(tier.value for tier in Isolation)):
            raise UsageError(f"unknown isolation {isolation!r}; choose one of {', '.join(t.value for t in Isolation)}")
        self.isolation = Isolation(isolation) if isolation else Isolation.WARM
        self.entry = Entry(entry)
        self.workers = workers or default_workers(self.isolation)
        self.backend_name = backend
        self._backend = _make_backend(
            backend, hash_seed=hash_seed, image=image, limits=self.limits, forks=self.isolation is Isolation.FORK
        )
        self._pool: Pool | None = None
        self._completed_before = 0  # by pools closed before the current one
        self._settings = {"hash_seed": hash_seed, "image": image}
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
                limits = self.limits
                self._companions[key] = Sandbox(
                    self.backend_name,
                    policy=policy,
                    workers=min(workers, self.workers),
                    timeout=limits.timeout_s,
                    wall_timeout=limits.wall_timeout_s,
                    memory_mb=limits.memory_mb,
                    output_bytes=limits.output_bytes,
                    isolation=isolation,
                    entry=str(self.entry),
                    **self._settings,
                )
            return self._companions[key]

    # -- running -----------------------------------------------------------------------------------------

    def request(self, source: str, entry: str | None = None, *, capture: bool = False) -> RunRequest:
        """The request for one program under this sandbox's policy, isolation and limits. `capture`:
        also send back the numbers the program's variables held (`ExecResult.captured`), for checklists."""
        return RunRequest(
            source=source,
            policy=self.policy.name,
            entry=str(Entry(entry)) if entry else str(self.entry),
            isolation=str(self.isolation),
            limits=self.limits,
            capture=capture,
        )

    def run(self, source: str, *, entry: str | None = None, capture: bool = False) -> ExecResult:
        with closing(self.run_many([source], entry=entry, capture=capture)) as results:  # type: ignore[type-var]
            return next(results)

    def run_many(
        self, sources: Iterable[str], *, entry: str | None = None, capture: bool = False
    ) -> Iterator[ExecResult]:
        """One ExecResult per source, in input order; sources are read lazily."""
        requests = (self.request(source, entry, capture=capture) for source in sources)
        return self.run_requests(requests)  # type: ignore[return-value]

    def run_requests(self, requests: Iterable[RunRequest | None]) -> Iterator[ExecResult | None]:
        """Like run_many, for prepared requests; a None request yields None in its place."""
        return self._running_pool().run_many(requests)

    # -- running, from asyncio -----------------------------------------------------------------------------

    async def arun(self, source: str, *, entry: str | None = None, capture: bool = False) -> ExecResult:
        """`run` for asyncio: the event loop goes on while the program runs."""
        async with aclosing(self.arun_many([source], entry=entry, capture=capture)) as results:
            async for result in results:
                return result
        raise AssertionError("a stream of one request yields one result")

    async def arun_many(
        self, sources: Iterable[str], *, entry: str | None = None, capture: bool = False
    ) -> AsyncIterator[ExecResult]:
        """`run_many` for asyncio: `async for result in box.arun_many(sources)`, in input order."""
        requests = (self.request(source, entry, capture=capture) for source in sources)
        async with aclosing(self.arun_requests(requests)) as results:
            async for result in results:
                yield result  # type: ignore[misc]

    async def arun_requests(self, requests: Iterable[RunRequest | None]) -> AsyncIterator[ExecResult | None]:
        """`run_requests` for asyncio. (Starting the pool, on first use, blocks the loop meanwhile:
        `await asyncio.to_thread(box.start)` first to avoid it.)"""
        import asyncio

        pool = self._running_pool()
        loop = asyncio.get_running_loop()
        arrivals: asyncio.Queue[Arrival] = asyncio.Queue()

        def deliver(arrival: Arrival) -> None:  # on the dispatcher's thread
            loop.call_soon_threadsafe(arrivals.put_nowait, arrival)

        stream = pool.open_stream(deliver)
        source = iter(requests)
        try:
            while not stream.finished:
                for result in pool.advance(stream, source, arrivals):
                    yield result
                if stream.waits():
                    pool.take(stream, await arrivals.get())
        finally:
            pool.close_stream(stream)

    def _running_pool(self) -> Pool:
        self.start()
        pool = self._pool
        if pool is None:
            raise SandboxUnavailable("the sandbox was closed")
        return pool


def _make_backend(name: str, *, hash_seed: int, image: str | None, limits: Limits, forks: bool) -> Backend:
    if name == "process":
        from potrun.sandbox.process import ProcessBackend

        return ProcessBackend(hash_seed=hash_seed, pin_cpus=forks)
    if name == "docker":
        from potrun.sandbox.docker import DockerBackend

        return DockerBackend(image=image, hash_seed=hash_seed, limits=limits)
    raise UsageError(f"unknown backend {name!r}; choose one of {', '.join(BACKENDS)}")
