"""Forks made from a process that has never held a program.

A fork is a copy of the process it is made from, freed memory included. Forked from the worker, a
program that escaped its policy (or any trusted one: `ctypes.string_at`, `gc.get_objects`, frames)
could read the worker's memory: the sources of the programs queued behind it, and the answers of
those before it, freed but not overwritten (red team, session 14: a program read both). In RL the
programs of one batch are completions of the same prompt: one that reads another's answer and returns
it is rewarded for it.

So the worker forks one process at the end of its setup, before it reads any request, and every
forked program is forked from that one: the fork server. It holds what the worker held then (the
policies, the runners' entry, the imports, the seccomp filter) and never learns a program: the worker
hands it a memfd with the request (and the program's code, compiled by the worker: compiling in a
fresh fork cost a quarter of it) and the pipe for the answer, both as descriptors it only passes on,
and the fork reads its request itself. The fork server reaps the fork (wait4: its CPU time and peak)
and tells the worker; orphans of the fork still go to the worker, the subreaper.

What it learns is limited to what it is told to do: fork under a policy, import a module that some
program used. It runs as the worker's copy (root, non-dumpable), so a fork, another uid, cannot signal
or read it, and it dies with the worker (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import os
import socket
import struct
from collections.abc import Callable
from typing import NoReturn

from potrun.sandbox.kernel import isolation
from potrun.sandbox.wire.protocol import write_all

FORK, IMPORTED, PID, EXIT, DONE = b"F", b"I", b"P", b"X", b"D"
_PID = struct.Struct("=i")  # a fork's pid, or -errno where the fork failed
_EXIT = struct.Struct("=iidd")  # pid, wait status, CPU seconds, peak resident set in MB (-1: unknown)
_MESSAGE_BYTES = 4096
_LENGTH = struct.Struct("=Q")  # the request's length, in the memfd before it and the compiled code

Reaped = tuple[int, float, float | None]  # wait status, CPU seconds, peak MB


class ForkServer:
    """The worker's end: forks one on `start`, then asks it for each fork."""

    def __init__(self, control: socket.socket, pid: int) -> None:
        self._control = control
        self.pid = pid

    @classmethod
    def start(
        cls,
        fork_program: Callable[[str, int, int], int],
        import_modules: Callable[[list[str]], None],
        keep_fd: int,
    ) -> ForkServer:
        """Fork the server from this process, as it is now. `fork_program(policy, request_fd,
        result_fd)` runs in the server, forks, and returns the fork's pid; `import_modules` imports
        modules there. `keep_fd` (/dev/null) becomes the server's stdin and stdout: it holds none of
        the worker's pipes to potrun."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = isolation.fork()
        if pid == 0:
            ours.close()
            _serve(theirs, fork_program, import_modules, keep_fd)
        theirs.close()
        return cls(ours, pid)

    def fork(self, policy: str, request: bytes, compiled: bytes, result_fd: int) -> int:
        """A fork that reads `request` (a run request's frame body) and its program's `compiled` code
        (`Runner.compiled`: marshalled, or b""), and answers into `result_fd`."""
        memfd = os.memfd_create("request", os.MFD_CLOEXEC)
        try:
            write_all(memfd, _LENGTH.pack(len(request)) + request + compiled)
            socket.send_fds(self._control, [FORK + policy.encode()], [memfd, result_fd])
        finally:
            os.close(memfd)
        pid: int = _PID.unpack(self._receive(PID, _PID.size))[0]
        if pid < 0:
            raise OSError(-pid, os.strerror(-pid))
        return pid

    def reap(self, pid: int) -> Reaped:
        """Wait for a fork this server made (it reaps each as soon as it ends)."""
        while True:
            got, status, cpu, peak = _EXIT.unpack(self._receive(EXIT, _EXIT.size))
            if got == pid:
                return status, cpu, (peak if peak >= 0 else None)

    def import_modules(self, names: list[str]) -> None:
        self._control.send(IMPORTED + ",".join(names).encode())
        self._receive(DONE, 0)

    def close(self) -> None:
        """End the server (it reads the end of its socket) and reap it."""
        self._control.close()
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass

    def _receive(self, kind: bytes, size: int) -> bytes:
        """The next message of `kind`, skipping the report on a fork the worker gave up on."""
        while True:
            message = self._control.recv(_MESSAGE_BYTES)
            if not message:
                raise ConnectionError("the fork server is gone")
            if message[:1] == kind and len(message) == size + 1:
                return message[1:]
            if message[:1] != EXIT:
                raise ConnectionError(f"the fork server answered {message[:16]!r}")


def _serve(
    control: socket.socket,
    fork_program: Callable[[str, int, int], int],
    import_modules: Callable[[list[str]], None],
    keep_fd: int,
) -> NoReturn:
    """The server's life: one request at a time, until the worker closes its end."""
    code = 0
    try:
        isolation.die_with_parent()
        os.dup2(keep_fd, 0)
        os.dup2(keep_fd, 1)
        children = isolation.ChildList()  # its forks, and any other child a fork made it have
        while True:
            message, fds, _, _ = socket.recv_fds(control, _MESSAGE_BYTES, 2)
            if not message:
                break
            kind, rest = message[:1], message[1:]
            if kind == FORK and len(fds) == 2:
                pid = _fork(fork_program, rest.decode(), *fds)
                control.send(PID + _PID.pack(pid))
                if pid > 0:
                    status, cpu, peak = reap_status(pid)
                    # A sibling a fork made with clone(CLONE_PARENT), where no seccomp filter refuses
                    # it, is this server's child, out of the worker's sweep: it goes with the fork.
                    isolation.kill_strays(set(), children)
                    control.send(EXIT + _EXIT.pack(pid, status, cpu, -1.0 if peak is None else peak))
                continue
            for fd in fds:
                os.close(fd)
            if kind != IMPORTED:
                raise ValueError(f"not a fork server request: {kind!r}")
            import_modules(rest.decode().split(","))
            control.send(DONE)
    except BaseException:
        code = 70
    finally:
        os._exit(code)


def _fork(fork_program: Callable[[str, int, int], int], policy: str, request_fd: int, result_fd: int) -> int:
    """Fork (`fork_program`), and close the descriptors passed on to the fork: its pid, or -errno where
    the fork failed (the worker raises it as its own OSError)."""
    try:
        pid = fork_program(policy, request_fd, result_fd)
    except OSError as exc:
        return -(exc.errno or 1)
    finally:
        os.close(request_fd)
        os.close(result_fd)
    return pid


def read_request(fd: int) -> tuple[bytes, bytes]:
    """In a new fork: the request and the compiled code the worker wrote into the memfd `fd`."""
    data = os.pread(fd, os.fstat(fd).st_size, 0)
    (length,) = _LENGTH.unpack_from(data)
    start = _LENGTH.size
    return data[start : start + length], data[start + length :]


def reap_status(pid: int) -> Reaped:
    """Wait for a child; return its wait status, the CPU seconds it used and its peak resident set in
    MB (wait4's ru_maxrss, in KiB on Linux: the largest resident set of the child or of any child of
    it that it waited for; None when it was reaped elsewhere)."""
    try:
        _, status, usage = os.wait4(pid, 0)
    except ChildProcessError:
        return 0, 0.0, None
    return status, usage.ru_utime + usage.ru_stime, round(usage.ru_maxrss / 1024, 3)
