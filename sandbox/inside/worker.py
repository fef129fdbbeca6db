"""The worker: `python -s -P -m potrun.sandbox.inside.worker`, the same program on the host and in a container.

It imports the allowlisted modules once (numpy once its programs need it), isolates itself (init of
its own PID namespace, an empty network namespace, a subreaper, pids and memory cgroups, a minimal
root, non-dumpable, a seccomp filter, where the machine has them), then reads run requests as frames
on stdin and answers on stdout. It never runs a program itself: each program runs in a runner forked
from it (the warm runner) or from its fork server (`forkserver`: a copy of it that never holds a
program), so that the worker can enforce the limits from outside. The CPU limit, which decides a timeout,
is the runner's CPU timer (`cputimer`: the kernel ends the runner with SIGPROF at it), with RLIMIT_CPU
behind it; the wall-clock limit, a safety net several times wider, is SIGKILL of the runner's process
group; memory is the memory cgroup over all of a
program's processes, with RLIMIT_AS per process; processes are the pids cgroup (or RLIMIT_NPROC when
the runner is not root). A runner that ran out
of time, crashed, or was left in a state that the next program could see is killed and replaced by a
fresh fork: a few milliseconds.
"""

from __future__ import annotations

import dataclasses
import fcntl
import functools
import gc
import importlib
import math
import os
import select
import signal
import struct
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from potrun.policies import get_policy
from potrun.policies.pure import on_unproven, prepare_proxies
from potrun.sandbox.inside import cputimer, forkserver, seeding
from potrun.sandbox.inside.forkserver import ForkServer, reap_status
from potrun.sandbox.inside.runner import AuditHook, Runner, trusted_audit_hook
from potrun.sandbox.kernel import isolation, memcg, namespace, seccomp
from potrun.sandbox.wire.protocol import (
    EXIT,
    PROTOCOL_VERSION,
    RUN_TIERED,
    FrameReader,
    FrameTooLarge,
    ProtocolError,
    RunRequest,
    check_result,
    checked_result,
    decode,
    dumps,
    encode,
    encode_result,
    frame,
    request_header,
    request_message,
    write_all,
)
from potrun.types import ExecResult, Isolation, Status

PRELOAD = (
    "math",
    "cmath",
    "statistics",
    "fractions",
    "decimal",
    "datetime",
    "itertools",
    "functools",
    "collections",
    "operator",
    "re",
    "string",
    "random",
    "heapq",
    "bisect",
    "copy",
)
# Allowed modules that a worker imports only once its programs need them, outside any program's limits:
# every module a worker holds makes each of its forks dearer (numpy doubles the memory a fork copies
# and its exit unmaps: a fork runs 1,190 programs/s here without it, 967/s with it), and most programs
# never use it. numpy, numpy.linalg and numpy.random (NUMPY) come before a warm runner starts, or before a
# fork whose program names numpy (numpy.random with them, so that its global generator is always the
# worker's, seeded per program: one imported by the fork itself would draw its seed at another point of
# the stream); any of these once a fork reports that its program imported it.
NUMPY = ("numpy", "numpy.linalg", "numpy.random")
PRELOAD_ON_DEMAND = (*NUMPY, "numpy.fft", "numpy.polynomial")
MAX_PROCESSES = 32  # a program's processes, capped by the worker's pids cgroup
WARM_QUEUE = 64  # requests streamed ahead to a warm runner...
# ...holding at most this many bytes, half a pipe: the worker's writes to the runner never block then
# (only a lone request may be larger, and the runner, idle, reads it), so the worker always comes back
# to read answers, and a runner blocked on writing a large answer cannot block it in turn.
WARM_QUEUE_BYTES = 32 * 1024
# Bytes asked of one read: a pipe holds 64 KiB, so asking more gains nothing, and a 1 MiB buffer costs
# an mmap, page faults and an munmap on every read (~20 us, more than the read itself).
READ_SIZE = 1 << 16
POLL_S = 0.002  # how often, at most, the worker looks for a warm runner's answers while they flow...
SMALL_ANSWER = WARM_QUEUE_BYTES // WARM_QUEUE  # ...if they are no larger than this (bytes, on average)
# A runner's answer to the worker: its flags (RECYCLE: the runner must be replaced; NEEDS_FORK: a warm
# runner may not run the program, and there is no result), when it finished the program
# (time.perf_counter: one clock for the worker and the runners it forks), the CPU time it had used
# then (a warm runner's: what its next program's CPU time is counted from, should it be killed), and
# which PRELOAD_ON_DEMAND modules it holds (a bit each); then the JSON result.
_ANSWER = struct.Struct(">BddB")
RECYCLE, NEEDS_FORK = 1, 2
RESUME = b""  # the frame body that lets a warm runner go on after it answered NEEDS_FORK
# The largest answer a runner may send: a value of the output limit, every character escaped (\uXXXX),
# and the other fields.
ANSWER_SLACK = 64 * 1024
FIONREAD = 0x541B  # termios.FIONREAD on Linux: bytes waiting in a pipe
# Room to spare for an answer to be sure it does not wait: its framing, and a page, since the pipe
# keeps its bytes in whole pages.
_ANSWER_MARGIN = 4 + _ANSWER.size + 4096
# A runner's death by one of these is its CPU limit (the timer's SIGPROF; RLIMIT_CPU's SIGXCPU, or
# SIGKILL where soft = hard) when its rusage shows at least CPU_CONFIRM of the limit: the exact timer
# ends it at or just past the limit; the setitimer fallback (`cputimer`) counts by the tick, and was
# seen to end a program at 0.93 of its limit on a heavily loaded machine.
CPU_LIMIT_SIGNALS = frozenset({cputimer.SIGNAL, signal.SIGXCPU, signal.SIGKILL})
CPU_CONFIRM = 0.8
_WARM, _FORK = Isolation.WARM.value, Isolation.FORK.value  # the tiers, as a result names them
# When a warm runner measures its own footprint (`memcg.Footprint`): after a program of this wall time or
# more (filling memcg.WARM_MARGIN_BYTES takes longer: page faults and zeroing), and every this many.
FOOTPRINT_AFTER_S = 0.0005
FOOTPRINT_EVERY = 64


