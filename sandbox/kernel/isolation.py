"""OS-level isolation: network namespace, process limits, rlimits, privileges, cleanup.

Everything here is enforced by the kernel, not by the program's cooperation: a program can catch
exceptions and signals, but not SIGKILL of its process group, an rlimit, a cgroup or a namespace.
Each mechanism degrades gracefully where the machine does not allow it, and `capabilities()` says
which are active (`potrun doctor` prints it).
"""

from __future__ import annotations

import ctypes
import os
import re
import resource
import signal
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUTS = 0x04000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 0x1, 0x2, 0x4, 0x8, 0x20
MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC, MS_PRIVATE, MS_RELATIME = 0x400, 0x800, 0x1000, 0x4000, 0x40000, 0x200000
MOUNT_OPTIONS = {
    "nosuid": MS_NOSUID,
    "nodev": MS_NODEV,
    "noexec": MS_NOEXEC,
    "noatime": MS_NOATIME,
    "nodiratime": MS_NODIRATIME,
    "relatime": MS_RELATIME,
}
MNT_DETACH = 0x2
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
PR_SET_PDEATHSIG = 1
PR_SET_KEEPCAPS = 8
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE = 47, 2
CAPABILITY_VERSION_3 = 0x20080522
CAP_DAC_READ_SEARCH = 2  # read any file and search any directory; write nothing more
UID_BASE = 1_800_000_000  # runners drop to UID_BASE + their worker's pid: no two live workers share one
# ...and a worker's forks to that plus this (above any pid): a fork shares no uid with the warm runner
# that waits while it runs, so it can neither signal it (a SIGSTOP had the next program time out) nor
# write its folder (a note there reached later programs).
FORK_UID_OFFSET = 1 << 22
PIDS_CGROUP_ROOT = Path("/sys/fs/cgroup/pids")
FILE_SIZE_LIMIT = 16 * 1024 * 1024  # bytes a program may write to one file
MAX_FD = 4096  # a runner closes the worker's descriptors up to here (the worker holds a few, all low)
SCRATCH_MB = 64  # the size of a worker's private scratch file system, shared by its programs in turn
# ...and how many files and folders it holds: each costs the kernel ~1 KB that no size limit counts
# but the memory cgroup does (440,000 empty files, 0 bytes of the size, had the worker OOM-killed).
SCRATCH_INODES = 16384
SCRATCH_OPTIONS = f"size={SCRATCH_MB}m,nr_inodes={SCRATCH_INODES}"  # the mode is each mount's

SAFE_ENVIRONMENT = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "TZ": "UTC",
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "NUMEXPR_NUM_THREADS": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
}

_libc = ctypes.CDLL(None, use_errno=True)
# fork(2) called with the GIL held (a PyDLL function does not release it), so no other thread of this
# interpreter can hold the GIL, or be half way through anything, when the child is made.
_libc_fork = ctypes.PyDLL(None, use_errno=True).fork


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What this worker could enforce on this machine."""

    network_namespace: bool
    private_scratch: bool
    read_only_files: bool  # programs can write their scratch directory only
    pids_cgroup: bool
    drop_privileges: bool  # programs run as an unprivileged uid of their worker's own
    reads_all_files: bool  # ...that may read any file (Python unreachable by other users, and no cover)
    subreaper: bool
    minimal_root: bool = False  # programs see Python, /dev/null, /dev/zero, /dev/urandom, a scratch: no host file
    pid_namespace: bool = False  # the worker is init of a PID namespace: no outside process seen, none outlives it
    memory_cgroup: bool = False  # one memory limit on all of a program's processes, memfds and tmpfs files
    non_dumpable: bool = False  # the worker's /proc entries and ptrace are refused to its runners
    seccomp: bool = False  # a system call allow-list (sandbox/kernel/seccomp.py): everything else refused
    uts_namespace: bool = False  # programs see the host name "potrun", never the machine's

    def to_dict(self) -> dict[str, bool]:
        return asdict(self)


def unshare_ipc() -> bool:
    """Move this process (and its future children) into a new IPC namespace: SysV shared memory,
    semaphores and message queues a program makes vanish with the namespace, and it sees none of the
    host's. Needs CAP_SYS_ADMIN (root, or a user namespace of its own); False where refused."""
    return bool(_libc.unshare(CLONE_NEWIPC) == 0)


HOSTNAME = b"potrun"  # what every runner sees as the machine's name (uname, /proc/sys/kernel/hostname)


