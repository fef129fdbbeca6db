"""The dedup cache: a program that was already run in this run is not run again.

RL rollouts and self-consistency samples repeat programs. `CachedSandbox` wraps a `Sandbox` (it is a
`SandboxLike`, the interface `check_records` uses) and, per request:

- its key: SHA-256 of the canonical JSON of the whole request message (source, policy, entry,
  isolation, limits): two requests share a result only when they would run the same way;
- a hit in the LRU of results (bounded in entries and in estimated bytes) is answered at once, and the
  pool runs nothing in its place;
- a duplicate of a request that is still running (in flight) waits for that one's result instead of
  running a second copy;
- anything else runs; its result is remembered only when the program earned it alone (`cacheable`):
  never a status a neighbour or the machine can cause (`crashed`, `memory_limit`, `sandbox_error`, a
  timeout the pool did not confirm by a second run): the next occurrence runs again;
- a `namespace` (the service's client) prefixes every key: one cache can hold several clients' results
  without any client being answered from another's.

A cache hit returns the first run's ExecResult as it was (timings included). Results still come back
one per request, in input order. `hits` counts the programs served without running (both kinds).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict, deque
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from potrun.sandbox.wire.protocol import RunRequest
from potrun.types import ExecResult, Status

if TYPE_CHECKING:
    from potrun.sandbox.api import Sandbox

MAX_ENTRIES = 100_000
MAX_BYTES = 64 << 20  # estimated size of the results held
ENTRY_OVERHEAD = 400  # bytes: the key, the ExecResult object, the LRU links
MAX_ENTRY_BYTES = 64 << 10  # a result larger than this (a long list value) is not kept


# Statuses a program can be given by what ran before it or by the machine (a runner a neighbour left
# large, the OOM killer, a lost worker): never remembered for the next occurrence.
NOT_CACHED = frozenset({Status.CRASHED, Status.MEMORY_LIMIT, Status.SANDBOX_ERROR})


def request_key(request: RunRequest, namespace: bytes = b"") -> bytes:
    """The cache key of a request: a digest of all of it, so limits and policy are part of it (and of
    the namespace: a client's results are keyed apart from another's)."""
    digest = hashlib.sha256(namespace)
    digest.update(b"\0" if namespace else b"")
    digest.update(request.key().encode("utf-8", "surrogatepass"))
    return digest.digest()


def cacheable(result: ExecResult) -> bool:
    """Whether a result is one the program earns alone: not a status a neighbour or the machine can
    cause, and a timeout only once the pool confirmed it by a second run under a wider net (attempts 2):
    a CPU limit met on a loaded machine, or a net that load stretched, may not be the program's own."""
    if result.status in NOT_CACHED:
        return False
    return result.status is not Status.TIMEOUT or result.attempts >= 2


def result_size(result: ExecResult) -> int:
    """An estimate of the memory one cached result holds (bytes)."""
    size = ENTRY_OVERHEAD + len(result.stdout) + len(result.stderr) + len(result.error or "")
    size += 32 * len(getattr(result, "captured", None) or ())
    value = result.value
    if isinstance(value, str):
        size += len(value)
    elif isinstance(value, list):
        size += len(json.dumps(value, default=str))
    return size


class ResultCache:
    """An LRU of ExecResults by request key, bounded by entries and estimated bytes; safe to share
    between threads."""

    def __init__(self, max_entries: int = MAX_ENTRIES, max_bytes: int = MAX_BYTES) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._entries: OrderedDict[bytes, tuple[ExecResult, int]] = OrderedDict()
        self.bytes = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: bytes) -> ExecResult | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            self._entries.move_to_end(key)
            return entry[0]

    def put(self, key: bytes, result: ExecResult) -> None:
        if not cacheable(result):
            return
        size = result_size(result)
        if size > MAX_ENTRY_BYTES:
            return
        with self._lock:
            if key in self._entries:
                return
            self._entries[key] = (result, size)
            self.bytes += size
            while len(self._entries) > self.max_entries or self.bytes > self.max_bytes:
                _, (_, dropped) = self._entries.popitem(last=False)
                self.bytes -= dropped


class CachedSandbox:
    """A Sandbox that runs each distinct request once (see the module docstring): a `SandboxLike`, and
    `run` / `run_many` like a Sandbox's; it starts and closes the wrapped sandbox. Safe to share between
    threads, as the Sandbox is: each call dedupes its own stream's duplicates in flight, and all share
    the cache."""

    def __init__(self, sandbox: Sandbox, cache: ResultCache | None = None, *, namespace: bytes = b"") -> None:
        self.sandbox = sandbox
        self.cache = cache if cache is not None else ResultCache()
        self.namespace = namespace  # prefixes every key (`request_key`): the service's client
        self.hits = 0  # programs served without running (cache hits and duplicates of one in flight)
        self._lock = threading.Lock()

    def _hit(self) -> None:
        with self._lock:
            self.hits += 1

    def start(self) -> CachedSandbox:
        self.sandbox.start()
        return self

    def close(self) -> None:
        self.sandbox.close()

    def __enter__(self) -> CachedSandbox:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(
        self, source: str, entry: str | None = None, *, capture: bool = False, timeout: float | None = None
    ) -> RunRequest:
        return self.sandbox.request(source, entry, capture=capture, timeout=timeout)

    def companion(self, policy: str = "trusted", isolation: str = "fork", workers: int = 4) -> Sandbox:
        """The wrapped sandbox's companion: checker programs run uncached."""
        return self.sandbox.companion(policy, isolation, workers)

    def run(self, source: str, *, entry: str | None = None, capture: bool = False) -> ExecResult:
        return next(self.run_many([source], entry=entry, capture=capture))

    def run_many(
        self, sources: Iterable[str], *, entry: str | None = None, capture: bool = False
    ) -> Iterator[ExecResult]:
        requests = (self.request(source, entry, capture=capture) for source in sources)
        return self.run_requests(requests)  # type: ignore[return-value]

    def run_requests(self, requests: Iterable[RunRequest | None]) -> Iterator[ExecResult | None]:
        """One result per request, in input order; repeated requests are not sent to the pool."""
        # What to do with each position of the stream, in order: ("run", key) the pool's result is the
        # answer; ("hit", result) answered from the cache; ("dup", key) the result of an earlier
        # position still in flight; ("none", None) a None request.
        plans: deque[tuple[str, Any]] = deque()
        inflight: dict[bytes, list[Any]] = {}  # key -> [duplicates waiting, result once known]

        def forward() -> Iterator[RunRequest | None]:
            for message in requests:
                if message is None:
                    plans.append(("none", None))
                    yield None
                    continue
                key = request_key(message, self.namespace)
                cached = self.cache.get(key)
                if cached is not None:
                    plans.append(("hit", cached))
                    yield None
                elif key in inflight:
                    inflight[key][0] += 1
                    plans.append(("dup", key))
                    yield None
                else:
                    inflight[key] = [0, None]
                    plans.append(("run", key))
                    yield message

        for result in self.sandbox.run_requests(forward()):
            kind, item = plans.popleft()
            if kind == "none":
                yield None
            elif kind == "hit":
                self._hit()
                yield item
            elif kind == "run":
                assert result is not None
                self.cache.put(item, result)
                waiting = inflight[item]
                if waiting[0]:
                    waiting[1] = result
                else:
                    del inflight[item]
                yield result
            else:  # dup: its original came earlier in the stream, so its result is known
                waiting = inflight[item]
                waiting[0] -= 1
                if waiting[0] == 0:
                    del inflight[item]
                self._hit()
                yield waiting[1]