class Request:
    """A run request as the worker holds it: its header, read on arrival, and its frame body, which a
    warm runner gets untouched. The JSON is decoded here only when the worker needs more than the
    header (a fork, or a verdict of its own)."""

    __slots__ = ("_message", "body", "key", "sent", "wall_s", "warm")

    def __init__(self, warm: bool, wall_s: float, key: tuple[int, int], body: bytes) -> None:
        self.warm = warm  # it may take the warm tier (if the warm runner finds it pure)
        self.wall_s = wall_s  # the wall-clock safety net (the CPU limit is the runner's to enforce)
        self.key = key  # the settings a warm runner is made for
        self.body = body
        self.sent = 0.0  # when it went to a warm runner
        self._message: RunRequest | None = None

    @property
    def message(self) -> RunRequest:
        if self._message is None:
            self._message = request_message(self.body)
        return self._message


Deque = deque[Request]


@dataclass
class RunnerProcess:
    """A forked runner and the pipes to it."""

    pid: int
    requests: int  # fd we write requests to (warm runners only)
    results: int  # fd we read results from
    key: tuple[Any, ...]
    reader: FrameReader = field(default_factory=FrameReader)
    warm: bool = False


class Worker:
    def __init__(
        self,
        uid_base: int | None,
        preload: tuple[str, ...],
        scratch: str | None = None,
        scratch_is_private: bool = False,
        host_pid: int | None = None,
        pid_namespace: bool = False,
    ) -> None:
        """`host_pid`: this worker's pid as potrun sees it (outside its PID namespace, if
        `pid_namespace`); its cgroups and its runners' uid are named after it."""
        seeding.install()  # before any import makes a generator
        cputimer.default_signals()  # the CPU limits end a runner by the default actions of signals
        for name in preload:
            try:
                importlib.import_module(name)
            except ImportError:
                pass
        isolation.scrub_environment()
        self.host_pid = host_pid or os.getpid()
        self.pid_namespace = pid_namespace
        self.network_isolated = isolation.unshare_network()
        # SysV shared memory, semaphores and queues: the worker's own namespace, emptied after each forked
        # program (`remove_ipc_objects`), so that none is the host's, another worker's or a later program's.
        self.ipc_isolated = isolation.unshare_ipc()
        self.uts_isolated = isolation.unshare_uts()  # (a container's name is the engine's: a fixed one too)
        self.subreaper = isolation.set_subreaper()
        # The worker joins its cgroups itself: runners inherit them at fork, with no per-fork migration.
        # (the worker, its fork server and its warm runner above the program's own)
        self.cgroup = isolation.PidsCgroup.try_create(isolation.pids_cgroup_name(self.host_pid), MAX_PROCESSES + 3)
        if self.cgroup is not None:
            self.cgroup.enter()
        self.memory = memcg.MemoryCgroup.try_create(memcg.cgroup_name(self.host_pid))
        if self.memory is not None:
            self.memory.enter()
        else:  # a container: its own cgroup's limit holds, and its OOM kills are still told apart
            self.memory = memcg.MemoryCgroup.watch_own()
        # The OOM killer's last choice, the worker (lowering a score needs CAP_SYS_RESOURCE, which this
        # machine's root may lack); each runner raises its own to the top, which needs nothing.
        self.oom_protected = memcg.set_oom_score(memcg.OOM_SCORE_WORKER) or _oom_score() < memcg.OOM_SCORE_RUNNER
        root = os.geteuid() == 0
        # Given by potrun, which removes it even if this worker is killed; or our own.
        self.scratch = scratch or _temporary_directory()
        self.minimal_root = False
        if root and not scratch_is_private:
            self.minimal_root = _build_minimal_root(self.scratch)
        if self.minimal_root:
            self.scratch = namespace.SCRATCH
            self.mounted_scratch = self.private_scratch = True
        elif scratch_is_private:
            # A container's /tmp is a small tmpfs of its own already, but world-writable (docker copies
            # the image's 1777 onto it): a place where one program could leave notes for the next.
            # Runners pass through it to their own folder, no more.
            self.mounted_scratch = False
            self.private_scratch = True
            if root and not scratch:
                os.chmod(os.path.dirname(self.scratch), 0o711)
        else:  # on the host, mount one
            self.mounted_scratch = isolation.mount_private_scratch(self.scratch)
            self.private_scratch = self.mounted_scratch
            if self.pid_namespace and self.mounted_scratch:
                namespace.mount_own_proc()  # the host's /proc would show the host's processes as ours
        self._children = isolation.ChildList()
        # A root worker hands its runners an unprivileged uid of their own. Where Python is not
        # readable by other users (it lives under /root), the worker's mount namespace opens the way to
        # it (the minimal root does so by itself); failing that, runners keep the one capability of
        # reading files.
        self.uid = uid_base + self.host_pid if root and uid_base is not None else None
        if self.uid is not None:
            os.chmod(self.scratch, 0o711)  # runners pass through to their own folder in it, no more
        if self.uid is not None and self.mounted_scratch and not isolation.python_reachable_by_others():
            isolation.open_paths_to_others(isolation.python_paths())
        read_anything = self.uid is not None and not isolation.python_reachable_by_others()
        processes_capped = self.cgroup is not None or isolation.under_pids_limit()
        # Each runner's OOM score is raised by the worker, just after the fork: in the fresh fork the
        # same write cost ~80 us of page faults (6-20% of a fork's programs/s here).
        self._raise_oom_score = self.memory is not None and self.oom_protected
        self.entry = isolation.RunnerEntry(self.uid, read_anything, processes_capped)
        self.warm_scratch = self._own_directory("warm", self.entry.uid)  # emptied when the runner is replaced
        self.fork_scratch = os.path.join(self.scratch, "fork")  # made for each forked program, then removed
        # Runners may write their scratch only (not even world-writable /tmp), and nothing they execute
        # gains a capability.
        if self.mounted_scratch and not self.minimal_root:
            isolation.make_files_read_only(self.scratch)
        if root:
            isolation.limit_capabilities(keep=isolation.CAP_DAC_READ_SEARCH if read_anything else None)
        # Out of its runners' reach even where they share its uid (a worker that is not root).
        self.non_dumpable = isolation.set_non_dumpable()
        # Last, since it refuses mounts and namespaces to the worker too; inherited by every fork for
        # free (a system call pays ~40 ns more, a fork nothing).
        self.seccomp = seccomp.install()
        self.warm: RunnerProcess | None = None
        self._warm_cpu = 0.0  # the warm runner's CPU time at its last answer (its own stamp)
        self._fork_runners: dict[str, Runner] = {}  # by policy, made once: each fork runs its own copy
        self._trusted_hook = trusted_audit_hook(self.network_isolated)  # added by each trusted fork
        self._open_input = True  # until potrun asks the worker to exit
        # Everything imported so far lives as long as the worker: keep the collector off those pages,
        # so that runners forked from here copy fewer of them.
        gc.freeze()
        self._fork_server: ForkServer | None = None  # started by `serve`
        self.out = sys.stdout.buffer
        self._oom_kills = 0
        if self.memory is not None:
            self.memory.measure_baseline()
            self._killed_for_memory()  # the count so far

    @property
    def forks(self) -> ForkServer:
        if self._fork_server is None:
            raise RuntimeError("the fork server starts with serve()")
        return self._fork_server

    def hello(self) -> dict[str, Any]:
        capabilities = isolation.Capabilities(
            network_namespace=self.network_isolated,
            private_scratch=self.private_scratch,
            read_only_files=bool(os.statvfs("/").f_flag & os.ST_RDONLY),
            pids_cgroup=self.cgroup is not None,
            drop_privileges=self.uid is not None,
            reads_all_files=self.entry.read_anything,
            subreaper=self.subreaper,
            minimal_root=self.minimal_root,
            pid_namespace=self.pid_namespace or os.getpid() == 1,  # (a container's init is ours too)
            memory_cgroup=self.memory is not None and self.memory.owned,
            non_dumpable=self.non_dumpable,
            seccomp=self.seccomp,
            uts_namespace=self.uts_isolated or _fixed_hostname(),
        )
        return {
            "op": "hello",
            "pid": os.getpid(),
            "host_pid": self.host_pid,
            "fork_server_pid": self.forks.pid,  # the parent of every forked program
            "protocol": PROTOCOL_VERSION,
            "python": sys.version.split()[0],
            "capabilities": capabilities.to_dict(),
        }

    # -- the loop --------------------------------------------------------------------------------------

    def serve(self) -> None:
        """Read requests, run them in order, answer in order. Warm requests are streamed to the runner
        up to WARM_QUEUE ahead, so it never waits for a round trip; each still gets its full time,
        counted from when the runner could start it: when it was sent, or when the runner finished the
        program before it, whichever came later."""
        # Before any request: every forked program is forked from this copy of the worker, which never
        # holds a program (`forkserver`). (Started from here, a plain call from `main`, its forks have
        # as many frames under the program as the warm runner: the recursion depth is the same.)
        self._fork_server = ForkServer.start(self._fork_program, self._import_here, self.entry.devnull)
        if self.memory is not None:
            self.memory.measure_baseline()  # with what the fork server holds
        self._write(encode(self.hello()))
        stdin = sys.stdin.buffer.fileno()
        reader = FrameReader()
        pending: Deque = deque()
        inflight: Deque = deque()
        finished = 0.0  # when the warm runner finished its last answered program (its own stamp)
        # While answers flow, look for them after a nap rather than wake for each one: a wake costs
        # more than handling an answer. The nap is at most POLL_S, and no longer than the runner takes
        # for half of the programs it still holds (their mean time so far), so that it never idles for
        # it: a few programs in flight (per-sample calls) are answered as they finish. A look that
        # finds none goes back to waking on the next one.
        nap = 0.0
        per_program = POLL_S  # the runner's mean time per program (a moving average of its own stamps)
        while self._open_input or pending or inflight:
            if not inflight and pending and not pending[0].warm:
                self._write(self.run_forked(pending.popleft()))
                continue
            if not inflight:
                nap = 0.0
            self._dispatch_warm(pending, inflight)
            watched = [stdin] if self._open_input else []
            timeout = None
            if inflight:
                timeout = max(0.0, _deadline(inflight[0], finished) - time.perf_counter())
            elif not self._open_input:
                continue
            if inflight and not nap:
                watched.append(self.warm.results)  # type: ignore[union-attr]
            ready = self._wait(watched, timeout, nap)
            if stdin in ready and not self._read_requests(stdin, reader, pending):
                return  # potrun is gone: nobody is left to read the answers
            if inflight:
                waiting, began = len(inflight), _started(inflight[0], finished)
                out, restart, finished = self._collect_warm(inflight, finished)
                answered = waiting - len(inflight)
                if answered and finished > began:  # (a span with no idle time in it: `_started`)
                    per_program = 0.5 * per_program + 0.5 * (finished - began) / answered
                # Nap only while answers are small: a whole queue of them then fits in half a pipe,
                # so the runner never waits for room. Larger ones are read as they come.
                flowing = bool(out) and not restart and len(out) <= answered * SMALL_ANSWER
                nap = min(POLL_S, per_program * len(inflight) / 2) if flowing else 0.0
                if out:
                    self._write(out)
                if restart:
                    pending.extendleft(reversed(inflight))
                    inflight.clear()

    @staticmethod
    def _wait(watched: list[int], timeout: float | None, nap: float) -> list[int]:
        """The descriptors ready to read, after waiting for one (or the timeout), or when answers are
        flowing (`nap`), after sleeping that long through answers and requests alike: potrun answers a
        batch of answers with a batch of requests, and waking for those would only wake us again."""
        if not nap:
            return select.select(watched, [], [], timeout)[0]
        time.sleep(nap if timeout is None else min(timeout, nap))
        return select.select(watched, [], [], 0)[0]

    def _read_requests(self, stdin: int, reader: FrameReader, pending: Deque) -> bool:
        """Queue what potrun sent, reading only the headers. False when potrun has gone."""
        data = os.read(stdin, READ_SIZE)
        if not data:
            return False
        for body in reader.feed(data):
            header = request_header(body)
            if header.kind == EXIT:
                self._open_input = False
            else:
                key = (header.memory_mb, header.max_processes)
                pending.append(Request(header.kind == RUN_TIERED, header.wall_s, key, body))
        return True

    def _dispatch_warm(self, pending: Deque, inflight: Deque) -> None:
        """Send warm requests that share the runner's settings, up to WARM_QUEUE (and WARM_QUEUE_BYTES)
        in flight; the request's frame goes on as it came, not decoded and encoded again."""
        batch = []
        queued = sum(len(request.body) for request in inflight)
        now = time.perf_counter()
        while pending and len(inflight) < WARM_QUEUE and pending[0].warm:
            if inflight and queued + len(pending[0].body) > WARM_QUEUE_BYTES:
                break
            key = pending[0].key
            if self.warm is None or (self.warm.key != key and not inflight):
                self._stop_warm()
                self._import(NUMPY)
                prepare_proxies()  # the pure modules, imported here, outside any program's limits
                self.warm = self._spawn(pending[0].message, key)
            elif self.warm.key != key:
                break
            request = pending.popleft()
            request.sent = now
            inflight.append(request)
            queued += len(request.body)
            batch.append(frame(request.body))
        if batch:
            try:
                write_all(self.warm.requests, b"".join(batch))  # type: ignore[union-attr]
            except OSError:
                pass  # the runner died between programs: its end of the results pipe tells (`_after_warm_death`)

    def _collect_warm(self, inflight: Deque, finished: float) -> tuple[bytes, bool, float]:
        """Take the runner's answers, or its death, or the head's deadline.

        Returns (frames for potrun, whether the runner must be replaced, when the runner finished its
        last answered program). That time is the runner's own stamp, since answers may wait up to
        POLL_S to be read and the wait is no time of the next program's; a stamp later than the read
        counts as the read, so that a runner cannot buy a program more time. A program the warm runner
        may not run is forked here and then, so that answers leave in order."""
        runner = self.warm
        assert runner is not None
        try:
            data = os.read(runner.results, READ_SIZE)
        except BlockingIOError:  # nothing yet
            data = None
        now = time.perf_counter()
        if data == b"":
            head = inflight.popleft()
            return self._after_warm_death(runner, head, _started(head, finished)), True, now
        if data:
            out: list[bytes] = []
            try:
                bodies = runner.reader.feed(data)
            except ProtocolError as exc:
                self._stop_warm()
                return self._protocol_violation(inflight.popleft().message, exc, _WARM), True, now
            for body in bodies:
                flags, stamp, cpu, _ = _ANSWER.unpack_from(body)
                head = inflight.popleft()
                finished = min(stamp, now)
                if math.isfinite(cpu):
                    self._warm_cpu = cpu
                if flags & NEEDS_FORK:  # answers go out before the fork, which may take its whole time
                    if out:  # (written first: `out + run_forked(...)` held them until the fork ended)
                        self._write(b"".join(out))
                        out.clear()
                    self._write(self.run_forked(head))
                    if self.warm is None:  # replaced before the fork (`run_forked`): the rest is re-sent
                        return b"", True, time.perf_counter()
                    finished = self._resume_warm()
                else:
                    out.append(frame(body[_ANSWER.size :]))
                if flags & RECYCLE:
                    self._stop_warm()
                    return b"".join(out), True, finished
            self._clean_strays()
            return b"".join(out), False, finished
        if now >= _deadline(inflight[0], finished):
            isolation.kill_group(runner.pid)
            head = inflight.popleft()
            return self._verdict_after_kill(runner, head.message, _started(head, finished), "wall"), True, now
        return b"", False, finished

    def _resume_warm(self) -> float:
        """After a fork for the warm runner: it waited, so that no program of the worker's runs beside
        another (they share the memory cgroup and the CPU); it may go on now. Returns now, when the
        runner's next program starts."""
        if self.warm is not None:
            try:
                write_all(self.warm.requests, frame(RESUME))
            except OSError:
                pass  # a runner that died is seen at the next read
        return time.perf_counter()

    def run_forked(self, request: Request) -> bytes:
        """One program in a fresh fork of the fork server, in a fresh directory; the fork is killed with its
        group afterwards, and the directory removed. Its answer is untrusted: checked and re-encoded."""
        message = request.message
        self._limit_warm_footprint()
        scratch = self._own_directory("fork", self.entry.fork_uid)
        runner = self._fork(request)
        started = time.perf_counter()
        deadline = started + request.wall_s
        try:
            while True:
                remaining = deadline - time.perf_counter()
                if remaining <= 0:
                    isolation.kill_group(runner.pid)
                    return self._verdict_after_kill(runner, message, started, "wall")
                if not select.select([runner.results], [], [], remaining)[0]:
                    continue
                data = os.read(runner.results, READ_SIZE)
                if not data:
                    return self._verdict_after_death(runner, message, started)
                try:
                    bodies = runner.reader.feed(data)
                except ProtocolError as exc:
                    self._stop(runner)
                    return self._protocol_violation(message, exc, _FORK)
                if bodies:
                    peak = self._stop(runner)
                    if self._killed_for_memory():  # one of its processes was, whatever it answered
                        return self._memory_verdict(message, time.perf_counter() - started, 0.0, peak=peak)
                    return self._forked_answer(bodies[0], message, peak)
        finally:
            self._clean_strays()
            _remove_directory(scratch)
            if self.ipc_isolated:
                isolation.remove_ipc_objects()

    def _limit_warm_footprint(self) -> None:
        """Before a fork: replace the warm runner (idle now) if it holds more than its margin (its own
        count after each program misses its copies of the worker's pages). The fork's memory cgroup
        leaves the margin to it (`memcg.WARM_MARGIN_BYTES`): past that, what an earlier program left
        would decide the fork's memory verdict."""
        if self.warm is None or self.memory is None:
            return
        try:
            too_large = self.memory.warm_runner_too_large()
        except (OSError, ValueError):
            return
        if too_large:
            self._stop_warm()
            self.memory.measure_baseline()  # no runner lives

    def _after_warm_death(self, runner: RunnerProcess, request: Request, started: float) -> bytes:
        """The warm runner died before answering `request`. Its CPU limit, confirmed by the kernel's
        account, is the program's timeout; any other death (the OOM killer, a signal, an exit) may be
        the runner's history or have come between programs, before this one even started: the
        machinery's failure, never the program's verdict. The program then runs again in a fresh fork,
        which decides it."""
        status, cpu, _ = self._reap(runner)
        killed_for_memory = self._killed_for_memory()  # (read now, so that the fork's own count starts here)
        limit = request.message.limits.timeout_s
        if not killed_for_memory and _cpu_limit_death(status, cpu, limit):
            result = ExecResult(
                Status.TIMEOUT,
                timeout_kind="cpu",
                error=f"cpu time limit of {limit:g} s exceeded",
                isolation=_WARM,
                wall_s=time.perf_counter() - started,
                cpu_s=cpu,
            )
            return encode_result(request.message.id, result)
        return self.run_forked(request)

    def _forked_answer(self, body: bytes, request: RunRequest, peak: float | None) -> bytes:
        """A fork's answer, as potrun gets it: whatever bytes the fork wrote, only this request's result
        comes of them (its own id, a status a program can earn, plain bounded fields)."""
        try:
            if len(body) < _ANSWER.size:
                raise ProtocolError("an answer shorter than its prefix")
            held = _ANSWER.unpack_from(body)[3]
            checked = check_result(
                decode(body[_ANSWER.size :]),
                request_id=request.id,
                from_runner=True,
                output_bytes=request.limits.output_bytes,
            )
        except ProtocolError as exc:
            return self._protocol_violation(request, exc, _FORK)
        self._import(tuple(name for bit, name in enumerate(PRELOAD_ON_DEMAND) if held >> bit & 1))
        result = dataclasses.replace(checked_result(checked), isolation=_FORK, peak_rss_mb=peak)
        return encode_result(request.id, result)

    def _protocol_violation(self, request: RunRequest, exc: ProtocolError, tier: str) -> bytes:
        """The verdict on a program whose runner wrote what is not an answer: its own record only."""
        if isinstance(exc, FrameTooLarge):
            result = ExecResult(
                Status.OUTPUT_LIMIT,
                error_type="OutputLimit",
                error="the answer is larger than the output limit",
                isolation=tier,
            )
        else:
            result = ExecResult(
                Status.CRASHED,
                error_type="protocol_violation",
                error=f"the program's runner wrote what is not an answer ({str(exc)[:200]})",
                isolation=tier,
            )
        return encode_result(request.id, result)

    def _clean_strays(self) -> None:
        if not self.subreaper:
            return
        keep = {self.forks.pid} | ({self.warm.pid} if self.warm is not None else set())
        isolation.kill_strays(keep, self._children)

    def _verdict_after_kill(self, runner: RunnerProcess, request: RunRequest, started: float, kind: str) -> bytes:
        """The verdict on a runner the worker killed at the wall-clock safety net."""
        _, cpu, peak = self._reap(runner)
        limit = request.limits.wall_limit_s
        result = ExecResult(
            Status.TIMEOUT,
            timeout_kind=kind,
            error=f"{kind} time limit of {limit:g} s exceeded",
            isolation=_tier(runner),
            wall_s=time.perf_counter() - started,
            cpu_s=cpu,
            peak_rss_mb=peak,
        )
        return encode_result(request.id, result)

    def _reap(self, runner: RunnerProcess) -> tuple[int, float, float | None]:
        """Wait for a dead runner and close its pipes; return its wait status and the CPU time and peak
        resident set (MB) of the program it was running. A fork ran one program: its rusage is the
        program's (its peak counts the pre-imported interpreter's pages it touched). A warm runner ran
        many: its CPU time counts since its last answer, and its peak, which the kernel keeps one of per
        process, is not this program's (None)."""
        status, used, peak = reap_status(runner.pid) if runner.warm else self.forks.reap(runner.pid)
        self._forget(runner)
        if runner.warm:
            return status, max(0.0, used - self._warm_cpu), None
        return status, used, peak

    @staticmethod
    def _memory_verdict(
        request: RunRequest, wall: float, cpu: float, tier: str = Isolation.FORK.value, peak: float | None = None
    ) -> bytes:
        """The program, or one of its processes, was killed by the memory cgroup's OOM killer."""
        limit = request.limits.memory_mb
        result = ExecResult(
            Status.MEMORY_LIMIT,
            error_type="MemoryError",
            error=f"memory limit of {limit} MB exceeded (the memory cgroup's OOM killer)",
            wall_s=wall,
            cpu_s=cpu,
            isolation=tier,
            peak_rss_mb=peak,
        )
        return encode_result(request.id, result)

    def _verdict_after_death(self, runner: RunnerProcess, request: RunRequest, started: float) -> bytes:
        status_code, cpu, peak_mb = self._reap(runner)
        wall = time.perf_counter() - started
        measured = ExecResult(Status.CRASHED, wall_s=wall, cpu_s=cpu, isolation=_tier(runner), peak_rss_mb=peak_mb)
        cpu_limit = request.limits.timeout_s
        if os.WIFSIGNALED(status_code):
            sig = os.WTERMSIG(status_code)
            if sig == signal.SIGKILL and self._killed_for_memory():
                return self._memory_verdict(request, wall, cpu, _tier(runner), peak_mb)
            # The CPU timer's SIGPROF, the rlimit's SIGXCPU or SIGKILL, confirmed by the kernel's own
            # account of the runner's CPU time: a program that signals itself earns no timeout by it.
            if _cpu_limit_death(status_code, cpu, cpu_limit):
                verdict = dataclasses.replace(
                    measured,
                    status=Status.TIMEOUT,
                    timeout_kind="cpu",
                    error=f"cpu time limit of {cpu_limit:g} s exceeded",
                )
                return encode_result(request.id, verdict)
            name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
            return encode_result(request.id, dataclasses.replace(measured, error_type=name, error=f"killed by {name}"))
        code = os.WEXITSTATUS(status_code) if os.WIFEXITED(status_code) else -1
        verdict = dataclasses.replace(
            measured, error_type="Exit", error=f"the program ended the process (exit code {code}) before answering"
        )
        return encode_result(request.id, verdict)

    # -- runners ------------------------------------------------------------------------------------------

    def _spawn(self, request: RunRequest, key: tuple[int, int]) -> RunnerProcess:
        """A warm runner: it reads requests from a pipe until it must be replaced."""
        request_read, request_write = os.pipe()
        result_read, result_write = os.pipe()
        self._limit_memory(request)
        pid = isolation.fork()
        if pid != 0 and self._raise_oom_score:
            memcg.raise_oom_score(pid)
        if pid == 0:
            os.close(request_write)
            os.close(result_read)
            self._enter_runner(request, self.warm_scratch, (request_read, result_write), fork=False)
            _serve_warm(request_read, result_write)  # whatever the request's policy: it runs only what is proven pure
        os.close(request_read)
        os.close(result_write)
        os.set_blocking(result_read, False)  # the worker looks for answers without waiting for them
        self._warm_cpu = 0.0
        return RunnerProcess(pid, request_write, result_read, key, FrameReader(_answer_limit(request)), warm=True)

    def _fork(self, request: Request) -> RunnerProcess:
        """A fork that runs this one program, made by the fork server: it reads its request itself."""
        message = request.message
        if "numpy" in message.source:
            self._import(NUMPY)
        result_read, result_write = os.pipe()
        self._limit_memory(message)
        try:
            compiled = self._fork_runner(message.policy).compiled(message.source)
            pid = self.forks.fork(message.policy, request.body, compiled, result_write)
        except BaseException:
            os.close(result_read)
            raise
        finally:
            os.close(result_write)
        if self._raise_oom_score:
            memcg.raise_oom_score(pid)
        return RunnerProcess(pid, -1, result_read, (), FrameReader(_answer_limit(message)))

    def _fork_program(self, policy: str, request_fd: int, result_write: int) -> int:
        """In the fork server: fork a runner for one program, on its copy of the policy's runner.

        Everything that does not depend on the program is made before the fork: from the fork until
        the fork is reaped, every page this process writes is copied (it is shared with the fork), and
        Python writes to many. The program itself, the fork reads, with its code compiled by the
        worker."""
        runner = self._fork_runner(policy)
        hook = None if runner.guards is not None else self._trusted_hook
        pid = isolation.fork()
        if pid == 0:
            request = _read_request(request_fd, runner)
            runner.send = functools.partial(_send_forked, result_write, len(sys.modules))
            self._enter_runner(request, self.fork_scratch, (result_write,), fork=True)
            if request.stdin is not None or request.files:
                _stage_inputs(request)
            _run_one(runner, request, hook)
        return pid

    def _import(self, names: tuple[str, ...]) -> None:
        """Import modules of PRELOAD_ON_DEMAND, here and in the fork server, so that the next runners
        have them already."""
        missing = [name for name in names if name not in sys.modules]
        if missing:
            self._import_here(missing)
            self.forks.import_modules(missing)
            if self.memory is not None and self.warm is None:
                self.memory.measure_baseline()  # what the import holds is the worker's, not a program's

    def _import_here(self, names: list[str]) -> None:
        """Import modules in this process (the worker, or the fork server). The fork runners are made
        again, so that their guards start from what is imported now."""
        for name in names:
            importlib.import_module(name)
        self._fork_runners.clear()
        gc.freeze()

    def _limit_memory(self, request: RunRequest) -> None:
        """The memory cgroup's limit for the runner about to be made (a write only when it changes)."""
        if self.memory is not None and self.memory.owned:
            self.memory.set_limit(request.limits.memory_mb)

    def _killed_for_memory(self) -> bool:
        """Did the memory cgroup's OOM killer strike since last asked? (Then a runner's SIGKILL is its
        memory limit, not a crash.)"""
        if self.memory is None:
            return False
        try:
            kills = self.memory.oom_kills()
        except (OSError, ValueError):
            return False
        struck, self._oom_kills = kills > self._oom_kills, kills
        return struck

    def _fork_runner(self, policy: str) -> Runner:
        if policy not in self._fork_runners:
            self._fork_runners[policy] = Runner(get_policy(policy))
        return self._fork_runners[policy]

    def _enter_runner(self, request: RunRequest, cwd: str, keep_fds: tuple[int, ...], fork: bool) -> None:
        """In a new runner: enter its sandbox. Returns only to run programs: the runner never comes
        back to the worker's code, whatever happens (os._exit)."""
        try:
            self.entry.enter(cwd, request.limits.to_wire(), keep_fds, fork)
        except BaseException:
            os._exit(70)

    def _own_directory(self, name: str, uid: int | None) -> str:
        """A new directory under the worker's scratch, owned by `uid` (a runner's) and closed to
        every other (the warm runner's to forks, a fork's to the warm runner). One left behind (a
        program made it impossible to remove) stops the worker, rather than be reused."""
        path = os.path.join(self.scratch, name)
        os.mkdir(path, 0o700)
        if uid is not None:
            os.chown(path, uid, uid)
        return path

    def _stop_warm(self) -> None:
        if self.warm is not None:
            self._stop(self.warm)
            self.warm = None

    def _stop(self, runner: RunnerProcess) -> float | None:
        """Kill and reap a runner; the program's peak resident set in MB (a fork's), or None (a warm
        runner's peak is its lifetime's, not one program's)."""
        isolation.kill_group(runner.pid)
        return self._reap(runner)[2]

    def _forget(self, runner: RunnerProcess) -> None:
        for fd in (runner.requests, runner.results):
            try:
                os.close(fd)
            except OSError:
                pass
        if self.warm is runner:
            self.warm = None
            _empty_directory(self.warm_scratch)

    def close(self) -> None:
        self._stop_warm()
        if self._fork_server is not None:
            self._fork_server.close()
        if self.subreaper:
            isolation.kill_strays(set(), self._children)
        self._children.close()
        if not self.minimal_root:  # (a minimal root, its scratch included, goes with the namespace)
            if self.mounted_scratch:
                isolation.unmount(self.scratch)  # its files go with it
            _remove_tree(self.scratch)
        if self.cgroup is not None:
            self.cgroup.remove()
        if self.memory is not None:
            self.memory.close()  # (potrun removes the cgroup: the worker is still in it)

    def _write(self, data: bytes) -> None:
        self.out.write(data)
        self.out.flush()


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
        write_all(self.fd, frame(_ANSWER.pack(flags, stamp, cpu, 0) + body))

    def _room(self) -> int:
        fcntl.ioctl(self.fd, FIONREAD, self._unread, True)  # bytes the worker has not read yet
        return self.capacity - int.from_bytes(self._unread, sys.byteorder)