def unshare_uts() -> bool:
    """Move this process (and its future children) into a new UTS namespace named HOSTNAME: a program
    reads a fixed name, never the host's, and its result cannot depend on which machine ran it. Needs
    CAP_SYS_ADMIN; False where refused (a container, whose engine names it: `docker.container_options`)."""
    if _libc.unshare(CLONE_NEWUTS) != 0:
        return False
    return bool(_libc.sethostname(HOSTNAME, len(HOSTNAME)) == 0 and _libc.setdomainname(b"(none)", 6) == 0)


def _ipc_count(info: Callable[[Any], int], field: int) -> int:
    """How many objects of a kind exist in this IPC namespace, by its *_INFO call (one system call)."""
    buffer = (ctypes.c_int * 32)()  # larger than shm_info, seminfo and msginfo
    return buffer[field] if info(buffer) >= 0 else 1  # (a failed call: look in the listing)


# Per kind of SysV object: its listing in /proc, its *_INFO call and the field that counts those that
# exist (shm_info.used_ids, seminfo.semusz, msginfo.msgpool), and its removal by id (IPC_RMID, 0).
_IPC: dict[str, tuple[Callable[[Any], int], int, Callable[[int], int]]] = {
    "shm": (lambda buffer: _libc.shmctl(0, 14, buffer), 0, lambda ident: _libc.shmctl(ident, 0, None)),
    "sem": (lambda buffer: _libc.semctl(0, 0, 19, buffer), 7, lambda ident: _libc.semctl(ident, 0, 0)),
    "msg": (lambda buffer: _libc.msgctl(0, 12, buffer), 0, lambda ident: _libc.msgctl(ident, 0, None)),
}


def remove_ipc_objects() -> int:
    """Remove every SysV shared memory segment, semaphore set and message queue of this IPC
    namespace (the worker's own, `unshare_ipc`), so that none outlives the program that made it: the
    worker runs one program at a time, and calls this when one ends. Returns how many it removed.
    (A namespace per program would do it too, at a far higher cost per fork; this asks three *_INFO
    calls and reads a listing only for a kind that has objects: docs/performance.md has the figures.)"""
    removed = 0
    for kind, (info, field, remove) in _IPC.items():
        if _ipc_count(info, field) == 0:
            continue
        try:
            with open(f"/proc/sysvipc/{kind}") as listing:
                rows = listing.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) >= 2 and fields[1].isdigit():
                removed += remove(int(fields[1])) == 0
    return removed


def unshare_network() -> bool:
    """Move this process (and its future children) into a new, empty network namespace."""
    if _libc.unshare(CLONE_NEWNET) == 0:
        return True
    # Not root: an unprivileged user namespace may still allow a network namespace.
    return bool(_libc.unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0)


def fork() -> int:
    """fork(2) for a process with one Python thread: os.fork without CPython's at-fork handlers.

    Those repair the state of other Python threads (threading's handler) and reseed `random`; with no
    other Python thread there is nothing to repair (native threads, as BLAS may start, are libc's
    business, in either fork), and a runner seeds `random` per program anyway. The handlers cost a
    fresh child copy-on-write page faults, a large share of every fork (docs/performance.md)."""
    if threading.active_count() > 1:
        return os.fork()
    pid: int = _libc_fork()
    if pid < 0:
        error = ctypes.get_errno()
        raise OSError(error, os.strerror(error))
    return pid


def mount_private_scratch(path: str) -> bool:
    """Mount a small tmpfs on `path`, seen only by this process and its children (a new mount
    namespace): programs can fill SCRATCH_MB of memory there, never the machine's disk, and a
    directory is made and removed in microseconds, far faster than on ext4. It goes with the namespace,
    when the worker and its runners are gone."""
    if _libc.unshare(CLONE_NEWNS) != 0:
        return False
    # Nothing mounted here may propagate back to the machine's mount namespace.
    if _libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        return False
    options = f"{SCRATCH_OPTIONS},mode=0711".encode()
    return bool(_libc.mount(b"potrun-scratch", path.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, options) == 0)


def unmount(path: str) -> None:
    _libc.umount2(path.encode(), MNT_DETACH)


def make_files_read_only(writable: str) -> None:
    """In this process's own mount namespace (`mount_private_scratch` made it): every mount read-only
    but the one on `writable`, their other flags kept. (`potrun doctor` reports whether / became so.)"""
    for mount_point, options in _mounts():
        if mount_point != writable:
            flags = MS_REMOUNT | MS_BIND | MS_RDONLY
            for option in options:
                flags |= MOUNT_OPTIONS.get(option, 0)
            _libc.mount(None, mount_point.encode(), None, flags, None)


