"""The service's ASGI app: `make_app(ServiceConfig(...))`, served by uvicorn (`potrun serve`).

Routes (docs/service.md):

    POST /run_code         SandboxFusion's, for language python (fusion.py): one program, one answer
    POST /v1/run           {"programs": [source | {"code", "entry", "timeout", "memory_mb", "stdin",
                           "files"}], "entry": "auto"}: one JSON line per program as each finishes,
                           {"index": i, ...ExecResult.to_json(), "stdout", "stderr"}
    POST /v1/score         {"completions": [...], "golds": [...], "mode", "preset", "shaped", "scale",
                           "compare_options": {...}}: one JSON line per pair, in order,
                           {"index": i, "reward": r, ...the RecordResult's `potrun check --out` line}
    POST /openrlhf/reward  OpenRLHF's remote reward model: {"query", "prompts", "labels"} ->
                           {"rewards", "scores", "extra_logs"} (`potrun.integrations.openrlhf`'s
                           `reward_payload`)
    GET  /health           {"status": "ok", "pid", ...}: no token needed (for balancers' probes)
    GET  /metrics          Prometheus text (metrics.py)

One Sandbox per process, started before the first request is accepted and closed after the last one
finished (uvicorn's graceful shutdown on SIGTERM: it stops accepting, finishes what it accepted).
Programs share its warm pool; /v1/score and the OpenRLHF route go through a dedup cache of results
(rollouts repeat programs), kept per client (its credentials and its address: `client_namespace`), and
holding only results a program earns alone (`potrun.check.cache.cacheable`). Every request but /health must
carry `Authorization: Bearer TOKEN` when the service has a token; a body larger than `max_body_bytes`
is 413; a request whose programs would take the queue past its limit is 429 (admission.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import hmac
import json
import os
import threading
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from potrun.check.cache import CachedSandbox, ResultCache
from potrun.check.pipeline import RecordResult
from potrun.comparators import PRESETS, check_compare_options
from potrun.options import check_options
from potrun.rewards import iter_records, reward_of, reward_points
from potrun.sandbox.api import Cancellation, Sandbox
from potrun.sandbox.config import SandboxConfig, check_megabytes, check_seconds
from potrun.sandbox.wire.protocol import RunRequest
from potrun.service import fusion
from potrun.service.admission import Admission, QueueFull, TooLarge
from potrun.service.metrics import Metrics
from potrun.types import ERROR_STATUSES, ExecResult, PotrunError, UsageError, error_code

QUEUE_LIMIT = 4096  # programs in flight per process: a few seconds of a small pool's warm throughput
MAX_BODY_BYTES = 32 * 1024 * 1024  # a /run_code with 16 MiB of files in base64, and room
NDJSON = "application/x-ndjson"


@dataclass(frozen=True, slots=True)
class ServiceConfig:
    """A service process's options: its sandbox (trusted by default: SandboxFusion runs arbitrary
    Python, and the OS boundary contains it), its token, its queue and body limits."""

    sandbox: SandboxConfig = field(default_factory=lambda: SandboxConfig(policy="trusted"))
    token: str | None = None
    queue_limit: int = QUEUE_LIMIT
    max_body_bytes: int = MAX_BODY_BYTES
    # The operator's ceilings for a client's per-call limits (/run_code's run_timeout and
    # memory_limit_MB, /v1/run's timeout and memory_mb): a request above one is capped to it (and the
    # answer's X-Potrun-Capped header names what was). None: the sandbox's own limits.
    max_timeout_s: float | None = None
    max_memory_mb: int | None = None

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ServiceConfig:
        return cls(**{**data, "sandbox": SandboxConfig(**data["sandbox"])})


class BodyTooLarge(Exception):
    pass


CAPPED_HEADER = "X-Potrun-Capped"


class Service:
    """What the routes share: the sandbox, the queue, the counters."""

    def __init__(self, config: ServiceConfig) -> None:
        self.config = config
        self.box = Sandbox.from_config(config.sandbox)
        self.cache = ResultCache()  # one LRU, its keys prefixed by the client's (`cached_for`)
        self.admission = Admission(config.queue_limit)
        self.metrics = Metrics(lambda: (self.admission.depth, self.admission.limit, self.admission.refused))
        limits = config.sandbox.limits
        self.max_timeout_s = config.max_timeout_s if config.max_timeout_s is not None else limits.timeout_s
        self.max_memory_mb = config.max_memory_mb if config.max_memory_mb is not None else limits.memory_mb

    def capped(self, timeout: float | None, memory_mb: int | None, capped: list[str]) -> tuple[Any, Any]:
        """A client's per-call limits within the operator's ceilings; what was lowered is named in
        `capped` (a client never runs a program longer or larger than the operator allows). A value the
        sandbox refuses (not a number, past its own bounds) is refused as before: a UsageError."""
        if timeout is not None:
            check_seconds("timeout", timeout)
            if timeout > self.max_timeout_s:
                capped.append(f"timeout={self.max_timeout_s:g}")
                timeout = self.max_timeout_s
        if memory_mb is not None:
            check_megabytes("memory_mb", memory_mb)
            if memory_mb > self.max_memory_mb:
                capped.append(f"memory_mb={self.max_memory_mb}")
                memory_mb = self.max_memory_mb
        return timeout, memory_mb

    # -- the routes ------------------------------------------------------------------------------------

    async def run_code(self, body: Any, request: Request) -> Response:
        try:
            call = fusion.read_request(body)
        except fusion.InvalidRequest as exc:
            return JSONResponse({"detail": exc.detail}, status_code=422)
        except fusion.Unsupported as exc:
            return JSONResponse(fusion.sandbox_error(str(exc)))
        capped: list[str] = []
        try:
            timeout, memory_mb = self.capped(call.timeout, call.memory_mb, capped)
            prepared = self.box.request(
                call.code,
                "stdout",
                timeout=timeout,
                memory_mb=memory_mb,
                stdin=call.stdin,
                files=call.files,
                full_output=True,  # SandboxFusion answers with the whole streams: verl compares them
            )
        except UsageError as exc:  # a file name outside the scratch, inputs too large
            return JSONResponse(fusion.sandbox_error(str(exc)))
        refused = self._admit(1)
        if refused is not None:
            return refused
        try:
            result = await _unless_client_leaves(request, self._run_one(prepared))
        finally:
            self.admission.release(1)
        if result is None:  # the client left: its program was cancelled, queued or running
            return Response(status_code=499)
        return JSONResponse(fusion.response(result), headers=_capped_header(capped))

    async def run(self, body: Any, request: Request) -> Response:
        capped: list[str] = []
        try:
            requests = self._run_requests(body, capped)
        except PotrunError as exc:
            return error_response(exc)
        refused = self._admit(len(requests))
        if refused is not None:
            return refused
        return StreamingResponse(
            self._stream_finished(requests), media_type=NDJSON, headers=_capped_header(sorted(set(capped)))
        )

    def cached_for(self, request: Request) -> CachedSandbox:
        """The dedup cache as one client sees it: its own results only."""
        return CachedSandbox(self.box, self.cache, namespace=client_namespace(request))

    async def score(self, body: Any, request: Request) -> Response:
        try:
            completions, golds = _list(body, "completions"), _list(body, "golds")
            check_options(body, SCORE_FIELDS, "the body of /v1/score")
            _check_preset_runs_here(body.get("preset", "default"))
            compare_options = body.get("compare_options") or {}
            if not isinstance(compare_options, Mapping):
                raise UsageError("compare_options must be an object of the preset's options")
            check_compare_options(body.get("preset", "default"), compare_options, "compare_options")
            points = reward_points(shaped=bool(body.get("shaped", False)), scale=body.get("scale"))
            results = iter_records(
                completions,
                golds,
                mode=body.get("mode", "pot"),
                preset=body.get("preset", "default"),
                sandbox=self.cached_for(request),
                **dict(compare_options),
            )
        except PotrunError as exc:
            return error_response(exc)
        refused = self._admit(len(completions))
        if refused is not None:
            return refused

        def line(index: int, record: RecordResult) -> bytes:  # on the scoring thread
            self.metrics.count_program(record.status)
            return _line({"index": index, "reward": reward_of(record, points), **record.to_json()})

        async def lines() -> AsyncIterator[bytes]:
            try:
                async for chunk in _in_thread(line(index, record) for index, record in enumerate(results)):
                    yield b"".join(chunk)
            finally:
                self.admission.release(len(completions))

        return StreamingResponse(lines(), media_type=NDJSON)

    async def openrlhf_reward(self, body: Any, request: Request) -> Response:
        # Imported on first use: the service's other routes need none of it.
        from potrun.integrations.openrlhf import reward_payload

        query = body.get("query") if isinstance(body, Mapping) else None
        size = len(query) if isinstance(query, list) else 0  # not a list: reward_payload refuses it
        refused = self._admit(size)
        if refused is not None:
            return refused
        cancellation = Cancellation()  # the client's leaving cancels the batch's programs, running ones too

        def scored() -> dict[str, Any]:  # on a thread of the loop's executor
            with cancellation.active():
                return reward_payload(body, self.cached_for(request))

        try:
            answer = await _unless_client_leaves(request, asyncio.to_thread(scored), cancellation.cancel)
        except PotrunError as exc:
            return error_response(exc)
        finally:
            self.admission.release(size)
        if answer is None:
            return Response(status_code=499)
        return JSONResponse(answer)

    async def health(self, request: Request) -> Response:
        config = self.config.sandbox
        return JSONResponse(
            {
                "status": "ok",
                "pid": os.getpid(),
                "backend": config.backend,
                "policy": config.policy,
                "workers": self.box.workers,
                "queue_depth": self.admission.depth,
                "queue_limit": self.admission.limit,
            }
        )

    async def metrics_text(self, request: Request) -> Response:
        text = self.metrics.render(self.admission.depth, self.admission.limit, self.admission.refused)
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4")

    # -- helpers ---------------------------------------------------------------------------------------

    def with_body(
        self, handler: Callable[[Any, Request], Awaitable[Response]]
    ) -> Callable[[Request], Awaitable[Response]]:
        """A route that hands `handler` the request's JSON body (and the request), or answers the
        refusal of it itself."""

        async def route(request: Request) -> Response:
            body = await self._body(request)
            return body if isinstance(body, Response) else await handler(body, request)

        return route

    async def _body(self, request: Request) -> Any:
        """The request's JSON, or the response that refuses it (413 too large, 422 not JSON)."""
        self.metrics.count_request(request.url.path)
        try:
            data = await _read_limited(request, self.config.max_body_bytes)
            return json.loads(data, parse_constant=_refuse_constant)
        except BodyTooLarge:
            return JSONResponse({"error": f"body larger than {self.config.max_body_bytes} bytes"}, status_code=413)
        except (ValueError, RecursionError) as exc:  # not UTF-8, not JSON (NaN is not), nested too deep
            detail = [{"type": "json_invalid", "loc": ["body"], "msg": f"JSON decode error: {exc}", "input": None}]
            return JSONResponse({"detail": detail}, status_code=422)

    def _admit(self, programs: int) -> Response | None:
        try:
            self.admission.admit(programs)
        except QueueFull as exc:
            return JSONResponse({"error": str(exc)}, status_code=429, headers={"Retry-After": "1"})
        except TooLarge as exc:
            return JSONResponse({"error": str(exc)}, status_code=413)
        return None

    async def _run_one(self, prepared: RunRequest) -> ExecResult:
        async for result in self.box.arun_requests([prepared]):
            assert result is not None
            self.metrics.count_program(result.status.value)
            return result
        raise AssertionError("a stream of one request yields one result")

    def _run_requests(self, body: Any, capped: list[str]) -> list[RunRequest]:
        programs = _list(body, "programs")
        check_options(body, ("programs", "entry"), "the body of /v1/run")
        entry = body.get("entry")
        requests = []
        for program in programs:
            if isinstance(program, str):
                requests.append(self.box.request(program, entry))
            elif isinstance(program, Mapping):
                check_options(program, RUN_PROGRAM_FIELDS, "a program of /v1/run")
                if "code" not in program:
                    raise UsageError("a program of /v1/run needs its 'code'")
                timeout, memory_mb = self.capped(program.get("timeout"), program.get("memory_mb"), capped)
                requests.append(
                    self.box.request(
                        program["code"],
                        program.get("entry", entry),
                        timeout=timeout,
                        memory_mb=memory_mb,
                        stdin=program.get("stdin"),
                        files=program.get("files"),
                    )
                )
            else:
                raise UsageError("each program must be a source string or an object with its code")
        return requests

    async def _stream_finished(self, requests: list[RunRequest]) -> AsyncIterator[bytes]:
        """One line per request, as each finishes; a program's room in the queue is freed as it does
        (also when the client leaves: the programs left are cancelled)."""
        finished: asyncio.Queue[tuple[int, ExecResult]] = asyncio.Queue()

        async def run(index: int, prepared: RunRequest) -> None:
            try:
                finished.put_nowait((index, await self._run_one(prepared)))
            finally:
                self.admission.release(1)

        tasks = [asyncio.create_task(run(index, prepared)) for index, prepared in enumerate(requests)]
        try:
            for _ in tasks:
                index, result = await finished.get()
                yield _line({"index": index, **_result_json(result)})
        finally:
            for task in tasks:
                task.cancel()


