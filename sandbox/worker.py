"""The worker: `python -I -m potrun.sandbox.worker`, the same program on the host and in a container.

It imports numpy and the allowlisted modules once, isolates itself (an empty network namespace, a
subreaper, a pids cgroup where the machine has them), then reads run requests as frames on stdin and
answers on stdout. It never runs a program itself: each program runs in a runner forked from it, so
that the worker can enforce the limits from outside. The wall-clock limit is SIGKILL of the runner's
process group; the CPU limit is RLIMIT_CPU; memory is RLIMIT_AS; processes are the pids cgroup (or
RLIMIT_NPROC when the runner is not root). A runner that ran out of time, crashed, or was left in a
state that the next program could see is killed and replaced by a fresh fork: a few milliseconds.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import os
import select
import shutil
import signal
import sys
import tempfile
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from potrun.policies import get_policy
from potrun.sandbox import isolation
from potrun.sandbox.protocol import PROTOCOL_VERSION, FrameReader, decode, encode, frame
from potrun.sandbox.runner import Runner, install_trusted_guard

PRELOAD = (
    "math", "cmath", "statistics", "fractions", "decimal", "datetime", "itertools", "functools",
    "collections", "operator", "re", "string", "random", "heapq", "bisect", "copy", "numpy",
    "numpy.linalg", "numpy.random", "numpy.fft", "numpy.polynomial",
)  # fmt: skip
MAX_PROCESSES = 32  # a program's processes, capped by the worker's pids cgroup
WARM_QUEUE = 32  # requests streamed ahead to a warm runner
RECYCLE = b"\x01"
Deque = deque[tuple[dict[str, Any], bytes]]  # requests and their frame bodies, in order
KEEP = b"\x00"


@dataclass
class RunnerProcess:
    """A forked runner and the pipes to it."""

    pid: int
    requests: int  # fd we write requests to (warm runners only)
    results: int  # fd we read results from
    key: tuple[Any, ...]
    reader: FrameReader = field(default_factory=FrameReader)


class Worker:
    def __init__(self, slot: int, uid_base: int | None, preload: tuple[str, ...]) -> None:
        for name in preload:
            try:
                importlib.import_module(name)
            except ImportError:
                pass
        self.network_isolated = isolation.unshare_network()
        self.subreaper = isolation.set_subreaper()
        # The worker joins the cgroup itself: runners inherit it at fork, with no per-fork migration.
        self.cgroup = isolation.PidsCgroup.try_create(f"potrun-{os.getpid()}", MAX_PROCESSES + 2)
        if self.cgroup is not None:
            self.cgroup.enter()
        self.processes_capped = self.cgroup is not None or isolation.under_pids_limit()
        drop = uid_base is not None and os.geteuid() == 0 and isolation.python_reachable_by_others()
        self.uid = uid_base + slot if drop and uid_base is not None else None
        self.scratch = tempfile.mkdtemp(prefix="potrun-worker-")
        if self.uid is not None:
            os.chown(self.scratch, self.uid, self.uid)
        self.warm: RunnerProcess | None = None
        # Everything imported so far lives as long as the worker: keep the collector off those pages,
        # so that runners forked from here copy fewer of them.
        gc.freeze()
        self.out = sys.stdout.buffer

    def hello(self) -> dict[str, Any]:
        capabilities = isolation.Capabilities(
            network_namespace=self.network_isolated,
            pids_cgroup=self.cgroup is not None,
            drop_privileges=self.uid is not None,
            subreaper=self.subreaper,
        )
        return {"op": "hello", "pid": os.getpid(), "protocol": PROTOCOL_VERSION,
                "python": sys.version.split()[0], "capabilities": capabilities.to_dict()}  # fmt: skip

    # -- the loop --------------------------------------------------------------------------------------

    def serve(self) -> None:
        """Read requests, run them in order, answer in order. Warm requests are streamed to the runner
        up to WARM_QUEUE ahead, so it never waits for a round trip; each still gets its full time."""
        self._write(encode(self.hello()))
        stdin = sys.stdin.buffer.fileno()
        reader = FrameReader()
        pending: deque[tuple[dict[str, Any], bytes]] = deque()  # (request, its frame body)
        inflight: deque[tuple[dict[str, Any], bytes]] = deque()
        head_started = 0.0
        open_input = True
        while open_input or pending or inflight:
            if not inflight and pending and not _is_warm(pending[0][0]):
                self._write(self.run_forked(pending.popleft()[0]))
                continue
            if not inflight:
                head_started = time.perf_counter()
            self._dispatch_warm(pending, inflight)
            watched = [stdin] if open_input else []
            timeout = None
            if inflight:
                watched.append(self.warm.results)  # type: ignore[union-attr]
                timeout = max(0.0, head_started + inflight[0][0]["limits"]["timeout_s"] - time.perf_counter())
            elif not open_input:
                continue
            ready, _, _ = select.select(watched, [], [], timeout)
            if stdin in ready:
                data = os.read(stdin, 1 << 20)
                if not data:
                    return  # potrun is gone: nobody is left to read the answers
                for body in reader.feed(data):
                    message = decode(body)
                    if message.get("op") == "exit":
                        open_input = False
                    elif message.get("op") == "run":
                        pending.append((message, body))
            if inflight:
                out, restart = self._collect_warm(inflight, ready, head_started)
                if out:
                    head_started = time.perf_counter()
                    self._write(out)
                if restart:
                    pending.extendleft(reversed(inflight))
                    inflight.clear()

    def _dispatch_warm(self, pending: Deque, inflight: Deque) -> None:
        """Send warm requests that share the runner's settings, up to WARM_QUEUE in flight; the
        request's frame goes on as it came, not decoded and encoded again."""
        batch = []
        while pending and len(inflight) < WARM_QUEUE and _is_warm(pending[0][0]):
            key = _runner_key(pending[0][0])
            if self.warm is None or (self.warm.key != key and not inflight):
                self._stop_warm()
                self.warm = self._spawn(pending[0][0], warm=True)
            elif self.warm.key != key:
                break
            request, body = pending.popleft()
            inflight.append((request, body))
            batch.append(frame(body))
        if batch:
            _write_all(self.warm.requests, b"".join(batch))  # type: ignore[union-attr]

    def _collect_warm(self, inflight: Deque, ready: list[int],
                      head_started: float) -> tuple[bytes, bool]:  # fmt: skip
        """Take the runner's answers, or its death, or the head's deadline. Returns (frames, restart)."""
        runner = self.warm
        assert runner is not None
        if runner.results in ready:
            data = os.read(runner.results, 1 << 20)
            if not data:
                return self._verdict_after_death(runner, inflight.popleft()[0], head_started), True
            out = []
            for body in runner.reader.feed(data):
                inflight.popleft()
                out.append(frame(body[1:]))
                if body[:1] == RECYCLE:
                    self._stop_warm()
                    return b"".join(out), True
            self._clean_strays()
            return b"".join(out), False
        if time.perf_counter() >= head_started + inflight[0][0]["limits"]["timeout_s"]:
            isolation.kill_group(runner.pid)
            return self._verdict_after_kill(runner, inflight.popleft()[0], head_started, "wall"), True
        return b"", False

    def run_forked(self, request: dict[str, Any]) -> bytes:
        """One program in a fresh fork of this worker; the fork is killed with its group afterwards."""
        runner = self._spawn(request, warm=False)
        started = time.perf_counter()
        deadline = started + request["limits"]["timeout_s"]
        try:
            while True:
                remaining = deadline - time.perf_counter()
                if remaining <= 0:
                    isolation.kill_group(runner.pid)
                    return self._verdict_after_kill(runner, request, started, "wall")
                if not select.select([runner.results], [], [], remaining)[0]:
                    continue
                data = os.read(runner.results, 1 << 20)
                if not data:
                    return self._verdict_after_death(runner, request, started)
                bodies = runner.reader.feed(data)
                if bodies:
                    self._stop(runner)
                    return frame(bodies[0][1:])
        finally:
            self._clean_strays()

    def _clean_strays(self) -> None:
        if self.subreaper:
            isolation.kill_strays({self.warm.pid} if self.warm is not None else set())

    def _verdict_after_kill(self, runner: RunnerProcess, request: dict[str, Any], started: float,
                            kind: str) -> bytes:  # fmt: skip
        usage = _reap(runner.pid)
        self._forget(runner)
        limit = request["limits"]["timeout_s"]
        return encode({"op": "result", "id": request.get("id"), "status": "timeout", "timeout_kind": kind,
                       "error": f"{kind} time limit of {limit:g} s exceeded",
                       "wall_s": time.perf_counter() - started, "cpu_s": usage})  # fmt: skip

    def _verdict_after_death(self, runner: RunnerProcess, request: dict[str, Any], started: float) -> bytes:
        status_code, cpu = _reap_status(runner.pid)
        self._forget(runner)
        wall = time.perf_counter() - started
        base = {"op": "result", "id": request.get("id"), "wall_s": wall, "cpu_s": cpu}
        if os.WIFSIGNALED(status_code):
            sig = os.WTERMSIG(status_code)
            if sig == signal.SIGXCPU or (sig == signal.SIGKILL and cpu >= request["limits"]["cpu_s"]):
                return encode({**base, "status": "timeout", "timeout_kind": "cpu",
                               "error": f"cpu time limit of {request['limits']['cpu_s']:g} s exceeded"})
            name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
            return encode({**base, "status": "crashed", "error_type": name, "error": f"killed by {name}"})
        code = os.WEXITSTATUS(status_code) if os.WIFEXITED(status_code) else -1
        return encode({**base, "status": "crashed", "error_type": "Exit",
                       "error": f"the program ended the process (exit code {code}) before answering"})

    # -- runners ------------------------------------------------------------------------------------------

    def _spawn(self, request: dict[str, Any], warm: bool) -> RunnerProcess:
        request_read, request_write = os.pipe()
        result_read, result_write = os.pipe()
        limits = request["limits"]
        pid = os.fork()
        if pid == 0:  # the runner
            code = 0
            try:
                os.close(request_write)
                os.close(result_read)
                nproc = None if self.processes_capped else limits["max_processes"]
                isolation.enter_runner(memory_mb=limits["memory_mb"], max_processes=nproc,
                                       uid=self.uid, keep_fds=(request_read, result_write))  # fmt: skip
                _runner_main(request, request_read, result_write, warm, self.scratch, self.network_isolated)
            except BaseException:
                code = 70
            finally:
                os._exit(code)
        os.close(request_read)
        os.close(result_write)
        return RunnerProcess(pid, request_write, result_read, _runner_key(request))

    def _stop_warm(self) -> None:
        if self.warm is not None:
            self._stop(self.warm)
            self.warm = None

    def _stop(self, runner: RunnerProcess) -> None:
        isolation.kill_group(runner.pid)
        _reap(runner.pid)
        self._forget(runner)

    def _forget(self, runner: RunnerProcess) -> None:
        for fd in (runner.requests, runner.results):
            try:
                os.close(fd)
            except OSError:
                pass
        if self.warm is runner:
            self.warm = None
            _empty_directory(self.scratch)

    def close(self) -> None:
        self._stop_warm()
        if self.subreaper:
            isolation.kill_strays(set())
        shutil.rmtree(self.scratch, ignore_errors=True)
        if self.cgroup is not None:
            self.cgroup.remove()

    def _write(self, data: bytes) -> None:
        self.out.write(data)
        self.out.flush()


