"""Forks made from a process that has never held a program.

A fork is a copy of the process it is made from, freed memory included. Forked from the worker, a
program that escaped its policy (or any trusted one: `ctypes.string_at`, `gc.get_objects`, frames)
could read the worker's memory: the sources of the programs queued behind it, and the answers of
those before it, freed but not overwritten (a red team's program read both). In RL the
programs of one batch are completions of the same prompt: one that reads another's answer and returns
it is rewarded for it.

So the worker forks one process at the end of its setup, before it reads any request, and every
forked program is forked from that one: the fork server. It holds what the worker held then (the
policies, the runners' entry, the imports, the seccomp filter) and never learns a program: the worker
hands it a memfd with the request (and the program's code, compiled by the worker: compiling in a
fresh fork cost a quarter of it) and the pipe for the answer, both as descriptors it only passes on,
and the fork reads its request itself. The fork server reaps the fork (wait4: its CPU time and peak)
and tells the worker; orphans of the fork still go to the worker, the subreaper.

What it learns is limited to what it is told to do: fork under a policy, make a template. It runs as
the worker's copy (root, non-dumpable), so a fork, another uid, cannot signal or read it, and it dies
with the worker (PR_SET_PDEATHSIG).

**Templates** (`templates`): a program that imports numpy, sympy or pandas forks from a copy of the fork
server that already holds them, made on first need. The fork server forks the template (so it, too,
has never held a program), the template imports the modules and warms their caches, says it is ready,
and from then on serves forks exactly as the fork server does (this module's `_serve`, on its own
socket). It is the fork server's child: it dies with it (PR_SET_PDEATHSIG), and the fork server's sweep
of stray children spares it until the worker ends it (END: killed and reaped, so that its memory is
given back before the worker counts it gone).
"""

from __future__ import annotations

import os
import select
import socket
import struct
import time
from collections.abc import Callable
from typing import NoReturn

from potrun.sandbox.kernel import isolation
from potrun.sandbox.wire.protocol import write_all

FORK, TEMPLATE, END, SETTLE, PID, EXIT, DONE, READY = b"F", b"T", b"E", b"S", b"P", b"X", b"D", b"R"
_PID = struct.Struct("=i")  # a fork's pid, or -errno where the fork failed
_EXIT = struct.Struct("=iidd")  # pid, wait status, CPU seconds, peak resident set in MB (-1: unknown)
_MESSAGE_BYTES = 4096
_RESTRICTED, _ANY = b"R", b"-"  # a template for restricted programs only, or for any
_LENGTH = struct.Struct("=Q")  # the request's length, in the memfd before it and the compiled code

Reaped = tuple[int, float, float | None]  # wait status, CPU seconds, peak MB
ForkProgram = Callable[[str, int, int], int]  # (policy, request fd, result fd) -> the fork's pid
# In a new template: import the modules, warm their caches (and, for restricted programs, prepare the policy).
MakeTemplate = Callable[[list[str], bool], None]


