"""Small calls from many threads, scored as a few long-lived streams: the reward functions' fast path.

A reward server or a trainer's thread pool calls `pot_reward([completion], answer=[gold])` once per
sample. Each such call, run as its own stream, hands the sandbox one request, sleeps, and is woken for
one result; 32 threads doing so spent the parent's one GIL on those hand-offs (and on pipeline work
gone cache-cold between them) more than on scoring: 2.7x the parent's CPU per completion of a batched
call. A `Combiner` takes small calls from any number of threads into one queue. A few lane threads
each keep a `check_records` stream open and take calls from the queue while their stream has room, so
extraction, the dedup cache, the pool's hand-overs and comparisons run a batch at a time, and each
caller's thread sleeps once and is woken once, with its results.

A stream gives its results in input order, so a slow program holds back the calls behind it in its
lane. A lane therefore holds at most `window` records, and takes no more calls while its oldest has
waited STUCK_S: the calls after a slow program (an endless loop waiting out its timeout) go to the
other lanes. A lane whose queue runs dry ends its stream (nothing stays open while idle) and waits for
the next call.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from queue import Empty, SimpleQueue

from potrun.pipeline import CheckOptions, RecordResult, check_records
from potrun.records import Record
from potrun.sandbox.api import SandboxLike
from potrun.sandbox.protocol import PAUSE, Pause
from potrun.types import SandboxUnavailable

LANES = 3  # streams: one more than the default pool's workers, so that a slow program holds one back
WINDOW = 16  # records a lane holds (taken and not yet answered)
STUCK_S = 0.02  # a lane whose oldest call waited this long takes no more: many turns, not a slow program


class _Call:
    """One caller's records, their results as they come, and where the caller waits for them."""

    __slots__ = ("records", "reply", "results", "taken")

    def __init__(self, records: Sequence[Record]) -> None:
        self.records = records
        self.taken = 0.0  # when a lane took it (time.monotonic)
        self.results: list[RecordResult] = []
        self.reply: SimpleQueue[list[RecordResult] | BaseException] = SimpleQueue()


_STOP = object()  # in the queue: a lane that takes it ends


class Combiner:
    """Score small lists of records from any thread, in lanes shared by all callers (see the module
    docstring); `close()` ends the lanes once the calls queued before it are answered."""

    def __init__(self, sandbox: SandboxLike, options: CheckOptions, lanes: int = LANES, window: int = WINDOW) -> None:
        self._sandbox = sandbox
        self._options = options
        self._window = window
        self._queue: SimpleQueue[_Call | object] = SimpleQueue()
        self._lock = threading.Lock()  # a call is queued, or the lanes told to stop, never both at once
        self._closed = False
        self._lanes = [threading.Thread(target=self._lane, name=f"potrun-lane-{k}", daemon=True) for k in range(lanes)]
        for lane in self._lanes:
            lane.start()

    def score(self, records: Sequence[Record]) -> list[RecordResult]:
        """The records' results, in order (what `check_records` gives, or the error it raises)."""
        if not records:
            return []
        call = _Call(records)
        with self._lock:
            if self._closed:
                raise SandboxUnavailable("the sandbox was closed")
            self._queue.put(call)
        answer = call.reply.get()
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for _ in self._lanes:
                self._queue.put(_STOP)

    def _lane(self) -> None:
        while True:
            first = self._queue.get()
            if first is _STOP or not isinstance(first, _Call):
                return
            if self._stream(first):
                return

    def _stream(self, first: _Call) -> bool:
        """One stream, from `first` until the queue runs dry; True once a stop was taken from it."""
        first.taken = time.monotonic()
        owed: deque[_Call] = deque([first])  # calls taken and not yet answered, in stream order
        held = len(first.records)
        stopped = False

        def records() -> Iterator[Record | Pause]:
            nonlocal held, stopped
            call: _Call | None = first
            while call is not None:
                yield from call.records
                call = None
                while call is None:
                    if held >= self._window or (owed and time.monotonic() - owed[0].taken > STUCK_S):
                        yield PAUSE  # full, or held back: results are due (the loop below takes them)
                        continue
                    try:
                        item = self._queue.get_nowait()
                    except Empty:
                        if not owed:
                            return  # nothing owed and nobody waiting: the stream ends
                        yield PAUSE  # results are due: take more calls after they come
                        continue
                    if item is _STOP or not isinstance(item, _Call):
                        stopped = True
                        return
                    call = item
                    call.taken = time.monotonic()
                    owed.append(call)
                    held += len(call.records)

        try:
            for result in check_records(records(), self._sandbox, self._options):
                call = owed[0]
                call.results.append(result)
                if len(call.results) == len(call.records):
                    owed.popleft()
                    held -= len(call.records)
                    call.reply.put(call.results)
        except BaseException as exc:  # the sandbox failed or was closed: every call in the stream is told
            for call in owed:
                call.reply.put(exc)
            return stopped
        for call in owed:  # cannot happen: every record yields a result
            call.reply.put(RuntimeError("a call's records were left without results"))
        return stopped