def _mounts() -> list[tuple[str, list[str]]]:
    """(mount point, per-mount options) of each mount this process sees, parents first."""
    mounts = []
    with open("/proc/self/mountinfo", encoding="utf-8") as lines:
        for line in lines:
            fields = line.split()
            point = re.sub(r"\\([0-7]{3})", lambda match: chr(int(match.group(1), 8)), fields[4])
            mounts.append((point, fields[5].split(",")))
    return mounts


def limit_capabilities(keep: int | None) -> None:
    """Empty the capability bounding set but for `keep`, and set no-new-privileges: nothing this
    process or its children execute can gain a capability, setuid root binaries included. The process
    keeps the capabilities it holds (a worker needs them to hand its runners another uid)."""
    try:
        last = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    except (OSError, ValueError):
        last = 63
    for capability in range(last + 1):
        if capability != keep:
            _libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0)
    _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)


def _capability_sets(mask: int) -> tuple[Any, Any]:
    """capset(2)'s header and data: effective, permitted and inheritable all exactly `mask` (of the
    first 32 capabilities)."""
    return (ctypes.c_uint32 * 2)(CAPABILITY_VERSION_3, 0), (ctypes.c_uint32 * 6)(mask, mask, mask, 0, 0, 0)


def set_subreaper() -> bool:
    """Orphans of programs are re-parented to this process, so none can escape cleanup."""
    return bool(_libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)


def set_non_dumpable() -> bool:
    """PR_SET_DUMPABLE 0: this process's /proc/PID entries (fd, mem, environ, maps) become root's and
    ptrace of it needs CAP_SYS_PTRACE, even for a process of the same uid (a container's runner).
    Its forks inherit it, and a runner's change of uid keeps it (the kernel resets it then anyway)."""
    return bool(_libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0)


def die_with_parent() -> None:
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def open_paths_to_others(paths: Iterable[str]) -> None:
    """In this process's own mount namespace (`mount_private_scratch` made it): let other users reach
    `paths` where a directory above one bars them (Python installed under /root, mode 0700).

    Each barring directory is covered by an empty tmpfs of mode 0755, into which only the entries on
    the way to `paths` are bound back: the rest of it is hidden, from this process too. Runners then
    import the standard library with no capability (keeping one cost each fork ~50 page faults, for
    capset through ctypes), and read none of root's files. A cover that fails is taken off again."""
    barred: dict[str, set[str]] = {}
    for path in paths:
        parts = Path(os.path.realpath(path)).parts
        for depth in range(1, len(parts)):
            directory = os.path.join(*parts[:depth])
            if not os.stat(directory).st_mode & stat.S_IXOTH:
                barred.setdefault(directory, set()).add(parts[depth])
    for directory in sorted(barred, key=lambda name: len(Path(name).parts)):  # outer covers first
        _cover(directory, barred[directory])


def _cover(directory: str, names: set[str]) -> None:
    kept = {name: os.open(os.path.join(directory, name), os.O_PATH | os.O_CLOEXEC) for name in names}
    try:
        options = b"size=64k,mode=0755"
        if _libc.mount(b"potrun-cover", directory.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, options) != 0:
            return
        for name, fd in kept.items():
            target = os.path.join(directory, name)
            try:
                if stat.S_ISDIR(os.fstat(fd).st_mode):
                    os.mkdir(target)
                else:
                    os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o644))
                bound = _libc.mount(f"/proc/self/fd/{fd}".encode(), target.encode(), None, MS_BIND | MS_REC, None)
            except OSError:
                bound = -1
            if bound != 0:
                unmount(directory)
                return
    finally:
        for fd in kept.values():
            os.close(fd)


def python_paths() -> set[str]:
    """Where this Python's files are: its prefixes, its import path, the folders of modules loaded."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, os.path.dirname(sys.executable)}
    paths.update(entry for entry in sys.path if entry)
    files = (getattr(module, "__file__", None) for module in list(sys.modules.values()))
    paths.update(os.path.dirname(file) for file in files if isinstance(file, str))
    return {path for path in paths if os.path.exists(path)}


def python_reachable_by_others() -> bool:
    """Can an unprivileged uid import the standard library? (Not when Python lives in /root.)"""
    for path in (Path(sys.prefix), Path(os.__file__).parent):
        for part in [path, *path.parents]:
            try:
                mode = part.stat().st_mode
            except OSError:
                return False
            if not mode & stat.S_IXOTH:
                return False
    return True


class PidsCgroup:
    """A cgroup (v1 pids controller) capping the processes of one worker's programs."""

    def __init__(self, name: str, max_processes: int) -> None:
        self.path = PIDS_CGROUP_ROOT / name
        self.path.mkdir(exist_ok=True)
        (self.path / "pids.max").write_text(str(max_processes))

    def enter(self) -> None:
        (self.path / "cgroup.procs").write_text("0")

    def remove(self) -> None:
        remove_pids_cgroup(self.path.name)

    @classmethod
    def try_create(cls, name: str, max_processes: int) -> PidsCgroup | None:
        if os.geteuid() != 0 or not (PIDS_CGROUP_ROOT / "cgroup.procs").exists():
            return None
        try:
            return cls(name, max_processes)
        except OSError:
            return None