class ForkServer:
    """The worker's end: forks one on `start`, then asks it for each fork."""

    def __init__(self, control: socket.socket, pid: int) -> None:
        self._control = control
        self.pid = pid

    @classmethod
    def start(cls, fork_program: ForkProgram, make_template: MakeTemplate, keep_fd: int, slots: int = 0) -> ForkServer:
        """Fork the server from this process, as it is now. `fork_program(policy, request_fd,
        result_fd)` runs in the server, forks, and returns the fork's pid; `make_template(modules,
        restricted)` runs in a new template. `keep_fd` (/dev/null) becomes the server's stdin and stdout: it holds
        none of the worker's pids to potrun. `slots`: the tasks (processes and threads) its templates
        may hold together (pandas's holds two: pyarrow starts a thread), each slot held by a placeholder
        process while no template's task holds it (`settle`), so that the worker's own tasks are always
        as many and a program's process limit never depends on the templates alive."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = isolation.fork()
        if pid == 0:
            ours.close()
            _serve(theirs, fork_program, make_template, keep_fd, slots)
        theirs.close()
        return cls(ours, pid)

    def start_template(self, modules: list[str], restricted: bool, timeout_s: float) -> ForkServer | None:
        """A template of this (bare) server that holds `modules` (prepared for restricted programs
        only, if `restricted`), once it said it is ready; None, and nothing left of it, when it did not
        within `timeout_s` or failed."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        flag = _RESTRICTED if restricted else _ANY
        try:
            socket.send_fds(self._control, [TEMPLATE + flag + ",".join(modules).encode()], [theirs.fileno()])
        finally:
            theirs.close()
        pid: int = _PID.unpack(self._receive(PID, _PID.size))[0]
        if pid < 0:
            ours.close()
            return None
        template = ForkServer(ours, pid)
        if not select.select([ours], [], [], timeout_s)[0] or ours.recv(_MESSAGE_BYTES) != READY:
            self.end_template(template)
            return None
        return template

    def settle(self) -> int:
        """Make the placeholders fill the slots the templates' tasks leave; how many tasks the templates
        hold beyond the slots (then the worker ends one and settles again)."""
        self._control.send(SETTLE)
        over: int = _PID.unpack(self._receive(DONE, _PID.size))[0]
        return over

    def end_template(self, template: ForkServer) -> None:
        """Kill a template this server made and reap it: its memory is given back when this returns."""
        template._control.close()
        self._control.send(END + _PID.pack(template.pid))
        self._receive(DONE, 0)

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
    control: socket.socket, fork_program: ForkProgram, make_template: MakeTemplate, keep_fd: int, slots: int = 0
) -> NoReturn:
    """The server's life (the fork server's, or a template's): one request at a time, until the worker
    closes its end."""
    code = 0
    try:
        isolation.die_with_parent()
        os.dup2(keep_fd, 0)
        os.dup2(keep_fd, 1)
        children = isolation.ChildList()  # its forks, its templates, and any other child a fork made it have
        templates: set[int] = set()
        placeholders = [_placeholder() for _ in range(slots)]  # the template slots no template holds
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
                    isolation.kill_strays(templates | set(placeholders), children)
                    control.send(EXIT + _EXIT.pack(pid, status, cpu, -1.0 if peak is None else peak))
                continue
            if kind == TEMPLATE and len(fds) == 1:
                modules, restricted = rest[1:].decode().split(","), rest[:1] == _RESTRICTED
                pid = _fork_template(control, fds[0], modules, restricted, fork_program, make_template, keep_fd)
                templates.add(pid)
                control.send(PID + _PID.pack(pid))
                continue
            for fd in fds:
                os.close(fd)
            if kind == SETTLE:
                control.send(DONE + _PID.pack(_settle(templates, placeholders, slots)))
                continue
            if kind != END or len(rest) != _PID.size:
                raise ValueError(f"not a fork server request: {kind!r}")
            (pid,) = _PID.unpack(rest)
            if pid in templates:
                templates.discard(pid)
                _end(pid)
            control.send(DONE)
    except BaseException:
        code = 70
    finally:
        os._exit(code)


def _placeholder() -> int:
    """A process that holds a template slot: it holds nothing (no descriptor) and sleeps until ended."""
    pid = isolation.fork()
    if pid == 0:
        try:
            isolation.die_with_parent()
            os.closerange(0, isolation.MAX_FD)
            while True:
                time.sleep(3600)
        finally:
            os._exit(0)
    return pid


def _settle(templates: set[int], placeholders: list[int], slots: int) -> int:
    """Placeholders for the slots the templates' tasks leave (ended or made); the tasks over the slots."""
    used = sum(_tasks(pid) for pid in templates)
    while placeholders and used + len(placeholders) > slots:
        _end(placeholders.pop())
    while used + len(placeholders) < slots:
        placeholders.append(_placeholder())
    return max(0, used - slots)


def _tasks(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return 1


def _end(pid: int) -> None:
    isolation.kill_group(pid)
    reap_status(pid)


def _fork_template(
    control: socket.socket,
    fd: int,
    modules: list[str],
    restricted: bool,
    fork_program: ForkProgram,
    make_template: MakeTemplate,
    keep_fd: int,
) -> int:
    """Fork a template on the socket `fd`: it makes itself (`make_template`), says READY, and serves."""
    pid = isolation.fork()
    if pid == 0:
        try:
            control.close()  # the fork server's end: the template hears the worker on its own only
            own = socket.socket(fileno=fd)
            make_template(modules, restricted)
            own.send(READY)
            _serve(own, fork_program, make_template, keep_fd)
        finally:
            os._exit(70)
    os.close(fd)
    return pid


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
