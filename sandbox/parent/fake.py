"""An in-process backend for tests of the pool: each worker is a thread that answers with a handler.

Modelled on httpx's `MockTransport`: a handler, `RunRequest -> ExecResult`, decides every answer. A
handler that raises makes its worker die in the middle of that request (the worker's output closes,
as a crashed process's does), and one that blocks is a worker that stopped answering. Requests and
answers cross real pipes as real frames (`protocol`), so the pool's ordering, retry, back-pressure and
watchdog run as they do with a process or a container: only the worker's program is replaced, and
nothing is isolated. Tests of the real backends stay with the tests that claim to test them.

    pool = Pool(FakeBackend(lambda request: ExecResult(Status.OK, value=len(request.source))), size=2)
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

from potrun.sandbox.wire.protocol import (
    EXIT,
    PROTOCOL_VERSION,
    FrameReader,
    RunRequest,
    encode,
    encode_result,
    request_header,
    request_message,
    write_all,
)
from potrun.types import ExecResult

Handler = Callable[[RunRequest], ExecResult]
READ_SIZE = 1 << 16


class FakeWorker:
    """One worker: a thread that reads run requests from a pipe and writes the handler's answers to
    another, the pool holding the other ends (`WorkerConnection`)."""

    def __init__(self, handler: Handler, slot: int) -> None:
        self.handler = handler
        self._requests_read, self._requests_write = os.pipe()
        self._answers_read, self._answers_write = os.pipe()
        os.set_blocking(self._requests_write, False)  # the pool's writes never block
        self._thread = threading.Thread(target=self._serve, name=f"potrun-fake-worker-{slot}", daemon=True)
        self._thread.start()

    def read_fd(self) -> int:
        return self._answers_read

    def write_fd(self) -> int:
        return self._requests_write

    def read(self) -> bytes:
        return os.read(self._answers_read, READ_SIZE)

    def write(self, data: bytes) -> int:
        try:
            return os.write(self._requests_write, data)
        except BlockingIOError:
            return 0

    def kill(self) -> None:
        """Close the pool's ends: the thread sees its input end, or its next answer fail, and exits.
        (A handler that blocks is not interrupted: its thread exits once the handler returns.)"""
        for fd in (self._requests_write, self._answers_read):
            try:
                os.close(fd)
            except OSError:
                pass

    def _serve(self) -> None:
        try:
            hello = {"op": "hello", "pid": os.getpid(), "protocol": PROTOCOL_VERSION, "capabilities": {}}
            write_all(self._answers_write, encode(hello))
            reader = FrameReader()
            while data := os.read(self._requests_read, READ_SIZE):
                for body in reader.feed(data):
                    if request_header(body).kind == EXIT:
                        return
                    request = request_message(body)
                    write_all(self._answers_write, encode_result(request.id, self.handler(request)))
        except Exception:
            pass  # the handler raised (the worker dies mid-request), or the pool killed the worker
        finally:
            os.close(self._requests_read)
            os.close(self._answers_write)


class FakeBackend:
    """Workers that answer with `handler`, in this process; `started` counts the workers made."""

    name = "fake"

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.started = 0

    def start_worker(self, slot: int) -> FakeWorker:
        self.started += 1
        return FakeWorker(self.handler, slot)

    def close(self) -> None:
        pass
