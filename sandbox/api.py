"""`potrun.Sandbox`: run programs under a policy and OS limits, one or many at a time."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from potrun.policies import get_policy
from potrun.sandbox.pool import Backend, Pool, default_workers
from potrun.sandbox.protocol import RunRequest
from potrun.types import Entry, ExecResult, Isolation, Limits, UsageError

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
        self.limits = Limits(timeout_s=timeout, wall_timeout_s=wall_timeout, memory_mb=memory_mb,
                             output_bytes=output_bytes)  # fmt: skip
        if timeout <= 0 or self.limits.wall_limit_s <= 0 or memory_mb <= 0 or output_bytes <= 0:
            raise UsageError("timeout, memory and output limits must be positive")
        if isolation not in (None, *(tier.value for tier in Isolation)):
            raise UsageError(f"unknown isolation {isolation!r}; choose one of {', '.join(t.value for t in Isolation)}")
        self.isolation = Isolation(isolation) if isolation else Isolation.WARM
        self.entry = Entry(entry)
        self.workers = workers or default_workers(self.isolation)
        self.backend_name = backend
        self._backend = _make_backend(backend, hash_seed=hash_seed, image=image, limits=self.limits,
                                      forks=self.isolation is Isolation.FORK)  # fmt: skip
        self._pool: Pool | None = None
        self._settings = {"hash_seed": hash_seed, "image": image}
        self._companions: dict[tuple[str, str], Sandbox] = {}

    # -- life cycle ----------------------------------------------------------------------------------------

    def start(self) -> Sandbox:
        if self._pool is None:
            pool = Pool(self._backend, self.workers)
            pool.start()
            self._pool = pool
        return self

    def close(self) -> None:
        for companion in self._companions.values():
            companion.close()
        self._companions.clear()
        if self._pool is not None:
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
    def workers_replaced(self) -> int:
        return self._pool.replaced if self._pool is not None else 0

    def companion(self, policy: str = "trusted", isolation: str = "fork", workers: int = 4) -> Sandbox:
        """A second sandbox with this one's backend and limits under another policy (checker golds run
        trusted, in fork isolation, beside restricted model programs); started on first use, reused,
        and closed with this one."""
        key = (policy, isolation)
        if key not in self._companions:
            limits = self.limits
            self._companions[key] = Sandbox(
                self.backend_name, policy=policy, workers=min(workers, self.workers), timeout=limits.timeout_s,
                wall_timeout=limits.wall_timeout_s, memory_mb=limits.memory_mb, output_bytes=limits.output_bytes,
                isolation=isolation, entry=str(self.entry), **self._settings,
            )  # fmt: skip
        return self._companions[key]

    # -- running -----------------------------------------------------------------------------------------

    def request(self, source: str, entry: str | None = None, *, capture: bool = False) -> RunRequest:
        """The request for one program under this sandbox's policy, isolation and limits. `capture`:
        also send back the numbers the program's variables held (`ExecResult.captured`), for checklists."""
        return RunRequest(source=source, policy=self.policy.name, entry=str(Entry(entry)) if entry else str(self.entry),
                          isolation=str(self.isolation), limits=self.limits, capture=capture)  # fmt: skip

    def run(self, source: str, *, entry: str | None = None, capture: bool = False) -> ExecResult:
        return next(self.run_many([source], entry=entry, capture=capture))

    def run_many(self, sources: Iterable[str], *, entry: str | None = None,
                 capture: bool = False) -> Iterator[ExecResult]:  # fmt: skip
        """One ExecResult per source, in input order; sources are read lazily."""
        requests = (self.request(source, entry, capture=capture) for source in sources)
        return self.run_requests(requests)  # type: ignore[return-value]

    def run_requests(self, requests: Iterable[RunRequest | None]) -> Iterator[ExecResult | None]:
        """Like run_many, for prepared requests; a None request yields None in its place."""
        pool = self.start()._pool
        assert pool is not None
        return pool.run_many(requests)


def _make_backend(name: str, *, hash_seed: int, image: str | None, limits: Limits, forks: bool) -> Backend:
    if name == "process":
        from potrun.sandbox.process import ProcessBackend

        return ProcessBackend(hash_seed=hash_seed, pin_cpus=forks)
    if name == "docker":
        from potrun.sandbox.docker import DockerBackend

        return DockerBackend(image=image, hash_seed=hash_seed, limits=limits)
    raise UsageError(f"unknown backend {name!r}; choose one of {', '.join(BACKENDS)}")
