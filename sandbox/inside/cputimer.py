"""The CPU-time limit that decides a timeout: the kernel ends the runner at it, exactly.

A runner arms a `CpuTimer` for each program: a POSIX timer on the process's CPU clock
(`timer_create(CLOCK_PROCESS_CPUTIME_ID)`), whose expiry sends SIGPROF, left at its default action, so
that the KERNEL terminates the runner at the limit, even inside a long C call (`10**10**8`) that no
Python-level check could interrupt. The worker reads a death by SIGPROF as `timeout` with
`timeout_kind` "cpu" once the runner's CPU accounting (its rusage) confirms it.

Why this clock and not `setitimer(ITIMER_PROF)` or RLIMIT_CPU: those two count the process's CPU time
by sampling the scheduler's tick (each tick charges a whole tick to whoever runs), which on a busy
machine strays by a few percent either way (measured on the 2-core machine under 4 busy processes:
1 s of ITIMER_PROF ended at 0.989 to 1.021 s of rusage); the process CPU clock is the scheduler's exact
runtime (the same runs ended at 1.0025 to 1.0053 s, one tick late at most). A verdict that depends on
the load is what this module exists to remove.

Where `timer_create` cannot be reached (no C library symbol), `CpuTimer` falls back to
`setitimer(ITIMER_PROF)`: the same signal and verdict, with the tick's precision.

Timers are not inherited by a fork: each runner process makes its own (`CpuTimer()` in the fresh
process). RLIMIT_CPU stays set beside it (`isolation`) as the backstop that a trusted program cannot
lift: one that deletes the timer or ignores SIGPROF is still stopped, by SIGKILL at the rlimit.
"""

from __future__ import annotations

import ctypes
import signal

CLOCK_PROCESS_CPUTIME_ID = 2
SIGEV_SIGNAL = 0
SIGNAL = signal.SIGPROF  # its default action ends the process; the worker reads it as the CPU limit


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


class _Sigevent(ctypes.Structure):
    # struct sigevent on Linux: sigev_value (a union of a pointer), sigev_signo, sigev_notify, then a
    # union that makes the whole 64 bytes.
    _fields_ = [
        ("sigev_value", ctypes.c_void_p),
        ("sigev_signo", ctypes.c_int),
        ("sigev_notify", ctypes.c_int),
        ("_rest", ctypes.c_byte * 48),
    ]


def _libc_functions() -> tuple[object, object] | None:
    """timer_create and timer_settime of the C library (glibc 2.34+ and musl have them in libc)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.timer_create, libc.timer_settime
    except (OSError, AttributeError):
        return None


_FUNCTIONS = _libc_functions()  # looked up once, in the worker: a runner only calls them


class CpuTimer:
    """A one-shot CPU-time limit for the process that arms it (all its threads; not its child
    processes, which RLIMIT_CPU limits each).

    May be made in one process and armed in another: the worker makes a fork runner's timer once, and
    each fork, which inherits the object but no timer, creates its own kernel timer on its first
    `arm` (everything else is made before the fork, where it costs no page faults). `arm(seconds)`
    starts it from now, `disarm()` stops it. `precise`: it counts exact runtime (the POSIX timer),
    not the tick's samples (the fallback)."""

    __slots__ = ("_armed", "_disarmed", "_event", "_id", "_seconds", "_value", "precise")

    def __init__(self) -> None:
        self._id: ctypes.c_void_p | None = None  # the kernel timer of the process that armed it
        self._seconds = -1.0  # the limit `_value` holds, so that the same limit builds nothing
        self._value = _Itimerspec()
        self._armed = ctypes.byref(self._value)
        self._disarmed = ctypes.byref(_Itimerspec())
        self._event = ctypes.byref(_Sigevent(sigev_signo=SIGNAL, sigev_notify=SIGEV_SIGNAL))
        self.precise = _FUNCTIONS is not None

    def _create(self) -> None:
        timer = ctypes.c_void_p()
        if _FUNCTIONS is None or _FUNCTIONS[0](CLOCK_PROCESS_CPUTIME_ID, self._event, ctypes.byref(timer)) != 0:  # type: ignore[operator]
            self.precise = False  # (the kernel refused: the fallback, for this process)
            return
        self._id = timer

    def arm(self, seconds: float) -> None:
        """SIGPROF once the process has used `seconds` more CPU time than now."""
        if self._id is None and self.precise:
            self._create()
        if not self.precise:
            signal.setitimer(signal.ITIMER_PROF, seconds)
            return
        if seconds != self._seconds:
            whole = int(seconds)
            self._value.it_value.tv_sec = whole
            self._value.it_value.tv_nsec = min(int((seconds - whole) * 1e9), 999_999_999)
            if whole == 0 and self._value.it_value.tv_nsec == 0:
                self._value.it_value.tv_nsec = 1  # (zero would disarm it)
            self._seconds = seconds
        _FUNCTIONS[1](self._id, 0, self._armed, None)  # type: ignore[index,operator]

    def disarm(self) -> None:
        if not self.precise:
            signal.setitimer(signal.ITIMER_PROF, 0)
            return
        _FUNCTIONS[1](self._id, 0, self._disarmed, None)  # type: ignore[index,operator]


def default_signals() -> None:
    """SIGPROF and SIGXCPU at their default actions, which end the process: the limits rely on them.
    (A process started with either ignored passes SIG_IGN on through exec and fork.) The worker calls
    this once; its runners inherit it."""
    for number in (SIGNAL, signal.SIGXCPU):
        signal.signal(number, signal.SIG_DFL)


__all__ = ["SIGNAL", "CpuTimer", "default_signals"]
