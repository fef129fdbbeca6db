"""The parent's side of the sandbox: a pool of workers behind a tiny backend interface.

A backend only knows how to start a worker and give back a `WorkerConnection` (two byte streams and a
way to kill it): a local process (`process.py`), a long-lived container (`docker.py`), or for tests of
the pool itself, a thread that answers with a handler (`fake.py`). The pool does
the rest, the same for every backend. One thread of its own, the dispatcher, owns the workers: it
sends them requests, a few ahead so that no worker waits for a round trip, takes their answers, and
watches each worker from outside. A worker that dies, breaks the protocol or stops answering is killed
and replaced. Only the program it was running (the oldest it held: a worker runs them in order) is
charged for the death: it is retried once, then reported as `sandbox_error`; the programs queued behind
it had not started, and are sent again free (their `attempts` unchanged). A worker that fails to start
(at the pool's start, or as a replacement) is started again after a pause, up to START_TRIES times, each
reason logged; only a failure that persists ends the pool (`SandboxUnavailable`). The run goes on.
A replacement starts on a thread of its own, never on the dispatcher's: its slot is skipped meanwhile
(`Slot.starting`), the other workers are fed and read as before, and the new worker takes the slot
when its hello has come (with a pool of one worker, requests wait for it). Every worker is made on one
thread, the pool's launcher, that lives as long as the pool: a worker dies with the thread that made
it (PR_SET_PDEATHSIG is a thread's), so neither a starter's thread nor a caller's may make one
(`starting.py`: the backend interface, the launcher, the wait for a hello).
A timeout the machine's load may have caused (the wall-clock net stopped a program that was computing)
is confirmed by a second run under a wider net before it is reported (`potrun.types.confirming_limits`).

Callers never touch a worker. Each call to `run_many` is a `Stream`: its requests are numbered, queued
for the dispatcher, and its results come back to it alone, put back in input order by the caller's own
thread. Any number of threads (and asyncio tasks, `Sandbox.arun_many`) may run streams at once; their
requests share the workers' pipelines, and no lock serializes them.

A caller that gives up on its stream (closes the generator, cancels its asyncio task, or a
`Cancellation` it runs under is cancelled from another thread) cancels its programs: those not sent are
dropped, and a program of it still running CANCEL_GRACE_S after it was given up is stopped with its
worker, which is replaced. The programs of other streams that worker held had not started: they are
sent again free, as after a death no program is charged for; the cancelled ones yield no result at all
(none reaches a cache).
"""

from __future__ import annotations

import itertools
import logging
import os
import select
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from queue import SimpleQueue
from typing import TYPE_CHECKING, Any

from potrun.sandbox.parent.starting import Backend as Backend  # re-exported: the backends' interface
from potrun.sandbox.parent.starting import Launcher, await_hello
from potrun.sandbox.parent.starting import StartFailed as StartFailed
from potrun.sandbox.parent.starting import WorkerConnection as WorkerConnection
from potrun.sandbox.wire.protocol import (
    FrameReader,
    Hello,
    ProtocolError,
    RunRequest,
    decode,
    encode_exit,
    encode_request,
    result_from_wire,
)
from potrun.types import ExecResult, PotrunError, SandboxUnavailable, Status, confirming_limits

if TYPE_CHECKING:
    import asyncio

