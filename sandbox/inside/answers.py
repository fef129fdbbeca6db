"""What a runner answers the worker, and how (moved out of the worker, #40).

A runner's answer is a frame: a fixed prefix (`ANSWER`) then the JSON result. A warm runner writes
through `AnswerPipe`, which stamps when it finished the program; a fork through `forked.send_forked`.
"""

from __future__ import annotations

import fcntl
import math
import struct
import sys
import time

from potrun.sandbox.wire.protocol import frame, write_all

# Allowed modules that a worker imports only once its warm runner needs them, outside any program's
# limits: every module a process holds makes each of its forks dearer (numpy doubles the memory a fork
# copies and its exit unmaps: a fork runs 1,190 programs/s here without it, 967/s with it), and most
# programs never use it. numpy, numpy.linalg and numpy.random (NUMPY) come before a warm runner starts
# (numpy.random with them, so that its global generator is always the worker's, seeded per program).
# The fork server never imports them: a forked program that imports numpy forks from a template that
# holds it (`templates`). (A fork still reports which of PRELOAD_ON_DEMAND it holds.)
NUMPY = ("numpy", "numpy.linalg", "numpy.random")
PRELOAD_ON_DEMAND = (*NUMPY, "numpy.fft", "numpy.polynomial")
# Bytes asked of one read: a pipe holds 64 KiB, so asking more gains nothing, and a 1 MiB buffer costs
# an mmap, page faults and an munmap on every read (more than the read itself).
READ_SIZE = 1 << 16
# A runner's answer to the worker: its flags (RECYCLE: the runner must be replaced; NEEDS_FORK: a warm
# runner may not run the program, and there is no result), when it finished the program
# (time.perf_counter: one clock for the worker and the runners it forks), the CPU time it had used
# then (a warm runner's: what its next program's CPU time is counted from, should it be killed), and
# which PRELOAD_ON_DEMAND modules it holds (a bit each); then the JSON result.
ANSWER = struct.Struct(">BddB")
RECYCLE, NEEDS_FORK = 1, 2
RESUME = b""  # the frame body that lets a warm runner go on after it answered NEEDS_FORK
# The largest answer a runner may send: a value of the output limit, every character escaped (\uXXXX),
# and the other fields.
ANSWER_SLACK = 64 * 1024
FIONREAD = 0x541B  # termios.FIONREAD on Linux: bytes waiting in a pipe
# Room to spare for an answer to be sure it does not wait: its framing, and a page, since the pipe
# keeps its bytes in whole pages.
_ANSWER_MARGIN = 4 + ANSWER.size + 4096


class AnswerPipe:
    """The runner's end of the pipe that carries its answers to the worker.

    Each answer is stamped with the time the runner was done with the program, which is when it
    starts the next one: the worker reads answers only every POLL_S, and counts the next program's
    time from the stamp. An answer that may have to wait for room in the pipe (the worker being slow
    to read) gets no stamp (infinity), since that wait would be the next program's time: the worker
    then counts from when it read the answer."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        try:
            self.capacity = fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ)
        except OSError:
            self.capacity = 0  # unknown: no stamps
        self._unread = bytearray(4)

    def send(self, body: bytes, flags: int, cpu: float) -> None:
        """`cpu`: the runner's CPU time when it ended the program (no later than now)."""
        stamp = time.perf_counter() if self._room() >= len(body) + _ANSWER_MARGIN else math.inf
        write_all(self.fd, frame(ANSWER.pack(flags, stamp, cpu, 0) + body))

    def _room(self) -> int:
        fcntl.ioctl(self.fd, FIONREAD, self._unread, True)  # bytes the worker has not read yet
        return self.capacity - int.from_bytes(self._unread, sys.byteorder)
