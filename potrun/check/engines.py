"""Engines: where `potrun check` runs the records. Both yield one RecordResult per record, in input order.

- `LocalEngine`: one sandbox pool on this machine (`check_records` over a `Sandbox`).
- `RayEngine` (`--engine ray`, the `ray` extra): the input is cut into shards of consecutive records,
  scored by Ray actors (`ShardScorer`, one per node by default), each holding its own local `Sandbox`
  pool (and its own dedup cache). Extraction and comparison run on the actors too: the driver only
  reads records, ships shards and writes results. Shards are submitted to the least busy actor, at most
  `INFLIGHT_PER_ACTOR` per actor (back-pressure: a bounded number of shard refs in flight), and
  collected in submission order, so results stream back in input order to the same output file.

There is no cluster protocol here: Ray places the actors (`SPREAD`), restarts an actor whose node or
process died (`max_restarts`) and runs its unfinished shards again (`max_task_retries`). A shard's
results come back only when the whole shard is done, so a retried shard is never reported twice.

Without `--ray-address`, a local Ray instance is started for the run (`ray.init(num_cpus=...)`, no
dashboard, no usage statistics, bound to 127.0.0.1, workers at normal priority) and shut down after
it. With an address (`ray://head:10001`, `head:6379`, or `auto`), the driver joins that cluster (an
address where nothing listens fails at once, not after Ray's minutes of retries); the same potrun
version must be installed on every node. Records and results cross Ray as tuples of plain data.
"""

from __future__ import annotations

import os
import socket
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from potrun.check.cache import CachedSandbox
from potrun.check.pipeline import RESULT_FIELDS, CheckOptions, RecordResult, check_records
from potrun.check.records import Record
from potrun.sandbox.api import Sandbox, SandboxConfig, SandboxLike
from potrun.types import BadRecord, InputError, PotrunError, SandboxUnavailable, UsageError

ENGINES = ("local", "ray")
SHARD_RECORDS = 512
INFLIGHT_PER_ACTOR = 3
ACTOR_RESTARTS = 3
CLOSE_TIMEOUT_S = 10.0
PROBE_TIMEOUT_S = 10.0
ACTOR_START_TIMEOUT_S = 300.0


class LocalEngine:
    """One sandbox pool on this machine."""

    name = "local"

    def __init__(self, sandbox_options: Mapping[str, Any], *, cache: bool = True) -> None:
        self.config = SandboxConfig(**sandbox_options)
        self.sandbox = Sandbox.from_config(self.config)
        self._cache = CachedSandbox(self.sandbox) if cache else None
        self._runner: SandboxLike = self._cache if self._cache is not None else self.sandbox

    @property
    def cache_hits(self) -> int:
        return self._cache.hits if self._cache is not None else 0

    @property
    def settings(self) -> dict[str, Any]:
        return {"engine": self.name}

    def start(self) -> LocalEngine:
        self.sandbox.start()
        return self

    def close(self) -> None:
        self.sandbox.close()

    def __enter__(self) -> LocalEngine:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def results(
        self, records: Iterable[Record | BadRecord], options: CheckOptions, golds: Mapping[Any, Any] | None = None
    ) -> Iterator[RecordResult]:
        return check_records(records, self._runner, options, golds)


class ShardScorer:
    """A Ray actor: a warm local sandbox pool that scores shards of records (runs on a Ray worker).

    The check options travel with each shard; the golds (`--gold FILE`) as a Ray object reference,
    wrapped in a list so that Ray does not resolve it per call: the actor fetches it once and keeps it.
    A restarted actor (its node or process died) is a fresh instance: its pool starts again, and it
    fetches the golds again when its first shard comes."""

    def __init__(self, config: SandboxConfig, cache: bool) -> None:
        self.sandbox = Sandbox.from_config(config).start()
        self._cache = CachedSandbox(self.sandbox) if cache else None
        self.runner: SandboxLike = self._cache if self._cache is not None else self.sandbox
        self._golds: tuple[Any, Mapping[Any, Any] | None] = (None, None)  # (reference, the golds)

    def score(
        self, shard: list[tuple[Any, ...]], options: CheckOptions, golds_ref: list[Any]
    ) -> tuple[list[tuple[Any, ...]], int, str | None]:
        """(results in shard order, cache hits in this shard, the --strict error or None); records and
        results travel as tuples (`_pack_record`, `_pack_result`)."""
        hits = self._cache_hits()
        results: list[tuple[Any, ...]] = []
        error = None
        records = map(_unpack_record, shard)
        try:
            results.extend(map(_pack_result, check_records(records, self.runner, options, self._resolve(golds_ref))))
        except InputError as exc:
            error = str(exc)
        return results, self._cache_hits() - hits, error

    def _cache_hits(self) -> int:
        return self._cache.hits if self._cache is not None else 0

    def _resolve(self, golds_ref: list[Any]) -> Mapping[Any, Any] | None:
        if not golds_ref:
            return None
        if self._golds[0] != golds_ref[0]:
            import ray

            self._golds = (golds_ref[0], ray.get(golds_ref[0]))
        return self._golds[1]

    def state(self) -> dict[str, Any]:
        """Where this actor runs and how its pool fares (for tests and diagnostics)."""
        return {"pid": os.getpid(), "workers": self.sandbox.workers, "replaced": self.sandbox.workers_replaced}

    def close(self) -> None:
        self.sandbox.close()