PIPELINE_DEPTH = 128  # requests in flight per worker: twice what a warm runner holds (WARM_QUEUE)
MAX_AHEAD = 20_000  # results a stream holds for in-order delivery behind one slow program...
# ...all streams holding at most about this many bytes of answers: past it, the dispatcher reads only
# the workers that have a program some stream waits for, and the others wait (back-pressure on the
# sandbox, not memory here).
MAX_AHEAD_BYTES = 16 << 20
SUBMIT_BATCH = 16  # requests a caller hands over at once: the dispatcher starts on them while it reads on
WATCHDOG_GRACE_S = 3.0  # beyond a program's own limit, before the worker itself is presumed lost
# A worker that does not start (killed as it starts, a container the engine could not make in time) is
# tried again after these pauses: START_TRIES tries in all, 3.1 s of pauses, before the pool gives up.
START_PAUSES_S = (0.1, 0.5, 2.5)
START_TRIES = len(START_PAUSES_S) + 1
DRAIN_READS = 64  # reads of a lost worker's last answers (each up to 64 KiB): bounded, whatever it wrote
MAX_ATTEMPTS = 2  # runs of a program during which its worker died, before it is a sandbox_error
# How long a program of a stream given up on may still run before its worker is stopped and replaced:
# most programs end well before (then nothing is killed); a replacement costs ~0.3 s of a process
# worker's start (a container's more), during which its slot takes nothing and the other workers run on.
CANCEL_GRACE_S = 0.25

log = logging.getLogger("potrun.sandbox")


class Cancelled(PotrunError):
    """The call was cancelled from outside (`Cancellation.cancel`): its programs were given up."""


