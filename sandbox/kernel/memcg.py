"""A memory cgroup per worker: one limit on all that a program holds, in all its processes.

RLIMIT_AS limits each process's address space: eight children of 200 MB each, or memfds and tmpfs
files (which no address space holds), pass it. A memory cgroup charges every page its processes
fault or write, memfd and tmpfs pages included, and its OOM killer stops the program at the limit.

Moving each fork into a cgroup (writing cgroup.procs) costs every fork (below), so the worker joins
the cgroup itself, once, after its imports: v1 does not move charges already made, so what it
imported stays charged outside, and what its runners use is charged inside, for free at fork. The
limit is the program's memory_mb plus what the cgroup holds while no runner lives (the worker's own
later allocations: an on-demand numpy import, its buffers), re-read only when that changes. The
worker makes itself the OOM killer's last choice where it may (oom_score_adj -1000 needs
CAP_SYS_RESOURCE) and raises each runner's to 1000 just after the fork, so that the killer takes the
program, not the worker. A program during which the `oom_kill` count grew (its runner, or any of its
processes, was killed) is `memory_limit`.

Cost (measured in fresh forks of a 30 MB process, cgroup v1, kernel 6.18 here): moving the fork in
by writing cgroup.procs took ~110 us, ~13 us of it the kernel's, the rest the fork's page faults;
joining once costs a fork nothing. The worker's one pread of the OOM count per fork is ~2 us.

cgroup v1 (memory controller mounted at /sys/fs/cgroup/memory): memory.limit_in_bytes, and
memory.memsw.limit_in_bytes where swap accounting is on (no swap on top); OOM kills counted in
memory.oom_control. cgroup v2 (/sys/fs/cgroup with a `memory` controller): memory.max,
memory.swap.max 0, memory.events. Neither (no root, no controller): `try_create` returns None and
RLIMIT_AS stays the only limit, as `potrun doctor` says.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

from potrun.sandbox.kernel import isolation

V1_ROOT = Path("/sys/fs/cgroup/memory")
V2_ROOT = Path("/sys/fs/cgroup")
SLACK_BYTES = 16 * 1024 * 1024  # page tables, kernel stacks and the runner's pipes, above its own memory
OOM_SCORE_WORKER = -1000  # never the OOM killer's choice...
OOM_SCORE_RUNNER = 1000  # ...its runners always first
_READ = 4096
_STAT_READ = 8192  # memory.stat: its anonymous count is among its first lines
_RUNNER_SCORE = str(OOM_SCORE_RUNNER).encode()


class MemoryCgroup:
    """One worker's memory cgroup (v1 or v2), joined by the worker; see the module's docstring."""

    def __init__(self, path: Path, version: int, owned: bool = True) -> None:
        self.path = path
        self.version = version
        self.owned = owned  # made by us, limited by us; else only watched (a container's own cgroup)
        if owned:
            self.path.mkdir(exist_ok=True)
        names = (
            ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes", "memory.oom_control")
            if version == 1
            else ("memory.max", "memory.swap.max", "memory.events")
        )
        self._limit_file, self._swap_file, events = (str(path / name) for name in names)
        self._swap = os.path.exists(self._swap_file)
        self.limit: int | None = None
        self.baseline = 0  # bytes charged here while no runner lives
        # Kept open: the worker reads it after a runner's death, from inside a root that has no /sys.
        self._events = os.open(events, os.O_RDONLY | os.O_CLOEXEC)
        self._usage = os.open(
            str(path / ("memory.usage_in_bytes" if version == 1 else "memory.current")), os.O_RDONLY | os.O_CLOEXEC
        )
        # Anonymous memory only (no page cache, no tmpfs): what a warm runner's heap and copies hold.
        try:
            self._stat = os.open(str(path / "memory.stat"), os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            self._stat = -1  # (the warm runner's own count after each program still holds it to its margin)
        self._anonymous_key = b"rss " if version == 1 else b"anon "
        self.anonymous_baseline = 0  # anonymous bytes charged here while no runner lives
        self._limit_fd = os.open(self._limit_file, os.O_WRONLY | os.O_CLOEXEC) if owned else -1
        self._swap_fd = os.open(self._swap_file, os.O_WRONLY | os.O_CLOEXEC) if owned and self._swap else -1

    @classmethod
    def try_create(cls, name: str) -> MemoryCgroup | None:
        """The cgroup `name` under this process's own memory cgroup, or None where there is none to
        make (not root, no memory controller, a read-only cgroup file system as in a container)."""
        if os.geteuid() != 0:
            return None
        found = _own_cgroup()
        if found is None:
            return None
        parent, version = found
        try:
            return cls(parent / name, version)
        except OSError:
            return None

    @classmethod
    def watch_own(cls) -> MemoryCgroup | None:
        """This process's own memory cgroup, only watched for OOM kills (a container's, whose limit
        the engine set): None where it cannot be read."""
        found = _own_cgroup(need_children=False)
        if found is None:
            return None
        try:
            return cls(*found, owned=False)
        except OSError:
            return None

    def enter(self) -> None:
        """Join it: this process's future children are charged here (its past pages are not, on v1)."""
        (self.path / "cgroup.procs").write_text("0")

    def oom_kills(self) -> int:
        """How many processes the OOM killer took in this cgroup so far."""
        text = os.pread(self._events, _READ, 0).decode()
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def usage(self) -> int:
        return int(os.pread(self._usage, 64, 0))

    def measure_baseline(self) -> None:
        """Take what is charged now (no runner alive) as the worker's share, which the limit adds to."""
        self.baseline = self.usage()
        self.anonymous_baseline = self.anonymous()

    def anonymous(self) -> int:
        """Anonymous bytes charged here (memory.stat's rss on v1, anon on v2; ~25 us): no page cache,
        which the kernel reclaims before any OOM kill, and no tmpfs or memfd pages."""
        if self._stat < 0:
            return 0
        text = b"\n" + os.pread(self._stat, _STAT_READ, 0)
        start = text.find(b"\n" + self._anonymous_key)
        if start < 0:
            return 0
        start += len(self._anonymous_key) + 1
        return int(text[start : text.index(b"\n", start) if b"\n" in text[start:] else None])

    def warm_runner_too_large(self) -> bool:
        """Does the cgroup hold more anonymous memory than while no runner lived, by over the warm
        runner's margin? Asked with the warm runner idle and no fork alive: the excess is the warm
        runner's (its heap, and its copies of the worker's pages, which its own count cannot see)."""
        return self.anonymous() - self.anonymous_baseline > WARM_MARGIN_BYTES

    def set_limit(self, memory_mb: int) -> None:
        """Limit the cgroup to `memory_mb` for the program plus the worker's share and the warm runner's
        (WARM_MARGIN_BYTES: it is replaced beyond it); written only when it changes. Swap (memsw on v1)
        limited alike, so that nothing is swapped out past the limit."""
        limit = memory_mb * 1024 * 1024 + self.baseline + SLACK_BYTES + WARM_MARGIN_BYTES
        if not self.owned or limit == self.limit:
            return
        value = str(limit).encode()
        swap = value if self.version == 1 else b"0"
        # v1 wants memsw >= memory at every moment: raise memsw first, lower it last (the first limit
        # lowers both from unlimited).
        raising = self.limit is not None and limit > self.limit
        if self._swap and raising:
            _write(self._swap_fd, swap)
        _write(self._limit_fd, value)
        if self._swap and not raising:
            _write(self._swap_fd, swap)
        self.limit = limit

    def close(self) -> None:
        for fd in (self._events, self._usage, self._stat, self._limit_fd, self._swap_fd):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass


