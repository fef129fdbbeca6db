"""The process backend: workers are local processes (`python -s -P -m potrun.sandbox.inside.worker`)."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
import tempfile
from typing import TYPE_CHECKING

from potrun.sandbox.kernel import memcg
from potrun.sandbox.kernel.isolation import (
    PIDS_CGROUP_ROOT,
    SAFE_ENVIRONMENT,
    kill_cgroup_members,
    pids_cgroup_name,
    process_alive,
    remove_pids_cgroup,
)
from potrun.types import Isolation

if TYPE_CHECKING:
    from potrun.sandbox.api import SandboxConfig

SCRATCH_PREFIX = "potrun-worker-"  # then the pid of the potrun process that made it
_swept = False  # leftovers of dead potrun processes are removed once per process
_cpu_turns = itertools.count()  # the workers of all pools in this process take the CPUs in turn


class ProcessWorker:
    """A worker process and its pipes. Killing it kills its whole session: runners included."""

    def __init__(self, hash_seed: int, preload: tuple[str, ...] | None, cpu: int | None) -> None:
        # -s -P, not -I: -I implies -E, which would ignore the PYTHONHASHSEED we set. The environment is
        # ours entirely (SAFE_ENVIRONMENT), so nothing else from PYTHON* can leak in.
        # The worker's scratch directory is made here and removed in kill(), as workers are killed.
        self.scratch = tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-")
        command = [sys.executable, "-s", "-P", "-m", "potrun.sandbox.inside.worker", "--scratch", self.scratch]
        if preload is not None:
            command += ["--preload", ",".join(preload)]
        self.cwd = tempfile.gettempdir()
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**SAFE_ENVIRONMENT, "PYTHONHASHSEED": str(hash_seed)},
            cwd=self.cwd,
            start_new_session=True,
            bufsize=0,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        if cpu is not None:
            _pin(self.process.pid, cpu)
        self._in = self.process.stdin.fileno()
        self._out = self.process.stdout.fileno()
        os.set_blocking(self._in, False)
        self._killed = False

    def read_fd(self) -> int:
        return self._out

    def write_fd(self) -> int:
        return self._in

    def read(self) -> bytes:
        return os.read(self._out, 1 << 16)

    def write(self, data: bytes) -> int:
        if self._killed:  # its descriptors are closed, and their numbers may be another file's now
            raise BrokenPipeError("the worker was killed")
        try:
            return os.write(self._in, data)
        except BlockingIOError:
            return 0

    def kill(self) -> None:
        # Once only: after the wait its pid, and so its group's id, may be another process's.
        if self._killed:
            return
        self._killed = True
        # Sweep before killing: the processes in the worker's cgroups (runners, and the daemons of
        # programs, whatever session they made) first, then the worker's group. (A PID namespace
        # makes this structural: its init's death kills the rest; without one, this is what does.)
        kill_cgroup_members(PIDS_CGROUP_ROOT / pids_cgroup_name(self.process.pid))
        try:
            os.killpg(self.process.pid, 9)
        except (ProcessLookupError, PermissionError):
            pass
        self.process.wait()
        # What the worker cannot remove itself once killed (or, read-only, at all): its directory and
        # its cgroup, free once its runners have died with it.
        shutil.rmtree(self.scratch, ignore_errors=True)
        remove_pids_cgroup(pids_cgroup_name(self.process.pid), wait_s=0.5)
        memcg.remove(memcg.cgroup_name(self.process.pid), wait_s=0.5)
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass


class ProcessBackend:
    name = "process"

    def __init__(self, hash_seed: int = 0, preload: tuple[str, ...] | None = None, pin_cpus: bool = False) -> None:
        global _swept
        self.hash_seed = hash_seed
        self.preload = preload
        # Workers that fork for every program are kept on one CPU each (`_pin`); a warm worker is not:
        # it and its runner work at once, and gained nothing pinned.
        self.pin_cpus = pin_cpus
        self._cpus: dict[int, int | None] = {}  # each slot's CPU: a replaced worker keeps its slot's
        if not _swept:
            _swept = True
            remove_stale_leftovers()

    def start_worker(self, slot: int) -> ProcessWorker:
        if slot not in self._cpus:
            self._cpus[slot] = _next_cpu() if self.pin_cpus else None
        return ProcessWorker(self.hash_seed, self.preload, self._cpus[slot])

    def close(self) -> None:
        pass


def make_backend(config: SandboxConfig) -> ProcessBackend:
    """The process backend of `config` (backends.BACKENDS)."""
    return ProcessBackend(hash_seed=config.hash_seed, pin_cpus=config.tier is Isolation.FORK)


def unavailable(config: SandboxConfig) -> str | None:
    """None: the process backend runs wherever potrun does."""
    return None


def _next_cpu() -> int | None:
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except OSError:
        return None
    return cpus[next(_cpu_turns) % len(cpus)]


def _pin(pid: int, cpu: int) -> None:
    """Keep a worker, and the runners it forks, on one CPU. A fork write-protects the worker's pages
    and must flush them from the TLB of every CPU that the worker ran on lately: by interrupts to the
    other CPUs, which a virtual machine makes dear. Pinned, that flush stays local: a fork took 235 us
    instead of 400 us here, and a forked program 1.63 ms of CPU in all instead of 2.0 ms."""
    try:
        os.sched_setaffinity(pid, {cpu})
    except OSError:
        pass


def remove_stale_leftovers() -> int:
    """Remove what the workers of a potrun process that died left behind (a SIGKILLed potrun cannot
    clean up after them): their scratch directories, named after that process, and their empty pids
    and memory cgroups, named after the worker. Returns how many were removed."""
    removed = 0
    with os.scandir(tempfile.gettempdir()) as entries:
        for entry in entries:
            owner = entry.name[len(SCRATCH_PREFIX) :].partition("-")[0]
            if entry.name.startswith(SCRATCH_PREFIX) and owner.isdigit() and not process_alive(int(owner)):
                shutil.rmtree(entry.path, ignore_errors=True)
                removed += 1
    try:
        cgroups = [name for name in os.listdir(PIDS_CGROUP_ROOT) if name.startswith("potrun-")]
    except OSError:
        cgroups = []
    for name in cgroups:
        worker = name.partition("-")[2]
        if worker.isdigit() and not process_alive(int(worker)):
            removed += remove_pids_cgroup(name)
    for name in memcg.cgroup_names():
        worker = name.partition("-")[2]
        if worker.isdigit() and not process_alive(int(worker)):
            removed += memcg.remove(name)
    return removed