class Cancellation:
    """Cancels, from any thread, the streams opened under it (in the context that `active()` opens, which
    follows a call into `asyncio.to_thread`): a thread blocked on a result wakes with `Cancelled`, and
    the streams' programs are cancelled as if their callers had closed them. A stream opened after the
    cancellation is cancelled at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._streams: list[tuple[Pool, Stream]] = []
        self.cancelled = False

    @contextmanager
    def active(self) -> Iterator[Cancellation]:
        token = _cancellation.set(self)
        try:
            yield self
        finally:
            _cancellation.reset(token)

    def cancel(self) -> None:
        with self._lock:
            self.cancelled = True
            streams, self._streams = self._streams, []
        for pool, stream in streams:
            pool.close_stream(stream)
            stream.deliver(Cancelled("the call was cancelled"))

    def _register(self, pool: Pool, stream: Stream) -> None:
        with self._lock:
            if not self.cancelled:
                self._streams.append((pool, stream))
                return
        raise Cancelled("the call was cancelled")


_cancellation: ContextVar[Cancellation | None] = ContextVar("potrun_cancellation", default=None)


# What a stream is handed: the results that arrived in one turn of the dispatcher, each (index, result,
# bytes held), or why no more will come.
Arrival = list[tuple[int, ExecResult | None, int]] | BaseException


class Stream:
    """One caller's requests: numbered as they are submitted; each result reaches the caller through
    `deliver` (called from the dispatcher's thread), and the caller's own thread puts them in order.

    The dispatcher reads `next` (the index due: a stream waits for it); `cancelled` and `held` change
    under the pool's lock."""

    def __init__(self, deliver: Callable[[Arrival], None]) -> None:
        self.deliver = deliver
        self.next = 0  # the index of the result due next
        self.issued = 0  # requests numbered so far
        self.arrived = 0  # of them, results taken (None requests count at once)
        self.exhausted = False
        self.cancelled = False
        self.held = 0  # bytes of the answers delivered to this stream and not yet taken out in order
        self.given_up = 0.0  # when it was cancelled (monotonic): its programs still running get CANCEL_GRACE_S
        self.done: dict[int, tuple[ExecResult | None, int]] = {}  # index -> (result, bytes of its answer)

    @property
    def finished(self) -> bool:
        return self.exhausted and self.next == self.issued

    @property
    def outstanding(self) -> int:
        return self.issued - self.arrived

    def waits(self) -> bool:
        """Whether the result due is still to come from the dispatcher."""
        return self.next not in self.done and self.next < self.issued


@dataclass(slots=True)
class Job:
    stream: Stream
    index: int  # in its stream
    request: RunRequest
    wire_id: int  # unique in the pool: the id the worker answers with
    attempts: int = 0  # runs sent to a worker
    sent_end: int = 0  # where its request ends in the bytes queued to its worker (`Slot.queued`)
    confirming: bool = False  # run again to confirm a timeout the load may have caused (`confirming_limits`)


@dataclass(eq=False)
class Slot:
    """A worker and the jobs sent to it, oldest first."""

    number: int
    conn: WorkerConnection
    reader: FrameReader = field(default_factory=FrameReader)
    inflight: deque[Job] = field(default_factory=deque)
    outbox: bytearray = field(default_factory=bytearray)
    queued: int = 0  # bytes ever queued to the worker...
    written: int = 0  # ...and of them, written: a job whose request was not written whole never ran
    answered: int = 0  # answers taken from it
    progress: float = field(default_factory=time.monotonic)
    hello: Hello | None = None  # once the worker said it
    # Its worker was lost and a replacement is starting (`Pool._replace`): the dispatcher neither sends
    # to it nor reads it (its connection is the dead worker's) until the new Slot takes its place.
    starting: bool = False

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
        self.cancelled = 0  # workers stopped because the program they ran was given up
        self.completed = 0  # programs whose results have arrived, for every stream
        self._pending: deque[Job] = deque()  # submitted, not yet sent to a worker (callers append)
        # The streams open. Weak: a caller that vanished without closing its stream (an async generator
        # collected after its loop closed) takes the stream, and the bytes it held, with it.
        self._streams: weakref.WeakSet[Stream] = weakref.WeakSet()
        self._arrived: dict[Stream, list[tuple[int, ExecResult | None, int]]] = {}  # this turn's results
        self._lock = threading.Lock()  # guards _streams, each stream's cancelled and held, and _failure
        self._failure: BaseException | None = None  # why the pool runs nothing more
        self._wire_ids = itertools.count()
        self._closing = False  # set under _lock: a replacement that starts after it is killed, not handed over
        self._closed = threading.Event()  # set by close(): a pause between two tries to start a worker ends
        # Replacements being started, each on its own thread, and what they gave (under _lock): the new
        # Slot, or why it could not start. The dispatcher installs them (`_install_started`).
        self._starters: list[threading.Thread] = []
        self._started: list[tuple[int, Slot | BaseException]] = []
        self._settled = threading.Event()  # no replacement is starting (`settled`)
        self._settled.set()
        self._barren: dict[int, int] = {}  # slot -> its workers lost in a row before they took a program
        self._in_select = False  # the dispatcher waits for I/O: a submit must wake it
        self._rationed = False  # held answers are past the budget: only workers with a due program are read
        self._woken = False
        self._wake_read, self._wake_write = -1, -1
        # Written once by close(), never read: a wait for a worker's hello ends at once (`await_hello`).
        self._close_read, self._close_write = -1, -1
        self._dispatcher: threading.Thread | None = None
        self._launcher: Launcher | None = None
        self._pid = os.getpid()

    # -- life cycle ------------------------------------------------------------------------------------

    def start(self) -> None:
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_write, False)
        self._close_read, self._close_write = os.pipe()
        self._launcher = Launcher()
        try:
            self._launcher.call(self._launch_all)
            launched = list(self.slots)
            for slot in launched:
                try:
                    self._await_hello(slot)
                except StartFailed as exc:
                    self.slots[slot.number] = self._start_slot(slot.number, failed=[str(exc)])
        except BaseException:
            self._stop_workers()  # no worker (or container) outlives a failed start
            self._close_pipes()
            raise
        self._dispatcher = threading.Thread(target=self._serve, name="potrun-dispatcher", daemon=True)
        self._dispatcher.start()

    def close(self) -> None:
        """Stop the dispatcher, then the workers. A stream still running is told the pool closed. A
        replacement still starting ends its pause or its wait for a hello at once; a worker it started
        is killed by its own thread, which close waits for (nothing started outlives the pool)."""
        with self._lock:
            self._closing = True  # from here, no starter hands a worker over (`_start_replacement`)
        self._closed.set()
        if self._dispatcher is not None:
            os.write(self._close_write, b"!")
            self._wake()
            self._dispatcher.join()
            self._dispatcher = None
            for starter in self._starters:  # before the pipes close: they select on the close pipe
                starter.join()
            self._starters = []
            self._close_pipes()
        self._stop_workers()

    def _launch_all(self) -> None:
        """Launch every worker at once (on the launcher), each in `slots` as soon as made."""
        for number in range(self.size):
            self.slots.append(Slot(number, self.backend.start_worker(number)))

    def _close_pipes(self) -> None:
        for fd in (self._wake_read, self._wake_write, self._close_read, self._close_write):
            os.close(fd)
        self._wake_read, self._wake_write, self._close_read, self._close_write = -1, -1, -1, -1

    def _stop_workers(self) -> None:
        with self._lock:
            started, self._started = self._started, []
        # A starting slot's worker was killed when it was lost; a replacement handed over and not yet
        # installed is stopped with the others.
        conns = [slot.conn for slot in self.slots if not slot.starting]
        conns += [outcome.conn for _, outcome in started if isinstance(outcome, Slot)]
        for conn in conns:
            try:
                conn.write(encode_exit())
            except OSError:
                pass
            conn.kill()
        self.slots = []
        self.backend.close()
        if self._launcher is not None:  # its workers are gone: it may end
            self._launcher.stop()
            self._launcher = None

    @property
    def capabilities(self) -> dict[str, Any]:
        hello = self.slots[0].hello if self.slots else None
        return dict(hello.capabilities) if hello is not None else {}

    @property
    def failed(self) -> bool:
        """Whether the pool stopped for good (a worker that could not be started again)."""
        return self._failure is not None

    def settled(self, timeout: float) -> bool:
        """Wait up to `timeout` s until no replacement is starting (every slot holds a started worker:
        what a test reads of `slots` after a death is then the new workers'); whether it came to that
        with the pool still running."""
        return self._settled.wait(timeout) and self._failure is None

    def _start_slot(self, number: int, failed: list[str] | None = None) -> Slot:
        """A started worker for slot `number`, tried up to START_TRIES times (`failed`: the reasons of
        the tries already made), pausing between tries; SandboxUnavailable with every reason if none
        starts. A worker of the wrong protocol is not tried again: it would never be right."""
        reasons = list(failed or [])
        while len(reasons) < START_TRIES:
            if reasons:
                log.warning(
                    "%s worker %d did not start (try %d of %d): %s",
                    self.backend.name,
                    number,
                    len(reasons),
                    START_TRIES,
                    reasons[-1],
                )
                if self._closed.wait(START_PAUSES_S[min(len(reasons), len(START_PAUSES_S)) - 1]):
                    raise SandboxUnavailable("the sandbox was closed while a worker was starting")
            try:
                slot = Slot(number, self._launch(number))
                self._await_hello(slot)
                return slot
            except StartFailed as exc:
                if self._closed.is_set():  # not a failure of the worker's: no warning, no try more
                    raise SandboxUnavailable("the sandbox was closed while a worker was starting") from None
                reasons.append(str(exc))
        raise SandboxUnavailable(
            f"{self.backend.name} worker {number} did not start in {START_TRIES} tries: " + "; ".join(reasons)
        )

    def _launch(self, number: int) -> WorkerConnection:
        assert self._launcher is not None
        try:
            return self._launcher.call(lambda: self.backend.start_worker(number))
        except OSError as exc:  # no process could be made now (EAGAIN, ENOMEM): worth another try
            raise StartFailed(f"it could not be launched ({exc})") from None

    def _await_hello(self, slot: Slot) -> None:
        slot.hello = await_hello(slot.conn, slot.reader, f"{self.backend.name} worker {slot.number}", self._close_read)

    def _replace(self, slot: Slot) -> None:
        """Kill the slot's worker and start its replacement on a thread of its own (its tries and pauses
        included, a start never holds up the dispatcher): the slot stays in place, `starting`, skipped
        by the dispatcher until `_install_started` puts the new worker in it."""
        slot.conn.kill()
        slot.starting = True
        self.replaced += 1
        self._settled.clear()
        self._starters = [starter for starter in self._starters if starter.is_alive()]
        starter = threading.Thread(
            target=self._start_replacement, args=(slot.number,), name=f"potrun-starter-{slot.number}", daemon=True
        )
        self._starters.append(starter)
        starter.start()

    def _start_replacement(self, number: int) -> None:
        """A starter's thread: start a worker for slot `number` and hand it (or why none started) to the
        dispatcher. After close (or once the pool failed) nobody would install it: it is killed here."""
        outcome: Slot | BaseException
        try:
            outcome = self._start_slot(number)
        except BaseException as exc:  # SandboxUnavailable: a failure that persists, for the dispatcher to raise
            outcome = exc
        with self._lock:  # close() sets _closing under it: a worker is handed over or killed, never both
            handed = not self._closing and self._failure is None
            if handed:
                self._started.append((number, outcome))
                self._wake()  # the pipes are open: close() closes them only after _closing is set
        if not handed and isinstance(outcome, Slot):
            outcome.conn.kill()

    def _install_started(self) -> None:
        """Put the replacements that started in their slots (on the dispatcher's thread); a replacement
        that could not start fails the pool, as the first start's failure does."""
        with self._lock:
            started, self._started = self._started, []
        failures: list[BaseException] = []
        for number, outcome in started:
            if isinstance(outcome, Slot):
                self.slots[number] = outcome
            else:
                failures.append(outcome)
        if started and not any(slot.starting for slot in self.slots):
            self._settled.set()
        if failures:
            raise failures[0]

    # -- the callers' side -----------------------------------------------------------------------------

    def run_many(self, requests: Iterable[RunRequest | None]) -> Iterator[ExecResult | None]:
        """Run each request; yield one ExecResult per request, in input order.

        A None request runs nothing and yields None in its place (a record with nothing to execute
        keeps its place in the stream). Requests are read lazily, as the stream's window allows: at
        most a pool's worth in flight, MAX_AHEAD results held behind a slow one."""
        arrivals: SimpleQueue[Arrival] = SimpleQueue()
        stream = self.open_stream(arrivals.put)
        source = iter(requests)
        try:
            while not stream.finished:
                yield from self.advance(stream, source, arrivals)
                if stream.waits():
                    self.take(stream, arrivals.get())
        finally:
            self.close_stream(stream)

    def open_stream(self, deliver: Callable[[Arrival], None]) -> Stream:
        if os.getpid() != self._pid:
            raise SandboxUnavailable("this sandbox was started in another process: start one in this process")
        stream = Stream(deliver)
        with self._lock:
            if self._failure is not None:
                raise self._failure
            if self._dispatcher is None or self._closing:
                raise SandboxUnavailable("the sandbox is not running (closed, or never started)")
            self._streams.add(stream)
        cancellation = _cancellation.get()
        if cancellation is not None:
            try:
                cancellation._register(self, stream)
            except Cancelled:
                self.close_stream(stream)
                raise
        return stream

    def close_stream(self, stream: Stream) -> None:
        """The caller is done with the stream (or gave up on it): what it still holds is let go, and
        the dispatcher drops its jobs not yet sent and the answers of those still running."""
        with self._lock:
            if stream.cancelled:
                return
            stream.cancelled = True
            stream.given_up = time.monotonic()
            self._streams.discard(stream)
            stream.held = 0
        stream.done.clear()
        if stream.outstanding and self._dispatcher is not None:
            self._wake()  # a program of it may be running: the dispatcher watches it from now on

    def feed(self, stream: Stream, source: Iterator[RunRequest | None]) -> None:
        """Take requests from `source` while the stream's window allows, and hand them over."""
        room = self.size * PIPELINE_DEPTH
        if stream.outstanding > room - SUBMIT_BATCH:
            return  # refill a batch at a time: one hand-over (and one wake-up of the dispatcher) per many results
        if stream.outstanding and self.held_bytes() >= MAX_AHEAD_BYTES:
            return  # answers wait to be taken: no more until they are (one at least is always allowed)
        batch: list[Job] = []
        while not stream.exhausted and stream.issued - stream.next < MAX_AHEAD and stream.outstanding < room:
            request = next(source, _END)
            if request is _END:
                stream.exhausted = True
                break
            index = stream.issued
            stream.issued += 1
            if request is None:
                stream.done[index] = (None, 0)
                stream.arrived += 1
                continue
            batch.append(Job(stream, index, request, next(self._wire_ids)))  # type: ignore[arg-type]
            if len(batch) >= SUBMIT_BATCH:
                self._submit(batch)
                batch = []
        if batch:
            self._submit(batch)

    def advance(
        self,
        stream: Stream,
        source: Iterator[RunRequest | None],
        arrivals: SimpleQueue[Arrival] | asyncio.Queue[Arrival],
    ) -> list[ExecResult | None]:
        """One turn of a caller's loop without waiting: hand over what the window allows, take what has
        arrived, and return the results now due, in order. (The caller then waits for an arrival when
        `stream.waits()`: on a queue, or in an event loop.)"""
        self.feed(stream, source)
        while not arrivals.empty():
            self.take(stream, arrivals.get_nowait())
        return list(self.ready(stream))

    def take(self, stream: Stream, arrival: Arrival) -> None:
        if isinstance(arrival, BaseException):
            raise arrival
        for index, result, size in arrival:
            stream.done[index] = (result, size)
        stream.arrived += len(arrival)

    def ready(self, stream: Stream) -> Iterator[ExecResult | None]:
        """The results due, in order, as far as they have arrived."""
        while stream.next in stream.done:
            result, size = stream.done.pop(stream.next)
            if size:
                with self._lock:
                    stream.held -= size
            stream.next += 1
            if self._rationed:
                self._wake()  # the dispatcher reads only the workers with a due program: one more is due
            yield result

    def held_bytes(self) -> int:
        """Bytes of the answers delivered to the open streams and not yet taken out in order."""
        with self._lock:
            return sum(stream.held for stream in self._streams)

    def _submit(self, jobs: list[Job]) -> None:
        if self._failure is not None:
            raise self._failure
        self._pending.extend(jobs)
        if self._in_select:
            self._wake()

    def _wake(self) -> None:
        if not self._woken:
            self._woken = True
            try:
                os.write(self._wake_write, b"!")
            except (BlockingIOError, OSError):
                pass  # a byte is already there, or the pool is closed

    # -- the dispatcher ----------------------------------------------------------------------------------

    def _serve(self) -> None:
        """The dispatcher's loop: send what is pending, wait for I/O, take answers, until closed. If the
        pool itself fails (a worker cannot be replaced), every stream is told why and the pool stops."""
        try:
            while not self._closing:
                self._install_started()
                self._send_pending()
                self._step()
            failure: BaseException = SandboxUnavailable("the sandbox was closed while this call was running")
        except BaseException as exc:
            failure = exc
        with self._lock:
            self._failure = failure
            streams = list(self._streams)
        self._settled.set()  # a test waiting for the replacements waits no more: there will be none
        for stream in streams:
            self._deliver(stream, failure)

    def _send_pending(self) -> None:
        pending = self._pending
        live = _live(self.slots)
        while pending and live:  # none live: a pool of one whose replacement starts (it wakes us when up)
            slot = min(live, key=_load)
            if len(slot.inflight) >= PIPELINE_DEPTH:
                return
            job = pending.popleft()
            if not job.stream.cancelled:
                self._send(slot, job)

    def _send(self, slot: Slot, job: Job) -> None:
        job.attempts += 1
        if not slot.inflight:
            slot.progress = time.monotonic()
        slot.inflight.append(job)
        frame = encode_request(job.request, job.wire_id)
        slot.outbox += frame
        slot.queued += len(frame)
        job.sent_end = slot.queued

    def _step(self) -> None:
        """One wait for I/O: send what is queued, take what arrived, replace lost workers."""
        live = _live(self.slots)
        busy = [s for s in live if s.inflight]
        now = time.monotonic()
        readable_slots = busy
        self._rationed = self.held_bytes() >= MAX_AHEAD_BYTES
        if self._rationed:  # read only the workers that hold a result some stream waits for
            readable_slots = [s for s in busy if any(job.index == job.stream.next for job in s.inflight)]
            for slot in busy:
                if slot not in readable_slots:
                    slot.progress = now  # it waits for us: no time of its own passes
        readers = {s.conn.read_fd(): s for s in readable_slots}
        writers = {s.conn.write_fd(): s for s in busy if s.outbox}
        timeout = max(0.0, min(_due(s) for s in busy) - now) if busy else None
        self._in_select = True
        if self._pending and any(len(s.inflight) < PIPELINE_DEPTH for s in live):
            timeout = 0.0  # submitted while we were busy: send it first
        readable, writable, _ = select.select([*readers, self._wake_read], list(writers), [], timeout)
        self._in_select = False
        if self._wake_read in readable:
            os.read(self._wake_read, 64)
            self._woken = False
        for fd in writable:
            slot = writers[fd]
            try:
                taken = slot.conn.write(bytes(slot.outbox))
                del slot.outbox[:taken]
                slot.written += taken
            except OSError:
                self._lose(slot, "the worker's input closed")
        for fd in readable:
            slot = readers.get(fd)  # type: ignore[assignment]
            if slot is not None and not slot.starting:  # (not lost by a write just now)
                self._receive(slot)
        now = time.monotonic()
        for slot in _live(self.slots):
            if slot.inflight and now > slot.deadline():
                self._lose(slot, "the worker stopped answering")
            elif slot.inflight and now > _cancel_due(slot):
                self._stop_given_up(slot)
        arrived, self._arrived = self._arrived, {}
        for stream, results in arrived.items():  # one hand-over per stream and turn: one wake-up of its caller
            self._deliver(stream, results)

    def _receive(self, slot: Slot) -> None:
        """Take a worker's answers. Each is checked against the job due before that job leaves the
        worker's queue: an answer that is not one (another id, a bad field, one too many) is the
        worker's fault, and every job it held is retried elsewhere."""
        try:
            data = slot.conn.read()
        except OSError:
            data = b""
        if not data:
            self._lose(slot, "the worker exited")
            return
        broken = self._take(slot, data)
        if broken is not None:
            self._lose(slot, broken, drain=False)

    def _take(self, slot: Slot, data: bytes) -> str | None:
        """Take the answers in `data`; None, or how the worker broke the protocol."""
        try:
            for body in slot.reader.feed(data):
                if not slot.inflight:
                    raise ProtocolError("an answer where none was due")
                job = slot.inflight[0]
                message = decode(body)
                result = result_from_wire(
                    message, request_id=job.wire_id, attempts=job.attempts, output_bytes=job.request.limits.output_bytes
                )
                slot.inflight.popleft()
                slot.answered += 1
                slot.progress = time.monotonic()
                if not self._confirm(job, result):
                    self._finish(job, result, len(body))
        except ProtocolError as exc:
            return f"the worker broke the protocol ({exc})"
        return None

    def _drain(self, slot: Slot) -> None:
        """Take the answers a lost worker wrote before it went (a failed write can tell of its death
        before they are read): the oldest job left is then the one it was running."""
        for _ in range(DRAIN_READS):
            try:
                if not select.select([slot.conn.read_fd()], [], [], 0)[0]:
                    return
                data = slot.conn.read()
            except (OSError, SandboxUnavailable):
                return
            if not data or self._take(slot, data) is not None:
                return

    def _confirm(self, job: Job, result: ExecResult) -> bool:
        """Queue `job` again, first, under a wider wall-clock net when `result` needs confirming
        (`confirming_limits`); whether it did (then `result` is not reported)."""
        limits = None if job.confirming else confirming_limits(job.request.limits, result)
        if limits is None:
            return False
        job.confirming = True
        job.request = replace(job.request, limits=limits)
        self._pending.appendleft(job)
        return True

    def _finish(self, job: Job, result: ExecResult, size: int) -> None:
        self.completed += 1
        stream = job.stream
        with self._lock:
            if stream.cancelled:
                return
            stream.held += size
        self._arrived.setdefault(stream, []).append((job.index, result, size))

    def _deliver(self, stream: Stream, arrival: Arrival) -> None:
        """Hand a stream its arrival. A caller that cannot take it (its event loop closed) has gone:
        its stream is dropped, and the dispatcher goes on."""
        try:
            stream.deliver(arrival)
        except Exception:
            self.close_stream(stream)

    def _lose(self, slot: Slot, why: str, *, drain: bool = True) -> None:
        """Replace a worker. The program it was running (the oldest it held) is charged the death: it
        is retried (first, before anything submitted later) until its runs have lost MAX_ATTEMPTS
        workers, then reported as a sandbox error. The programs queued behind it had not started:
        they are sent again free, as if never sent, so that a neighbour's death never shows in them."""
        if drain:
            self._drain(slot)
        jobs = list(slot.inflight)
        slot.inflight.clear()
        self._count_barren(slot, charged=bool(jobs) and jobs[0].sent_end <= slot.written, why=why)
        retry = []
        for position, job in enumerate(jobs):
            if position or job.sent_end > slot.written:
                job.attempts -= 1  # queued, or never written whole: it never ran, this send does not count
                retry.append(job)
            elif job.attempts - job.confirming < MAX_ATTEMPTS:  # a confirming run is not a retry
                retry.append(job)
            else:
                lost = ExecResult(Status.SANDBOX_ERROR, error=why[:500], error_type="WorkerLost", attempts=job.attempts)
                self._finish(job, lost, 0)
        self._pending.extendleft(reversed(retry))
        self._replace(slot)

    def _stop_given_up(self, slot: Slot) -> None:
        """The program a worker runs was given up on (its stream cancelled) and still runs past its
        grace: stop the worker (what it already answered is taken first) and replace it. No program is
        charged: the given-up ones are dropped, the others it held had not started and are sent again
        free; the slot's count of barren deaths is untouched."""
        self._drain(slot)
        if not slot.inflight or not slot.inflight[0].stream.cancelled:
            return  # it answered meanwhile: the next program is someone's
        jobs = [job for job in slot.inflight if not job.stream.cancelled]
        slot.inflight.clear()
        for job in jobs:
            job.attempts -= 1
        self._pending.extendleft(reversed(jobs))
        self.cancelled += 1
        log.info("%s worker %d stopped: the program it ran was given up", self.backend.name, slot.number)
        self._replace(slot)

    def _count_barren(self, slot: Slot, *, charged: bool, why: str) -> None:
        """A death that no program is charged for (the worker took none) could repeat for ever: after
        START_TRIES such deaths in a row, the slot's worker is a failure that persists."""
        barren = 0 if charged or slot.answered else self._barren.get(slot.number, 0) + 1
        self._barren[slot.number] = barren
        if barren >= START_TRIES:
            raise SandboxUnavailable(
                f"{self.backend.name} worker {slot.number} was lost {barren} times in a row before it took a "
                f"program (the last: {why})"
            )


_END = object()


def _live(slots: list[Slot]) -> list[Slot]:
    """The slots whose worker runs: not those whose replacement is starting."""
    return [slot for slot in slots if not slot.starting]


def _load(slot: Slot) -> int:
    return len(slot.inflight)


def _cancel_due(slot: Slot) -> float:
    """When the worker's program (the oldest it holds) is to be stopped: never unless its stream was
    given up; then CANCEL_GRACE_S after that or after it started, whichever is later."""
    stream = slot.inflight[0].stream
    if not stream.cancelled:
        return float("inf")
    return max(stream.given_up, slot.progress) + CANCEL_GRACE_S


def _due(slot: Slot) -> float:
    """When the dispatcher must look at a busy worker again, whatever it answers."""
    return min(slot.deadline(), _cancel_due(slot))
