"""How the pool starts a worker: the backend interface, the thread every worker is made on, and the
wait for a worker's hello.

A worker asks the kernel to kill it when the thread that made it ends (PR_SET_PDEATHSIG follows the
thread, not the process), so the pool makes every worker on one thread of its own, its `Launcher`,
alive until the pool has stopped them: not on a caller's thread (a trainer's short-lived executor
thread would take the workers with it), nor on the thread that waits for a replacement's hello. The
wait itself (`await_hello`) runs wherever the pool starts a worker, never on its dispatcher, and ends
at once when the pool closes (its close pipe becomes readable).
"""

from __future__ import annotations

import select
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from queue import SimpleQueue
from typing import Any, Protocol, TypeVar

from potrun.sandbox.wire.protocol import PROTOCOL_VERSION, FrameReader, Hello, ProtocolError, ProtocolMismatch, decode
from potrun.types import SandboxUnavailable

START_TIMEOUT_S = 60.0

T = TypeVar("T")


class StartFailed(Exception):
    """One try at starting a worker failed (the pool tries again; `SandboxUnavailable` if it persists)."""


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


class Launcher:
    """The one thread a pool makes its workers on, alive until the pool has stopped them (`call` runs a
    function there and gives back its result or its exception)."""

    def __init__(self) -> None:
        self._calls: SimpleQueue[tuple[Callable[[], Any], Future[Any]] | None] = SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name="potrun-launcher", daemon=True)
        self._thread.start()

    def call(self, make: Callable[[], T]) -> T:
        """`make()`, run on the launcher's thread; its result or its exception."""
        if threading.current_thread() is self._thread:
            return make()
        future: Future[T] = Future()
        self._calls.put((make, future))
        return future.result()

    def stop(self) -> None:
        self._calls.put(None)
        self._thread.join()

    def _serve(self) -> None:
        while (call := self._calls.get()) is not None:
            make, future = call
            try:
                future.set_result(make())
            except BaseException as exc:  # the caller's to handle, on its own thread
                future.set_exception(exc)


def await_hello(conn: WorkerConnection, reader: FrameReader, name: str, closed_fd: int) -> Hello:
    """Wait for the hello of the worker `name` ("process worker 0"); StartFailed (the worker killed)
    saying why when none comes, or when `closed_fd` (the pool's close pipe; -1: none) becomes readable.
    Bytes after the hello stay in `reader`."""
    try:
        return Hello.from_wire(_read_hello(conn, reader, closed_fd))
    except ProtocolMismatch as exc:  # a worker from an older image would misread every request
        conn.kill()
        raise SandboxUnavailable(
            f"{name} speaks protocol {exc.spoken}, potrun speaks {PROTOCOL_VERSION}: rebuild the sandbox image"
        ) from None
    except ProtocolError as exc:
        conn.kill()
        raise StartFailed(f"its hello was not the protocol's ({exc})") from None
    except StartFailed:
        conn.kill()
        raise


def _read_hello(conn: WorkerConnection, reader: FrameReader, closed_fd: int) -> dict[str, Any]:
    deadline = time.monotonic() + START_TIMEOUT_S
    closed = [closed_fd] if closed_fd >= 0 else []
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([conn.read_fd(), *closed], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            if closed and closed[0] in ready:
                raise StartFailed("the sandbox was closed")
            data = conn.read()
            if not data:
                raise StartFailed("it exited before its hello")
            for body in reader.feed(data):
                message = decode(body)
                if message.get("op") == "hello":
                    return message
    except (OSError, ProtocolError) as exc:
        raise StartFailed(f"its output broke off or was not the protocol ({exc})") from None
    except SandboxUnavailable as exc:  # a container that the engine could not make or start
        raise StartFailed(str(exc)) from None
    raise StartFailed(f"no hello within {START_TIMEOUT_S:g} s")
