"""The worker: `python -s -P -m potrun.sandbox.inside.worker`, the same program on the host and in a container.

It imports the allowlisted modules once (numpy once its programs need it), isolates itself (init of
its own PID namespace, an empty network namespace, a subreaper, pids and memory cgroups, a minimal
root, non-dumpable, a seccomp filter, where the machine has them), then reads run requests as frames
on stdin and answers on stdout. It never runs a program itself: each program runs in a runner forked
from it (the warm runner) or from its fork server (`forkserver`: a copy of it that never holds a
program; or from a template of it that holds the heavy modules the program imports: `templates`), so
that the worker can enforce the limits from outside. The CPU limit, which decides a timeout,
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
import functools
import gc
import importlib
import math
import os
import select
import signal
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from potrun.policies import POLICY_NAMES, STDLIB_MODULES, get_policy
from potrun.policies.pure import prepare_proxies
from potrun.policies.restricted import close_sympy_escape_hatches
from potrun.sandbox.inside import cputimer
from potrun.sandbox.inside.answers import (
    ANSWER,
    ANSWER_SLACK,
    NEEDS_FORK,
    NUMPY,
    READ_SIZE,
    RECYCLE,
    RESUME,
)
from potrun.sandbox.inside.containment import Containment
from potrun.sandbox.inside.forked import read_request, run_one, send_forked, stage_inputs
from potrun.sandbox.inside.forkserver import ForkServer, reap_status
from potrun.sandbox.inside.runner import Runner, trusted_audit_hook
from potrun.sandbox.inside.templates import TEMPLATE_TASKS, Templates, templates_allowed
from potrun.sandbox.inside.templates import profile as template_profile
from potrun.sandbox.inside.templates import warm as warm_template
from potrun.sandbox.inside.warm import serve_warm
from potrun.sandbox.kernel import isolation, memcg, namespace
from potrun.sandbox.kernel.scratch import (
    empty_directory,
    remove_directory,
)
from potrun.sandbox.wire.command import parse_options
from potrun.sandbox.wire.protocol import (
    EXIT,
    RUN_TIERED,
    FrameReader,
    FrameTooLarge,
    Hello,
    ProtocolError,
    RunRequest,
    check_result,
    checked_result,
    decode,
    encode,
    encode_result,
    frame,
    request_header,
    request_message,
    write_all,
)
from potrun.types import ExecResult, Isolation, Status

PRELOAD = STDLIB_MODULES  # the allowed standard modules, imported before any program
WARM_QUEUE = 64  # requests streamed ahead to a warm runner...
# ...holding at most this many bytes, half a pipe: the worker's writes to the runner never block then
# (only a lone request may be larger, and the runner, idle, reads it), so the worker always comes back
# to read answers, and a runner blocked on writing a large answer cannot block it in turn.
WARM_QUEUE_BYTES = 32 * 1024
POLL_S = 0.002  # how often, at most, the worker looks for a warm runner's answers while they flow...
SMALL_ANSWER = WARM_QUEUE_BYTES // WARM_QUEUE  # ...if they are no larger than this (bytes, on average)
# A runner's death by one of these is its CPU limit (the timer's SIGPROF; RLIMIT_CPU's SIGXCPU, or
# SIGKILL where soft = hard) when its rusage shows at least CPU_CONFIRM of the limit: the exact timer
# ends it at or just past the limit; the setitimer fallback (`cputimer`) counts by the tick, and was
# seen to end a program at 0.93 of its limit on a heavily loaded machine.
CPU_LIMIT_SIGNALS = frozenset({cputimer.SIGNAL, signal.SIGXCPU, signal.SIGKILL})
CPU_CONFIRM = 0.8
_WARM, _FORK = Isolation.WARM.value, Isolation.FORK.value  # the tiers, as a result names them


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
    server: ForkServer | None = None  # the server (fork server or template) that forked it and reaps it


class Worker(Containment):
    def __init__(
        self,
        uid_base: int | None,
        preload: tuple[str, ...],
        scratch: str | None = None,
        scratch_is_private: bool = False,
        host_pid: int | None = None,
        pid_namespace: bool = False,
    ) -> None:
        """Contain this process (`Containment`), then hold the state of its runners."""
        super().__init__(uid_base, preload, scratch, scratch_is_private, host_pid, pid_namespace)
        self.warm: RunnerProcess | None = None
        self._warm_cpu = 0.0  # the warm runner's CPU time at its last answer (its own stamp)
        self._fork_runners: dict[str, Runner] = {}  # by policy, made once: each fork runs its own copy
        self._trusted_hook = trusted_audit_hook(self.network_isolated)  # added by each trusted fork
        self._open_input = True  # until potrun asks the worker to exit
        # Everything imported so far lives as long as the worker: keep the collector off those pages,
        # so that runners forked from here copy fewer of them.
        gc.freeze()
        self._fork_server: ForkServer | None = None  # started by `serve`...
        self._templates: Templates | None = None  # ...with the registry of its templates
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

    @property
    def templates(self) -> Templates:
        if self._templates is None:
            raise RuntimeError("the templates start with serve()")
        return self._templates

    def hello(self) -> dict[str, Any]:
        capabilities = self.capabilities()
        return Hello(
            pid=os.getpid(),
            host_pid=self.host_pid,
            fork_server_pid=self.forks.pid,  # the parent of every forked program
            python=sys.version.split()[0],
            capabilities=capabilities.to_dict(),
        ).to_wire()

    # -- the loop --------------------------------------------------------------------------------------

    def serve(self) -> None:
        """Read requests, run them in order, answer in order. Warm requests are streamed to the runner
        up to WARM_QUEUE ahead, so it never waits for a round trip; each still gets its full time,
        counted from when the runner could start it: when it was sent, or when the runner finished the
        program before it, whichever came later."""
        # Before any request: every forked program is forked from this copy of the worker, which never
        # holds a program (`forkserver`). (Started from here, a plain call from `main`, its forks have
        # as many frames under the program as the warm runner: the recursion depth is the same.)
        slots = TEMPLATE_TASKS if templates_allowed(self.memory) else 0  # (no placeholders in a container)
        self._fork_server = ForkServer.start(self._fork_program, self._make_template, self.entry.devnull, slots)
        self._templates = Templates(self._fork_server, self.memory)
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
                flags, stamp, cpu, _ = ANSWER.unpack_from(body)
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
                    out.append(frame(body[ANSWER.size :]))
                if flags & RECYCLE:
                    self._stop_warm()
                    return b"".join(out), True, finished
            self._clean_strays()
            return b"".join(out), False, finished
        if now >= _deadline(inflight[0], finished):
            stopped = isolation.process_stopped(runner.pid)
            isolation.kill_group(runner.pid)
            head = inflight.popleft()
            if stopped:  # a signal from outside stopped the runner: the machinery's failure, a fork decides
                self._reap(runner)
                return self.run_forked(head), True, time.perf_counter()
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
            remove_directory(scratch)
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
            if len(body) < ANSWER.size:
                raise ProtocolError("an answer shorter than its prefix")
            checked = check_result(
                decode(body[ANSWER.size :]),
                request_id=request.id,
                from_runner=True,
                output_bytes=request.limits.output_bytes,
            )
        except ProtocolError as exc:
            return self._protocol_violation(request, exc, _FORK)
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
        status, used, peak = reap_status(runner.pid) if runner.server is None else runner.server.reap(runner.pid)
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
            self._enter_runner(request, self.warm_scratch, (request_read, result_write), False, memcg.address_space())
            serve_warm(request_read, result_write)  # whatever the request's policy: it runs only what is proven pure
        os.close(request_read)
        os.close(result_write)
        os.set_blocking(result_read, False)  # the worker looks for answers without waiting for them
        self._warm_cpu = 0.0
        return RunnerProcess(pid, request_write, result_read, key, FrameReader(_answer_limit(request)), warm=True)

    def _fork(self, request: Request) -> RunnerProcess:
        """A fork that runs this one program, made by the fork server or by the template that holds what
        the program imports (`templates`): it reads its request itself."""
        message = request.message
        compiled, code = self._fork_runner(message.policy).compiled(message.source)
        modules = template_profile(code, get_policy(message.policy), message.source)
        server = self.templates.server_for(modules, message.limits.memory_mb, request.wall_s)
        result_read, result_write = os.pipe()
        self._limit_memory(message)
        try:
            try:
                pid = server.fork(message.policy, request.body, compiled, result_write)
            except ConnectionError:
                if server is self.forks:
                    raise
                self.templates.drop(server)  # it died: the program forks bare, and imports what it needs
                self._limit_memory(message)
                server = self.forks
                pid = server.fork(message.policy, request.body, compiled, result_write)
        except BaseException:
            os.close(result_read)
            raise
        finally:
            os.close(result_write)
        if self._raise_oom_score:
            memcg.raise_oom_score(pid)
        return RunnerProcess(pid, -1, result_read, (), FrameReader(_answer_limit(message)), server=server)

    def _fork_program(self, policy: str, request_fd: int, result_write: int) -> int:
        """In the fork server: fork a runner for one program, on its copy of the policy's runner.

        Everything that does not depend on the program is made before the fork: from the fork until
        the fork is reaped, every page this process writes is copied (it is shared with the fork), and
        Python writes to many. The program itself, the fork reads, with its code compiled by the
        worker."""
        runner = self._fork_runner(policy)
        hook = None if runner.guards is not None else self._trusted_hook
        address_space = memcg.address_space()  # what the fork holds before its program: not the program's
        pid = isolation.fork()
        if pid == 0:
            request = read_request(request_fd, runner)
            runner.send = functools.partial(send_forked, result_write, len(sys.modules))
            self._enter_runner(request, self.fork_scratch, (result_write,), True, address_space)
            if request.stdin is not None or request.files:
                stage_inputs(request)
            run_one(runner, request, hook)
        return pid

    def _import(self, names: tuple[str, ...]) -> None:
        """Import modules of NUMPY here, for the warm runner (never in the fork server: `templates`)."""
        missing = [name for name in names if name not in sys.modules]
        if missing:
            self._import_here(missing)
            if self.memory is not None and self.warm is None:
                self.memory.measure_baseline()  # what the import holds is the worker's, not a program's

    def _import_here(self, names: list[str]) -> None:
        """Import modules in this process (the worker, or a new template). The fork runners are made
        again, so that their guards start from what is imported now."""
        for name in names:
            importlib.import_module(name)
        self._fork_runners.clear()
        gc.freeze()

    def _make_template(self, modules: list[str], restricted: bool) -> None:
        """In a new template (a fork of the fork server): import the modules, warm their caches, make the
        fork runners, and keep the collector off all of it, so that its forks copy fewer pages. One for
        restricted programs only closes sympy's escape hatches once, here, for all its forks."""
        self._import_here(modules)
        warm_template(modules)
        if restricted:
            close_sympy_escape_hatches()
        for policy in POLICY_NAMES:
            self._fork_runner(policy)
        gc.collect()
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

    def _enter_runner(
        self, request: RunRequest, cwd: str, keep_fds: tuple[int, ...], fork: bool, address_space: int
    ) -> None:
        """In a new runner: enter its sandbox. Returns only to run programs: the runner never comes
        back to the worker's code, whatever happens (os._exit). `address_space`: the bytes it was
        forked with, which its RLIMIT_AS adds to the program's memory limit."""
        try:
            self.entry.enter(cwd, request.limits.to_wire(), keep_fds, fork, address_space)
        except BaseException:
            os._exit(70)

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
            empty_directory(self.warm_scratch)

    def close(self) -> None:
        self._stop_warm()
        if self._templates is not None:
            self._templates.close()
        if self._fork_server is not None:
            self._fork_server.close()
        self.release()

    def _write(self, data: bytes) -> None:
        self.out.write(data)
        self.out.flush()


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


def main(argv: list[str] | None = None) -> int:
    """The worker's command line (`command`: the backends build it there).

    A root worker first makes itself init of a new PID namespace (`namespace.enter_pid_namespace`:
    from here on this is its child; the parent only waits), then builds its minimal root."""
    options = parse_options(sys.argv[1:] if argv is None else argv)
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


if __name__ == "__main__":
    sys.exit(main())