class RayEngine:
    """Shards on Ray actors, each with its own sandbox pool (see the module docstring)."""

    name = "ray"

    def __init__(
        self,
        sandbox_options: Mapping[str, Any],
        *,
        cache: bool = True,
        address: str | None = None,
        actors: int | None = None,
        num_cpus: int | None = None,
        shard_records: int | None = None,
    ) -> None:
        self.config = SandboxConfig(**sandbox_options)  # checked here; the sandboxes are the actors'
        self.cache = cache
        self.address = address
        self.actors = actors
        self.num_cpus = num_cpus
        self.shard_records = shard_records or SHARD_RECORDS
        self.cache_hits = 0
        self.actor_count = actors
        self._ray: Any = None
        self._started_ray = False
        self._handles: list[Any] = []

    @property
    def settings(self) -> dict[str, Any]:
        return {"engine": self.name, "ray_address": self.address or "local", "ray_actors": self.actor_count}

    # -- life cycle ------------------------------------------------------------------------------------

    def start(self) -> RayEngine:
        if self._ray is not None:
            return self
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        if self.address is None:
            # A local instance listens on the loopback only (Ray otherwise picks the outward interface),
            # and its workers run at normal priority, like the local engine's (Ray's default is nice 15).
            os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
            os.environ.setdefault("RAY_worker_niceness", "0")
        ray = import_ray()
        if self.address is not None:
            try:
                probe_address(self.address)
            except SandboxUnavailable as exc:  # the option names a cluster that is not there: bad usage
                raise UsageError(f"--ray-address: {exc}") from None
        if not ray.is_initialized():
            try:
                if self.address is None:
                    cpus = self.num_cpus or max(os.cpu_count() or 1, self.actors or 1)  # each actor takes 1
                    ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False, logging_level="warning")
                else:
                    ray.init(address=self.address, logging_level="warning")
            except SandboxUnavailable:
                raise
            except Exception as exc:  # ConnectionError, RuntimeError, ValueError: all mean "no cluster"
                where = self.address or "a local Ray instance"
                raise SandboxUnavailable(f"cannot start or join {where}: {exc}") from None
            self._started_ray = True
        self._ray = ray
        try:
            self._start_actors()
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        self._stop_actors()
        if self._started_ray and self._ray is not None:
            self._ray.shutdown()
            self._started_ray = False
        self._ray = None

    def __enter__(self) -> RayEngine:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _start_actors(self) -> None:
        """One actor per node (or --ray-actors), each with a started pool: ready when start() returns."""
        ray = self._ray
        count = self.actors or max(1, sum(1 for node in ray.nodes() if node.get("Alive")))
        actor = ray.remote(ShardScorer).options(
            num_cpus=1, max_restarts=ACTOR_RESTARTS, max_task_retries=ACTOR_RESTARTS, scheduling_strategy="SPREAD"
        )
        self._handles = [actor.remote(self.config, self.cache) for _ in range(count)]
        self.actor_count = count
        try:
            ready = [handle.state.remote() for handle in self._handles]
            try:
                self._wait(lambda refs: ray.get(refs, timeout=ACTOR_START_TIMEOUT_S), ready)
            except ray.exceptions.GetTimeoutError:
                raise SandboxUnavailable(
                    f"{count} Ray actor(s) with a sandbox pool were not ready after "
                    f"{ACTOR_START_TIMEOUT_S:.0f} s (not enough free CPUs?)"
                ) from None
        except BaseException:
            self._stop_actors()
            raise

    def _stop_actors(self) -> None:
        """Close each actor's pool (its workers go), then end the actors."""
        if not self._handles or self._ray is None:
            return
        ray = self._ray
        closing = [handle.close.remote() for handle in self._handles]
        try:
            ray.wait(closing, num_returns=len(closing), timeout=CLOSE_TIMEOUT_S)
        except Exception:  # an actor already dead: nothing of it to close
            pass
        for handle in self._handles:
            try:
                ray.kill(handle, no_restart=True)
            except Exception:
                pass
        self._handles = []

    # -- running ---------------------------------------------------------------------------------------

    def results(
        self, records: Iterable[Record | BadRecord], options: CheckOptions, golds: Mapping[Any, Any] | None = None
    ) -> Iterator[RecordResult]:
        self.start()
        ray, actors = self._ray, self._handles
        golds_ref = [ray.put(dict(golds))] if golds else []
        pending: deque[tuple[int, Any]] = deque()  # (actor, shard ref), in submission (= input) order
        limit = INFLIGHT_PER_ACTOR * len(actors)
        try:
            for shard in _shards(records, self.shard_records):
                if len(pending) >= limit:
                    yield from self._collect(pending.popleft()[1])
                busy = self._unfinished(pending, len(actors))
                chosen = min(range(len(actors)), key=lambda n: busy[n])
                shard_ref = actors[chosen].score.remote([_pack_record(item) for item in shard], options, golds_ref)
                pending.append((chosen, shard_ref))
            while pending:
                yield from self._collect(pending.popleft()[1])
        finally:
            for _, ref in pending:
                try:
                    ray.cancel(ref)
                except Exception:  # already done, or an actor task this Ray cannot cancel
                    pass

    def _unfinished(self, pending: deque[tuple[int, Any]], count: int) -> list[int]:
        busy = [0] * count
        if pending:
            refs = [ref for _, ref in pending]
            _, unready = self._ray.wait(refs, num_returns=len(refs), timeout=0)
            unfinished = set(unready)
            for actor, ref in pending:
                busy[actor] += ref in unfinished
        return busy

    def _collect(self, ref: Any) -> Iterator[RecordResult]:
        results, hits, error = self._wait(self._ray.get, ref)
        self.cache_hits += hits
        yield from map(_unpack_result, results)
        if error is not None:
            raise InputError(error)

    def _wait(self, get: Any, refs: Any) -> Any:
        """ray.get, with Ray's errors mapped to potrun's: a PotrunError raised on an actor (a sandbox
        that cannot start there) is raised as itself; a lost actor is SandboxUnavailable."""
        ray = self._ray
        try:
            return get(refs)
        except ray.exceptions.RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, PotrunError):
                raise cause from None
            raise SandboxUnavailable(f"a Ray task failed: {exc}") from None
        except ray.exceptions.RayActorError as exc:
            cause = getattr(exc, "cause", None) or getattr(exc, "error_msg", None) or exc
            raise SandboxUnavailable(f"a Ray actor was lost beyond {ACTOR_RESTARTS} restarts: {cause}") from None