def kill_cgroup_members(path: Path, rounds: int = 10) -> None:
    """SIGKILL every process in the cgroup at `path` (a folder of cgroup v1 or v2), until none is left
    or `rounds` passes found more (a process forking meanwhile is caught by the next one)."""
    for _ in range(rounds):
        try:
            pids = [int(pid) for pid in (path / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            return
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def pids_cgroup_name(worker_pid: int) -> str:
    return f"potrun-{worker_pid}"


def remove_pids_cgroup(name: str, wait_s: float = 0.0) -> bool:
    """Remove a worker's pids cgroup (`remove_cgroup`)."""
    return remove_cgroup(PIDS_CGROUP_ROOT / name, wait_s)


def remove_cgroup(path: Path, wait_s: float = 0.0) -> bool:
    """Remove a worker's cgroup once its last process is gone, waiting up to `wait_s` for that (a
    killed worker's runners die with it, a moment later). Returns whether it is gone."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            path.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.005)


def process_alive(pid: int) -> bool:
    """Is there a process `pid` (one of another user's counts)?"""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def process_stopped(pid: int) -> bool:
    """Is `pid` stopped by a signal (SIGSTOP, SIGTSTP...) or a tracer? Its state, in /proc: a stopped
    process runs nothing, so no time it spends stopped is a program's."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            text = stat.read(4096)
    except OSError:
        return False
    _, _, after = text.rpartition(b")")  # (the command name may hold any byte, ")" too: the last one ends it)
    return after[1:2] in (b"T", b"t")


def under_pids_limit() -> bool:
    """Is this process already in a cgroup with a finite pids.max (a container's --pids-limit)?"""
    for path in ("/sys/fs/cgroup/pids.max", "/sys/fs/cgroup/pids/pids.max"):
        try:
            if Path(path).read_text().strip() != "max":
                return True
        except OSError:
            continue
    return False


def scrub_environment() -> None:
    """Keep only SAFE_ENVIRONMENT (and the hash seed): done once, by the worker after its imports, so
    that every runner inherits it. (Checking it in each fork would cost every fork: Python code run for
    the first time in a fresh fork pays a page fault for nearly every object it touches.)"""
    seed = os.environ.get("PYTHONHASHSEED")
    os.environ.clear()
    os.environ.update(SAFE_ENVIRONMENT)
    if seed is not None:
        os.environ["PYTHONHASHSEED"] = seed


class RunnerEntry:
    """How a worker's runners enter their sandbox.

    Made once in the worker, which then holds what every runner inherits: no core files, the file
    size limit, /dev/null open. `enter` runs in each freshly forked runner, and does only what differs
    per runner: Python run for the first time in a fresh fork pays a page fault for nearly every object
    it touches (each a page copied), so every line here costs every program.

    `uid`: the unprivileged uid warm runners switch to, forks to `fork_uid` (None: they keep the
    worker's). `read_anything`:
    they keep one capability, CAP_DAC_READ_SEARCH (also across exec), where Python is not readable by
    other users (it lives under /root) and `open_paths_to_others` could not cover the way to it: reading
    is all it allows. `max_processes` is enforced by a pids cgroup where the worker has one
    (`processes_capped`); RLIMIT_NPROC is the fallback only, since the kernel counts it per uid across
    the whole machine (every container shares uid 10001)."""

    def __init__(self, uid: int | None, read_anything: bool, processes_capped: bool) -> None:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT, FILE_SIZE_LIMIT))
        self.devnull = os.open(os.devnull, os.O_RDWR)
        self.cpu_hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
        self.uid = uid
        self.fork_uid = uid + FORK_UID_OFFSET if uid is not None else None
        self.read_anything = read_anything and uid is not None
        self.processes_capped = processes_capped
        # capset's arguments, made here: the fork only passes them
        self._capabilities = _capability_sets(1 << CAP_DAC_READ_SEARCH)

    def enter(
        self, cwd: str, limits: dict[str, Any], keep_fds: tuple[int, ...], fork: bool, address_space: int = 0
    ) -> None:
        """Own session and process group, stdin/stdout/stderr on /dev/null, no other descriptor but
        `keep_fds`, the directory `cwd`, the memory limit, a fork's RLIMIT_CPU (the backstop behind
        the runner's CPU timer; a warm runner sets its own), fewer privileges. RLIMIT_AS is the
        program's memory limit above `address_space`, what the runner was forked with (a template's
        pandas maps ~370 MB: none of it the program's)."""
        os.setsid()
        os.chdir(cwd)
        for fd in (0, 1, 2):
            os.dup2(self.devnull, fd)
        low = 3
        for fd in sorted(keep_fds):
            os.closerange(low, fd)
            low = fd + 1
        os.closerange(low, MAX_FD)
        memory = limits["memory_mb"] * 1024 * 1024 + address_space
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        if fork:  # a fresh process: none of its CPU time is spent yet; nor may the program raise it
            # (soft = hard: past it the kernel sends SIGKILL, which no trusted program can ignore)
            soft, _ = cpu_limit(0.0, limits["timeout_s"], self.cpu_hard)
            resource.setrlimit(resource.RLIMIT_CPU, (soft, soft))
        uid = self.fork_uid if fork else self.uid
        if uid is not None:
            os.setgroups(())
            os.setresgid(uid, uid, uid)
            if self.read_anything:
                _libc.prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0)
            os.setresuid(uid, uid, uid)
            if self.read_anything and (
                _libc.capset(*self._capabilities) != 0
                or _libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_DAC_READ_SEARCH, 0, 0) != 0
            ):
                raise OSError("cannot keep the capability to read files")
        die_with_parent()  # after setuid, which clears it
        if not self.processes_capped and os.geteuid() != 0:  # root ignores RLIMIT_NPROC
            resource.setrlimit(resource.RLIMIT_NPROC, (limits["max_processes"], limits["max_processes"]))