def _runner_main(first: dict[str, Any], requests: int, results: int, warm: bool, scratch: str,
                 network_isolated: bool) -> None:  # fmt: skip
    def send(result: dict[str, Any], recycle: bool) -> None:
        result.setdefault("op", "result")
        _write_all(results, frame((RECYCLE if recycle else KEEP) + json.dumps(result).encode()))

    policy = get_policy(first["policy"])
    if not policy.restricted:
        install_trusted_guard(network_isolated)
    runner = Runner(policy, send, scratch)
    if not warm:
        result, recycle = runner.run(first)
        send(result, recycle)
        return
    reader = FrameReader()
    while True:
        data = os.read(requests, 1 << 20)
        if not data:
            return
        for body in reader.feed(data):
            result, recycle = runner.run(decode(body))
            send(result, recycle)
            if recycle:
                return


def _is_warm(request: dict[str, Any]) -> bool:
    return request.get("policy") == "restricted" and request.get("isolation", "warm") == "warm"


def _runner_key(request: dict[str, Any]) -> tuple[Any, ...]:
    limits = request["limits"]
    return request.get("policy"), limits["memory_mb"], limits["max_processes"]


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _reap(pid: int) -> float:
    return _reap_status(pid)[1]


def _reap_status(pid: int) -> tuple[int, float]:
    """Wait for a runner; return its wait status and the CPU seconds it used."""
    try:
        _, status, usage = os.wait4(pid, 0)
    except ChildProcessError:
        return 0, 0.0
    return status, usage.ru_utime + usage.ru_stime


def _empty_directory(path: str) -> None:
    for entry in os.scandir(path):
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)
        else:
            try:
                os.unlink(entry.path)
            except OSError:
                pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="potrun.sandbox.worker")
    parser.add_argument("--slot", type=int, default=0)
    parser.add_argument("--uid-base", type=int, default=isolation.SLOT_UID_BASE)
    parser.add_argument("--preload", default=",".join(PRELOAD))
    args = parser.parse_args(argv)
    isolation.die_with_parent()
    worker = Worker(args.slot, args.uid_base, tuple(filter(None, args.preload.split(","))))
    try:
        worker.serve()
    except (BrokenPipeError, KeyboardInterrupt):
        pass
    finally:
        worker.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