# Records and results cross Ray as tuples of plain data: pickling frozen slotted dataclasses goes
# through dataclasses.fields() for every object, several times slower on both sides. The driver and
# the actors run the same potrun version (install the same one on every node).
def _pack_record(item: Record | BadRecord) -> tuple[Any, ...]:
    if isinstance(item, BadRecord):
        return (item.line, item.message, item.field_name)
    return (item.line, item.data)


def _unpack_record(packed: tuple[Any, ...]) -> Record | BadRecord:
    return Record(*packed) if len(packed) == 2 else BadRecord(*packed)


def _pack_result(result: RecordResult) -> tuple[Any, ...]:
    return tuple([getattr(result, name) for name in RESULT_FIELDS])


def _unpack_result(packed: tuple[Any, ...]) -> RecordResult:
    return RecordResult(*packed)


def _shards(records: Iterable[Record | BadRecord], size: int) -> Iterator[list[Record | BadRecord]]:
    shard: list[Record | BadRecord] = []
    for item in records:
        shard.append(item)
        if len(shard) >= size:
            yield shard
            shard = []
    if shard:
        yield shard


def probe_address(address: str, timeout_s: float = PROBE_TIMEOUT_S) -> None:
    """Fail fast on a cluster address nothing listens on (ray.init would retry it for minutes)."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return  # "auto" and the like: Ray resolves them
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise SandboxUnavailable(f"no Ray cluster answers at {address}: {exc.strerror or exc}") from None


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise UsageError("--engine ray needs Ray: pip install 'potrun[ray]'") from None
    return ray


def make_engine(
    name: str,
    sandbox_options: Mapping[str, Any],
    *,
    cache: bool = True,
    ray_address: str | None = None,
    ray_actors: int | None = None,
) -> LocalEngine | RayEngine:
    if name == "local":
        if ray_address or ray_actors:
            raise UsageError("--ray-address and --ray-actors need --engine ray")
        return LocalEngine(sandbox_options, cache=cache)
    if name == "ray":
        import_ray()
        return RayEngine(sandbox_options, cache=cache, address=ray_address, actors=ray_actors)
    raise UsageError(f"unknown engine {name!r}; choose one of {', '.join(ENGINES)}")