# RLIMIT_CPU is the backstop behind the exact CPU timer (`cputimer`): set this far past the timer, so
# that it strikes only a program that dodged the timer (a trusted one that deleted it or ignores
# SIGPROF), never first: the kernel checks it against the tick's samples of CPU time, which stray
# from the exact time by a few percent on a busy machine.
BACKSTOP_MARGIN_S = 1.0


def cpu_limit(used: float, seconds: float, hard: int) -> tuple[int, int]:
    """RLIMIT_CPU allowing at least `seconds` + BACKSTOP_MARGIN_S more than `used` (it counts whole
    seconds): SIGXCPU (which kills) at the soft limit; only the soft limit moves."""
    soft = int(used + seconds + BACKSTOP_MARGIN_S) + 1
    return (soft if hard == resource.RLIM_INFINITY else min(soft, hard)), hard


def set_cpu_limit(seconds: float) -> None:
    """Allow `seconds` more CPU time from now (and the margin): SIGXCPU (which kills) at the soft limit.

    Only the soft limit moves: a warm runner sets it again from time to time, and a process that is
    not root may lower its hard limit but never raise it back."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
    resource.setrlimit(resource.RLIMIT_CPU, cpu_limit(usage.ru_utime + usage.ru_stime, seconds, hard))


def kill_group(pid: int) -> None:
    """SIGKILL a runner's whole process group (it cannot be caught or ignored); or the runner alone, if
    it was stopped before it made its group."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


class ChildList:
    """This process's children, zombies included, from /proc through a descriptor kept open: one pread
    each time (opening the file each time cost over twenty times as much, after every batch of answers).
    Open it in the process whose children it lists."""

    _READ = 1 << 16  # one pread of this size is cheap; a larger buffer costs an mmap each time

    def __init__(self) -> None:
        pid = os.getpid()
        self._path = f"/proc/{pid}/task/{pid}/children"
        try:
            self._fd: int | None = os.open(self._path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            self._fd = None  # the kernel keeps no such list

    def pids(self) -> set[int] | None:
        """The children now; None where the kernel keeps no list."""
        if self._fd is None:
            return None
        listing = os.pread(self._fd, self._READ, 0)
        if len(listing) == self._READ:  # thousands of children: read it whole
            listing = Path(self._path).read_bytes()
        return {int(pid) for pid in listing.split()}

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def kill_strays(keep: set[int], children: ChildList) -> None:
    """Kill and reap every orphan re-parented to us (a subreaper), and their groups, until none is
    left. The usual case, no stray, costs one pread."""
    for _ in range(100):
        strays = (children.pids() or set()) - keep
        if not strays:
            break
        for pid in strays:
            kill_group(pid)
        for pid in strays:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