def _serve_warm(requests: int, results: int) -> None:
    """A warm runner's life: run the pure programs that come, answer the others with NEEDS_FORK, until
    told to stop or replaced."""
    answers = AnswerPipe(results)
    runner: Runner | None = None

    def send(message: dict[str, Any], recycle: bool) -> None:
        answers.send(dumps(message), RECYCLE if recycle else 0, runner.cpu_used)  # type: ignore[union-attr]

    code = 0
    try:
        memcg.tune_malloc()
        runner = Runner(None, send=send)

        def stop_unproven(reason: str) -> None:  # the program reached what its proof did not cover
            runner.stop_for_fork()
            answers.send(b"", NEEDS_FORK | RECYCLE, time.process_time())
            os._exit(0)

        on_unproven(stop_unproven)
        footprint = memcg.Footprint()
        checked = 0
        reader = FrameReader()
        queue: deque[bytes] = deque()
        paused = False  # after NEEDS_FORK, until the worker's RESUME: the fork runs alone
        while True:
            if paused or not queue:
                data = os.read(requests, READ_SIZE)
                if not data:
                    return
                for body in reader.feed(data):
                    if body == RESUME:
                        paused = False
                    else:
                        queue.append(body)
                continue
            request = request_message(queue.popleft())
            result, recycle = runner.run(request)
            # What the program left (a heap glibc keeps, fragments) must not decide a later one's verdict:
            # looked at after a program that took long enough to have touched the margin's worth of memory
            # (zeroing 24 MB takes longer), and every FOOTPRINT_EVERY programs for slow growth; a GSM8K
            # program takes ~12 us, the look ~2 us. The worker looks again before each fork (the cgroup).
            checked += 1
            if not recycle and (runner.last_wall_s > FOOTPRINT_AFTER_S or checked % FOOTPRINT_EVERY == 0):
                recycle = footprint.over_margin()
            if result is None:  # for a fork; after a memory verdict, this runner is replaced too
                answers.send(b"", NEEDS_FORK | (RECYCLE if recycle else 0), time.process_time())
                if recycle:
                    return
                paused = True
                continue
            send(result, recycle)
            if recycle:
                return
    except BaseException:
        code = 70
    finally:
        os._exit(code)