def _capped_header(capped: list[str]) -> dict[str, str] | None:
    return {CAPPED_HEADER: ", ".join(capped)} if capped else None


def client_namespace(request: Request) -> bytes:
    """Who a request comes from, for the dedup cache: a digest of its credentials (the Authorization
    header) and its address. Two clients never share an entry, so no client learns from a cache hit
    what another ran, nor is answered with a result another's requests shaped."""
    host = request.client.host if request.client is not None else ""
    credentials = request.headers.get("authorization", "")
    return hashlib.sha256(f"{credentials}\0{host}".encode("utf-8", "surrogatepass")).digest()


# The fields of each JSON body (docs/service.md): any other is a 400 naming it and the closest.
SCORE_FIELDS = ("completions", "golds", "preset", "mode", "shaped", "scale", "compare_options")
RUN_PROGRAM_FIELDS = ("code", "entry", "timeout", "memory_mb", "stdin", "files")


def _result_json(result: ExecResult) -> dict[str, Any]:
    return {**result.to_json(), "stdout": result.stdout, "stderr": result.stderr}


def _refuse_constant(name: str) -> Any:
    """NaN and Infinity are not JSON: Python's parser takes them, and a NaN limit or reward would then
    fail where it is used (or in the answer that echoes it)."""
    raise ValueError(f"{name} is not a JSON value")


