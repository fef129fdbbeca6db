"""The parent's side of the sandbox: a pool of workers behind a tiny backend interface.

A backend only knows how to start a worker and give back a `WorkerConnection` (two byte streams and a
way to kill it): a local process (`process.py`) or a long-lived container (`docker.py`). The pool does
the rest, the same for every backend: it streams requests to the workers, a few ahead so that no worker
waits for a round trip, yields results in input order, and watches each worker from outside. A worker
that dies, breaks the protocol or stops answering is killed and replaced; its programs are retried
once, then reported as `sandbox_error`. The run goes on.
"""

from __future__ import annotations

import os
import select
import time
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from potrun.sandbox.protocol import (
    PROTOCOL_VERSION,
    FrameReader,
    ProtocolError,
    RunRequest,
    decode,
    encode_exit,
    encode_request,
    result_from_wire,
)
from potrun.types import ExecResult, Isolation, SandboxUnavailable, Status

PIPELINE_DEPTH = 128  # requests in flight per worker: twice what a warm runner holds (WARM_QUEUE)
MAX_AHEAD = 20_000  # results held for in-order delivery behind one slow program...
# ...holding at most about this many bytes of answers: past it, potrun reads only the worker that has
# the program everyone waits for, and the others wait (back-pressure on the sandbox, not memory here).
MAX_AHEAD_BYTES = 16 << 20
WATCHDOG_GRACE_S = 3.0  # beyond a program's own limit, before the worker itself is presumed lost
START_TIMEOUT_S = 60.0
MAX_ATTEMPTS = 2


class WorkerConnection(Protocol):
    """One running worker, as a backend provides it."""

    def read_fd(self) -> int: ...
    def write_fd(self) -> int: ...
    def read(self) -> bytes: ...  # what is available now; b"" at end of stream
    def write(self, data: bytes) -> int: ...  # non-blocking; bytes taken
    def kill(self) -> None: ...


class Backend(Protocol):
    name: str

    def start_worker(self, slot: int) -> WorkerConnection: ...
    def close(self) -> None: ...


@dataclass(slots=True)
class Job:
    index: int
    request: RunRequest
    attempts: int = 0


@dataclass(eq=False)
class Slot:
    """A worker and the jobs sent to it, oldest first."""

    number: int
    conn: WorkerConnection
    reader: FrameReader = field(default_factory=FrameReader)
    inflight: deque[Job] = field(default_factory=deque)
    outbox: bytearray = field(default_factory=bytearray)
    progress: float = field(default_factory=time.monotonic)
    hello: dict[str, Any] = field(default_factory=dict)

    def deadline(self) -> float:
        head = self.inflight[0].request.limits.wall_limit_s
        return self.progress + head + WATCHDOG_GRACE_S