def _run_one(runner: Runner, request: RunRequest, audit_hook: AuditHook | None) -> None:
    """A fork's life: one program, one answer (`runner.send`, set by the worker: `_send_forked`)."""
    code = 0
    try:
        if audit_hook is not None:
            sys.addaudithook(audit_hook)
        result, recycle = runner.run(request)
        runner.send(result, recycle)  # type: ignore[misc,arg-type]
    except BaseException:
        code = 70
    finally:
        os._exit(code)


def _stage_inputs(request: RunRequest) -> None:
    """In a fork that entered its sandbox: the request's files, written into its directory as the
    program's own writes (its uid, its file size limit, its tmpfs), and its stdin, a memfd on
    descriptor 0 (a real file: `sys.stdin`, `input()` and `os.read(0, n)` all read it). Names were
    checked (`check_file_name`) and sizes bounded (INPUT_LIMIT) when the request was read."""
    try:
        for name, content in request.files:
            directory = os.path.dirname(name)
            if directory:
                os.makedirs(directory, exist_ok=True)
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
            write_all(fd, content)
            os.close(fd)
        if request.stdin is not None:
            fd = os.memfd_create("stdin")
            write_all(fd, request.stdin.encode())
            os.lseek(fd, 0, os.SEEK_SET)
            os.dup2(fd, 0)
            os.close(fd)
    except BaseException:
        os._exit(70)