def _check_preset_runs_here(preset: Any) -> None:
    """Scoring runs on the service's threads: a preset that works only in the main thread is refused
    before any record runs (UsageError, a 400), not answered False for every record."""
    spec = PRESETS.get(preset) if isinstance(preset, str) else None
    if spec is not None and spec.main_thread_only:
        raise UsageError(f"preset {preset!r} works only in a program's main thread: the service cannot use it")


def _list(body: Any, name: str) -> list[Any]:
    if not isinstance(body, Mapping) or not isinstance(body.get(name), list):
        raise UsageError(f"the body must be a JSON object with a list {name!r}")
    return list(body[name])


def _line(data: dict[str, Any]) -> bytes:
    return json.dumps(data, allow_nan=False).encode() + b"\n"


def error_response(error: PotrunError) -> Response:
    """The answer to a request that raised one of potrun's errors: its class's status (ERROR_STATUSES,
    beside the CLI's exit codes), the message as the error."""
    return JSONResponse({"error": str(error)}, status_code=error_code(error, ERROR_STATUSES))


async def _read_limited(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge()
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge()
        chunks.append(chunk)
    return b"".join(chunks)


_T = TypeVar("_T")


async def _unless_client_leaves(
    request: Request, work: Awaitable[_T], on_leave: Callable[[], None] | None = None
) -> _T | None:
    """`work`'s result, or None when the client disconnects first: then `work` is cancelled (its stream
    is closed: a program still queued is never sent, one running is stopped) and `on_leave` called
    (work on a thread is cancelled by it: its `Cancellation`). One watcher task per request, which
    cancels this one on a disconnect (cheaper than racing two tasks: /run_code's hot path)."""
    here = asyncio.current_task()
    assert here is not None
    watcher = asyncio.get_running_loop().create_task(_cancel_when_gone(request, here))
    try:
        return await work
    except asyncio.CancelledError:
        if watcher.done() and not watcher.cancelled():  # the client left: not the server's own stop
            here.uncancel()
            if on_leave is not None:
                on_leave()
            return None
        raise
    finally:
        watcher.cancel()


async def _cancel_when_gone(request: Request, task: asyncio.Task[Any]) -> None:
    await _disconnected(request)
    task.cancel()


async def _disconnected(request: Request) -> None:
    """Returns when the client has gone (its body is read: what is left to receive is the disconnect)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def _in_thread(items: Iterator[Any]) -> AsyncIterator[list[Any]]:
    """Iterate a blocking iterator on a thread of its own (the pipeline's scoring runs there; the loop
    goes on serving), handing its items to the event loop in chunks: all that came since the loop last
    looked, with one wake-up of the loop per chunk rather than per item."""
    loop = asyncio.get_running_loop()
    ready: deque[Any] = deque()  # filled by the thread, emptied by the loop (deque appends are atomic)
    wake = asyncio.Event()
    finished: list[BaseException | None] = []
    stopped = threading.Event()  # the consumer left (the client disconnected): take no more items
    cancellation = Cancellation()  # ...and the programs the items wait for are cancelled, running ones too

    def drain() -> None:
        try:
            with cancellation.active():
                _drain_into(ready, items)
        except BaseException as exc:  # handed to the consumer, raised there
            finished.append(exc)
        loop.call_soon_threadsafe(wake.set)

    def _drain_into(ready: deque[Any], items: Iterator[Any]) -> None:
        for item in items:
            if stopped.is_set():  # the items' generators close: their programs not sent are dropped
                break
            was_empty = not ready
            ready.append(item)
            if was_empty:
                loop.call_soon_threadsafe(wake.set)
        close = getattr(items, "close", None)
        if stopped.is_set() and close is not None:
            close()
        finished.append(None)

    worker = loop.run_in_executor(None, drain)
    try:
        while True:
            if not ready and not finished:  # (the thread's wake-up runs on this loop: none is lost)
                await wake.wait()
                wake.clear()
            chunk = [ready.popleft() for _ in range(len(ready))]
            if chunk:
                yield chunk
            elif finished:  # appended after the last item: everything is handed over
                if finished[0] is not None:
                    raise finished[0]
                return
    finally:
        if not finished:  # the consumer left first: the thread stops at its next item, or at once
            stopped.set()
            cancellation.cancel()
        await asyncio.shield(worker)


class TokenCheck:
    """ASGI middleware: every HTTP request but GET /health carries `Authorization: Bearer TOKEN`
    (compared in constant time), else 401."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] != "/health":
            given = dict(scope["headers"]).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                response = JSONResponse(
                    {"error": "missing or wrong bearer token"}, status_code=401, headers={"WWW-Authenticate": "Bearer"}
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def make_app(config: ServiceConfig | None = None) -> ASGIApp:
    """The service's ASGI app: its Sandbox starts before it accepts a request and closes after the
    last one (the lifespan)."""
    service = Service(config or ServiceConfig())

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await asyncio.to_thread(service.box.start)
        try:
            yield
        finally:
            await asyncio.to_thread(service.box.close)

    routes = [
        Route("/run_code", service.with_body(service.run_code), methods=["POST"]),
        Route("/v1/run", service.with_body(service.run), methods=["POST"]),
        Route("/v1/score", service.with_body(service.score), methods=["POST"]),
        Route("/openrlhf/reward", service.with_body(service.openrlhf_reward), methods=["POST"]),
        Route("/health", service.health, methods=["GET"]),
        Route("/metrics", service.metrics_text, methods=["GET"]),
    ]
    app: ASGIApp = Starlette(routes=routes, lifespan=lifespan)
    if service.config.token:
        app = TokenCheck(app, service.config.token)
    return app


CONFIG_ENVIRONMENT = "POTRUN_SERVE_CONFIG"


def app_from_environment() -> ASGIApp:
    """The app of a uvicorn worker process (`--workers N`): its ServiceConfig comes as JSON in the
    environment variable POTRUN_SERVE_CONFIG, which `potrun serve` sets."""
    return make_app(ServiceConfig.from_json(json.loads(os.environ[CONFIG_ENVIRONMENT])))