class Pool:
    def __init__(self, backend: Backend, size: int) -> None:
        if size < 1:
            raise ValueError("a pool needs at least one worker")
        self.backend = backend
        self.size = size
        self.slots: list[Slot] = []
        self.replaced = 0
        self._held = 0  # bytes of the answers held for in-order delivery
        self._next = 0  # the index of the result due next

    # -- life cycle ------------------------------------------------------------------------------------

    def start(self) -> None:
        try:
            for number in range(self.size):
                self.slots.append(Slot(number, self.backend.start_worker(number)))
            for slot in self.slots:
                self._await_hello(slot)
        except BaseException:
            self.close()  # no worker (or container) outlives a failed start
            raise

    def close(self) -> None:
        for slot in self.slots:
            try:
                slot.conn.write(encode_exit())
            except OSError:
                pass
            slot.conn.kill()
        self.slots = []
        self.backend.close()

    @property
    def capabilities(self) -> dict[str, Any]:
        return self.slots[0].hello.get("capabilities", {}) if self.slots else {}

    def _await_hello(self, slot: Slot) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            ready, _, _ = select.select([slot.conn.read_fd()], [], [], deadline - time.monotonic())
            if not ready:
                break
            data = slot.conn.read()
            if not data:
                break
            for body in slot.reader.feed(data):
                message = decode(body)
                if message.get("op") == "hello":
                    slot.hello = message
                    self._check_protocol(slot)
                    return
        slot.conn.kill()
        raise SandboxUnavailable(f"{self.backend.name} worker {slot.number} did not start")

    def _check_protocol(self, slot: Slot) -> None:
        """A worker from an older image would misread every request: say so at start."""
        spoken = slot.hello.get("protocol")
        if spoken != PROTOCOL_VERSION:
            slot.conn.kill()
            raise SandboxUnavailable(f"{self.backend.name} worker {slot.number} speaks protocol {spoken}, "
                                     f"potrun speaks {PROTOCOL_VERSION}: rebuild the sandbox image")  # fmt: skip

    def _replace(self, slot: Slot) -> None:
        slot.conn.kill()
        self.replaced += 1
        fresh = Slot(slot.number, self.backend.start_worker(slot.number))
        self._await_hello(fresh)
        self.slots[self.slots.index(slot)] = fresh

    # -- running ---------------------------------------------------------------------------------------

    def run_many(self, requests: Iterable[RunRequest | None]) -> Iterator[ExecResult | None]:
        """Run each request; yield one ExecResult per request, in input order.

        A None request runs nothing and yields None in its place (a record with nothing to execute
        keeps its place in the stream). Results that arrive ahead of the one due are held, up to
        MAX_AHEAD of them and MAX_AHEAD_BYTES of their answers; past that, only the worker running the
        one due is read."""
        source = enumerate(requests)
        exhausted = False
        retry: deque[Job] = deque()
        done: dict[int, tuple[ExecResult | None, int]] = {}  # index -> (result, bytes of its answer)
        self._held = 0
        self._next = 0
        issued = 0
        while True:
            while retry or (not exhausted and issued - self._next < MAX_AHEAD and self._held < MAX_AHEAD_BYTES):
                slot = min(self.slots, key=_load)
                if len(slot.inflight) >= PIPELINE_DEPTH:
                    break
                if retry:
                    self._send(slot, retry.popleft())
                    continue
                item = next(source, None)
                if item is None:
                    exhausted = True
                    break
                issued += 1
                if item[1] is None:
                    done[item[0]] = (None, 0)
                else:
                    self._send(slot, Job(item[0], item[1]))
            if any(s.inflight for s in self.slots):
                self._step(done, retry)
            elif exhausted and not retry and self._next not in done:
                return
            while self._next in done:
                result, size = done.pop(self._next)
                self._held -= size
                self._next += 1
                yield result

    def _send(self, slot: Slot, job: Job) -> None:
        job.attempts += 1
        if not slot.inflight:
            slot.progress = time.monotonic()
        slot.inflight.append(job)
        slot.outbox += encode_request(job.request, job.index)

    def _step(self, done: dict[int, tuple[ExecResult | None, int]], retry: deque[Job]) -> None:
        """One wait for I/O: send what is queued, take what arrived, replace lost workers."""
        busy = [s for s in self.slots if s.inflight]
        now = time.monotonic()
        if self._held >= MAX_AHEAD_BYTES:  # read only the worker that holds the result due next
            readable_slots = [s for s in busy if any(job.index == self._next for job in s.inflight)]
            for slot in busy:
                if slot not in readable_slots:
                    slot.progress = now  # it waits for us: no time of its own passes
        else:
            readable_slots = busy
        readers = {s.conn.read_fd(): s for s in readable_slots}
        writers = {s.conn.write_fd(): s for s in busy if s.outbox}
        timeout = max(0.0, min(s.deadline() for s in busy) - now)
        readable, writable, _ = select.select(list(readers), list(writers), [], timeout)
        for fd in writable:
            slot = writers[fd]
            try:
                taken = slot.conn.write(bytes(slot.outbox))
                del slot.outbox[:taken]
            except OSError:
                self._lose(slot, done, retry, "the worker's input closed")
        for fd in readable:
            slot = readers[fd]
            if slot in self.slots:
                self._receive(slot, done, retry)
        now = time.monotonic()
        for slot in list(self.slots):
            if slot.inflight and now > slot.deadline():
                self._lose(slot, done, retry, "the worker stopped answering")

    def _receive(self, slot: Slot, done: dict[int, tuple[ExecResult | None, int]], retry: deque[Job]) -> None:
        """Take a worker's answers. Each is checked against the job due before that job leaves the
        worker's queue: an answer that is not one (another id, a bad field, one too many) is the
        worker's fault, and every job it held is retried elsewhere."""
        try:
            data = slot.conn.read()
        except OSError:
            data = b""
        if not data:
            self._lose(slot, done, retry, "the worker exited")
            return
        try:
            for body in slot.reader.feed(data):
                if not slot.inflight:
                    raise ProtocolError("an answer where none was due")
                job = slot.inflight[0]
                message = decode(body)
                result = result_from_wire(message, request_id=job.index, attempts=job.attempts,
                                          output_bytes=job.request.limits.output_bytes)  # fmt: skip
                slot.inflight.popleft()
                done[job.index] = (result, len(body))
                self._held += len(body)
                slot.progress = time.monotonic()
        except ProtocolError as exc:
            self._lose(slot, done, retry, f"the worker broke the protocol ({exc})")

    def _lose(self, slot: Slot, done: dict[int, tuple[ExecResult | None, int]], retry: deque[Job], why: str) -> None:
        """Replace a worker; retry its programs once, then report them as sandbox errors."""
        jobs = list(slot.inflight)
        slot.inflight.clear()
        for job in jobs:
            if job.attempts < MAX_ATTEMPTS:
                retry.append(job)
            else:
                done[job.index] = (ExecResult(Status.SANDBOX_ERROR, error=why[:500], error_type="WorkerLost",
                                              attempts=job.attempts), 0)  # fmt: skip
        self._replace(slot)


def _load(slot: Slot) -> int:
    return len(slot.inflight)


def default_workers(isolation: Isolation = Isolation.WARM) -> int:
    """One worker per core; two for fork isolation, where a worker waits while its fork runs and exits
    (measured on 2 cores: ~10% more programs/s than one per core; no gain beyond two)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return 2 * cores if isolation is Isolation.FORK else cores