def _write(fd: int, value: bytes) -> None:
    os.pwrite(fd, value, 0)


def _own_cgroup(need_children: bool = True) -> tuple[Path, int] | None:
    """This process's memory cgroup folder, and the cgroup version, if it may have children (or,
    without `need_children`, if it can be read at all). In a container the folder is its own,
    mounted at the root of the hierarchy."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(",") and (V1_ROOT / "cgroup.procs").exists():
            folder = V1_ROOT / path.lstrip("/")
            if not need_children and not folder.exists():
                folder = V1_ROOT  # a container: its own cgroup is the root it sees
            return folder, 1
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "" and "memory" in _read(V2_ROOT / "cgroup.controllers").split():
            folder = V2_ROOT / path.lstrip("/")
            if not need_children:
                return (folder if folder.exists() else V2_ROOT), 2
            # v2: a cgroup with processes may not give controllers to children ("no internal processes")
            return (folder, 2) if "memory" in _read(folder / "cgroup.subtree_control").split() else None
    return None


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def cgroup_name(host_pid: int) -> str:
    return f"potrun-{host_pid}"


def cgroup_names() -> list[str]:
    """The workers' memory cgroups under this process's own (live workers' and leftovers)."""
    found = _own_cgroup()
    try:
        return [name for name in os.listdir(found[0]) if name.startswith("potrun-")] if found else []
    except OSError:
        return []


def remove(name: str, wait_s: float = 0.0) -> bool:
    """Remove a worker's memory cgroup once its last process is gone, waiting up to `wait_s` for that
    (a killed worker's runners die with it, a moment later); whether it is gone."""
    found = _own_cgroup()
    return True if found is None else isolation.remove_cgroup(found[0] / name, wait_s)


def raise_oom_score(pid: int) -> None:
    """Make a runner the OOM killer's first choice (OOM_SCORE_RUNNER): written by its worker just
    after the fork (raising a score needs no privilege). The runner may lower it again, to its
    worker's at most: then, against memfds that count in no process's resident set, the killer may
    take the worker (the pool replaces it)."""
    try:
        fd = os.open(f"/proc/{pid}/oom_score_adj", os.O_WRONLY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.write(fd, _RUNNER_SCORE)
    except OSError:
        pass
    finally:
        os.close(fd)


def set_oom_score(value: int) -> bool:
    """This process's oom_score_adj (lowering it needs CAP_SYS_RESOURCE; raising it does not)."""
    try:
        fd = os.open("/proc/self/oom_score_adj", os.O_WRONLY)
    except OSError:
        return False
    try:
        os.write(fd, str(value).encode())
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


# ------------------------------------------------------------------------- a warm runner's footprint

# What a warm runner may hold, above what it held before its first program, once a program is over
# (resident anonymous memory: its heap, its arenas, its copies of the worker's pages). Past it the
# runner is replaced: a program's memory verdict must not depend on what an earlier one left behind
# (red team, issue 35: a pure numpy program left its runner at 400-900 MB, and the next fork that
# needed its whole limit was killed for memory, or the OOM killer took the warm runner and its death
# was blamed on the next program). The worker's memory cgroup leaves this much room for it above a
# program's own limit (`set_limit`), so a fork always has its limit and the slack.
WARM_MARGIN_BYTES = 24 * 1024 * 1024
# glibc's malloc (mallopt(3)): a fixed mmap threshold (no dynamic rise after a large block is freed)
# and a fixed trim threshold, so that large blocks go back to the kernel when freed and a freed heap
# top is returned; a cheap first line, the replacement rule is what guarantees the margin.
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD_BYTES = 256 * 1024
TRIM_THRESHOLD_BYTES = 1024 * 1024
_PAGE = os.sysconf("SC_PAGE_SIZE")


class Footprint:
    """This process's resident anonymous memory (/proc/self/statm: resident less file-backed and
    shared pages), read with one pread of a descriptor kept open (~2 us), against its value when made."""

    def __init__(self) -> None:
        self._fd = os.open("/proc/self/statm", os.O_RDONLY | os.O_CLOEXEC)
        self.baseline = self.anonymous()

    def anonymous(self) -> int:
        fields = os.pread(self._fd, 128, 0).split()
        return (int(fields[1]) - int(fields[2])) * _PAGE

    def over_margin(self) -> bool:
        """Does the process hold more than WARM_MARGIN_BYTES above its baseline, even once malloc has
        given back what it can (malloc_trim, tried only then: it walks the heap)?"""
        if self.anonymous() - self.baseline <= WARM_MARGIN_BYTES:
            return False
        _malloc_trim()
        return self.anonymous() - self.baseline > WARM_MARGIN_BYTES


def tune_malloc() -> None:
    """Fixed mmap and trim thresholds for glibc's malloc in this process (see M_MMAP_THRESHOLD);
    nothing where the C library is not glibc."""
    libc = ctypes.CDLL(None)
    mallopt = getattr(libc, "mallopt", None)
    if mallopt is not None:
        mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)


def _malloc_trim() -> None:
    trim = getattr(ctypes.CDLL(None), "malloc_trim", None)
    if trim is not None:
        trim(0)