def _read_request(fd: int, runner: Runner) -> RunRequest:
    """In a new fork: its request (checked by the worker already) and its compiled code, which the
    runner adopts, from the memfd the worker wrote them into."""
    try:
        body, compiled = forkserver.read_request(fd)
        request = request_message(body)
        runner.adopt(request.source, compiled)
        return request
    except BaseException:
        os._exit(70)


def _send_forked(results: int, modules: int, message: dict[str, Any], recycle: bool) -> None:
    """A fork's answer, its stamp unused (the worker waits for it). Which PRELOAD_ON_DEMAND modules the
    fork holds is looked up only if it imported any module: the worker held `modules` at the fork."""
    held = 0
    if len(sys.modules) != modules:
        held = sum(1 << bit for bit, name in enumerate(PRELOAD_ON_DEMAND) if name in sys.modules)
    body = dumps(message)
    write_all(results, frame(_ANSWER.pack(RECYCLE if recycle else 0, math.inf, math.nan, held) + body))


def _cpu_limit_death(status: int, cpu: float, limit: float) -> bool:
    """Did a runner die of its CPU limit (a limit signal, and the kernel's account of its CPU time
    confirms it: a program that signals itself earns no timeout by it)?"""
    return os.WIFSIGNALED(status) and os.WTERMSIG(status) in CPU_LIMIT_SIGNALS and cpu >= CPU_CONFIRM * limit


def _answer_limit(request: RunRequest) -> int:
    """The largest frame a runner may answer this request with."""
    return 6 * request.limits.output_bytes + ANSWER_SLACK


def _tier(runner: RunnerProcess) -> str:
    return _WARM if runner.warm else _FORK


def _started(request: Request, finished: float) -> float:
    """When a warm runner could start the request: once sent, and once done with the one before."""
    return max(request.sent, finished)


def _deadline(request: Request, finished: float) -> float:
    return _started(request, finished) + request.wall_s


def _remove_directory(path: str) -> None:
    try:
        os.rmdir(path)  # empty, as most programs leave it
    except OSError:
        _remove_tree(path)


def _remove_tree(path: str) -> None:
    """Remove what a program left, however deep: one directory open at a time, entries by name, no
    recursion (shutil.rmtree recursed into a RecursionError on 3,000 nested folders, which ended the
    worker; a path that deep is also past PATH_MAX). Each folder is read once. What cannot be removed
    stays (`_own_directory` then refuses to reuse the name)."""
    try:
        fd = os.open(path, _DIRECTORY_FLAGS)
    except OSError:
        return
    try:
        pending = [_clear_files(fd)]  # per open level: its subfolders still to remove
        names: list[str] = []  # each level's name in the level above
        while True:
            if pending[-1]:
                name = pending[-1].pop()
                child = os.open(name, _DIRECTORY_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = child
                names.append(name)
                pending.append(_clear_files(fd))
                continue
            pending.pop()
            if not names:
                break
            parent = os.open("..", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = parent
            os.rmdir(names.pop(), dir_fd=fd)
    except OSError:
        pass
    finally:
        os.close(fd)
    try:
        os.rmdir(path)
    except OSError:
        pass


_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW


def _clear_files(fd: int) -> list[str]:
    """Unlink every entry of the open folder `fd` that is not a folder; return the folders' names."""
    folders = []
    with os.scandir(fd) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                folders.append(entry.name)
            else:
                os.unlink(entry.name, dir_fd=fd)
    return folders


def _build_minimal_root(staging: str) -> bool:
    """The worker's minimal root on `staging` (potrun's scratch folder for it, empty); False, and the
    host's files seen as before, where it cannot be built (said on stderr)."""
    reveal = [*namespace.python_installation(), *namespace.loaded_library_directories()]
    try:
        return namespace.build_minimal_root(staging, reveal, isolation.SCRATCH_OPTIONS)
    except OSError as exc:
        print(f"potrun worker: no minimal root ({exc}): programs see the host's files", file=sys.stderr)
        isolation.unmount(staging)
        return False


def _fixed_hostname() -> bool:
    """Is the machine's name potrun's fixed one (a container named by `docker.container_options`)?"""
    return os.uname().nodename.encode() == isolation.HOSTNAME


def _oom_score() -> int:
    try:
        with open("/proc/self/oom_score_adj", encoding="ascii") as score:
            return int(score.read())
    except (OSError, ValueError):
        return 0


def _temporary_directory() -> str:
    import tempfile  # (it imports shutil)

    folder = tempfile.mkdtemp(prefix="potrun-worker-")
    tempfile.tempdir = None  # not inherited by forks: each program finds its own writable place, its folder
    return folder


def _empty_directory(path: str) -> None:
    for entry in os.scandir(path):
        if entry.is_dir(follow_symlinks=False):
            _remove_tree(entry.path)
        else:
            try:
                os.unlink(entry.path)
            except OSError:
                pass


def main(argv: list[str] | None = None) -> int:
    """`python -m potrun.sandbox.inside.worker [--uid-base N] [--preload A,B] [--scratch DIR]
    [--scratch-is-private]`: the backends build this command line. (Not argparse: it imports shutil,
    and with it zlib, bz2 and lzma, whose memory areas every fork of the worker would copy.)

    A root worker first makes itself init of a new PID namespace (`namespace.enter_pid_namespace`:
    from here on this is its child; the parent only waits), then builds its minimal root."""
    options = _parse_options(sys.argv[1:] if argv is None else argv)
    isolation.die_with_parent()
    host_pid = os.getpid()
    pid_namespace = os.geteuid() == 0 and namespace.enter_pid_namespace()
    worker = Worker(
        int(options.get("--uid-base", isolation.UID_BASE)),
        tuple(filter(None, options.get("--preload", ",".join(PRELOAD)).split(","))),
        options.get("--scratch"),
        "--scratch-is-private" in options,
        host_pid,
        pid_namespace,
    )
    try:
        worker.serve()
    except (BrokenPipeError, KeyboardInterrupt):
        pass
    finally:
        worker.close()
    return 0


def _parse_options(argv: list[str]) -> dict[str, str]:
    flags, valued = {"--scratch-is-private"}, {"--uid-base", "--preload", "--scratch"}
    options, rest = {}, list(argv)
    while rest:
        name = rest.pop(0)
        if name in flags:
            options[name] = ""
        elif name in valued and rest:
            options[name] = rest.pop(0)
        else:
            raise SystemExit(f"potrun.sandbox.inside.worker: unexpected argument {name!r}")
    return options


if __name__ == "__main__":
    sys.exit(main())
