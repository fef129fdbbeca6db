"""A seccomp filter as a further layer: an allow-list of the system calls that Python, numpy, sympy and
pandas make, measured; every other call refused by the kernel.

Installed once by the worker at the end of its setup (after its mounts, namespaces and cgroups, and
after no-new-privileges), so that every runner inherits it at fork for nothing: no per-fork cost. It
is an allow-list (issue 35: a deny-list left `io_uring_setup` and every call nobody listed open to a
program that escaped the policy): ALLOWED names each call with its reason, measured by
`bench/syscalls.py` (strace of a worker and its runners over GSM8K's programs, numpy, sympy and pandas
programs, trusted programs that write files, start threads and processes, and the hostile corpus),
with the calls the same libraries make on other paths (realloc's mremap, shutil's sendfile, a
selector's epoll) listed beside the measured ones. A call not listed answers ENOSYS, as on a kernel
that lacks it (the C library then falls back, as for clone3); the calls of DENIED_NAMES, which would
widen a program's reach if another layer failed, answer EPERM: mounts and the new mount API,
pivot_root and chroot, new namespaces (unshare, setns, and clone with a namespace flag or
CLONE_PARENT), ptrace and process_vm_readv/writev, the kernel keyring, bpf, perf_event_open,
userfaultfd, kernel modules, kexec, swap, reboot, acct, quotactl, iopl/ioperm, file handles, POSIX
message queues and new SysV objects (which would carry notes from one program to the next, as a red team
showed). clone3, whose flags a filter cannot read, answers ENOSYS, so that the C library falls back
to clone, whose flags are checked. The allowed calls whose argument widens reach have it read too
(ARGUMENT_RULES, measured: `bench/syscalls.py` counts each value): socket and socketpair only for Unix
sockets (not netlink, packet, the kernel's crypto; EAFNOSUPPORT), ioctl only for the terminal and
descriptor queries Python makes (ENOTTY), prctl only for the options potrun and the C library use
(EINVAL). A system call of another ABI (x32, or i386 on x86_64) kills the
process: the numbers below would not hold there.

The allowed numbers are checked by a binary search (a few comparisons for any call: cheaper than the
deny-list's chain of ~50 it replaces; `bench/seccomp_cost.py`). Only x86_64 and aarch64 (their numbers
are listed); elsewhere, or where the kernel refuses (no seccomp, no no-new-privileges and no
CAP_SYS_ADMIN), `install()` returns False and the hello says so. No binding is needed: the filter is
classic BPF, assembled here.
"""

from __future__ import annotations

import ctypes
import dataclasses
import errno
import platform
import struct

from potrun.sandbox.kernel.syscalls import ARCHES

PR_SET_SECCOMP = 22
PR_SET_NO_NEW_PRIVS = 38
SECCOMP_MODE_FILTER = 2
RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000
RET_KILL_PROCESS = 0x80000000
# BPF_LD|W|ABS, BPF_JMP|{JEQ,JGT,JGE,JSET}|K, BPF_JMP|JA, BPF_RET|K
LD_ABS_W, JEQ, JGT, JGE, JSET, JA, RET = 0x20, 0x15, 0x25, 0x35, 0x45, 0x05, 0x06
OFFSET_NR, OFFSET_ARCH, OFFSET_ARG0 = 0, 4, 16  # struct seccomp_data (args[0]'s low half, little-endian)
# Namespace flags of clone(2): NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET, NEWTIME
CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000 | 0x80
# CLONE_PARENT makes a sibling, not a child: a runner's would be its fork server's child, out of reach of
# the worker's sweep of strays (a red team's outlived its program and killed every later one)
CLONE_PARENT = 0x00008000
CLONE_REFUSED = CLONE_NAMESPACES | CLONE_PARENT


def _each(names: str, reason: str) -> dict[str, str]:
    """One reason shared by a group of calls (the data reads as one reviewed line per group)."""
    return dict.fromkeys(names.split(), reason)


# The system calls a runner (and the worker, and its fork server) may make, each with its reason. A name
# a machine does not have (the legacy calls aarch64 lacks) is skipped there.
ALLOWED: dict[str, str] = {
    **_each(
        "read write readv writev pread64 pwrite64 preadv pwritev lseek close close_range dup dup2 dup3 fcntl ioctl",
        "descriptors: a program's files and pipes, the worker's pipes and cgroup files (measured)",
    ),
    **_each(
        "open openat openat2 creat stat fstat lstat newfstatat statx access faccessat faccessat2 readlink "
        "readlinkat getdents64 getcwd chdir fchdir statfs fstatfs",
        "the files the minimal root shows: imports, the scratch folder (measured: open, openat, newfstatat, "
        "getdents64...)",
    ),
    **_each(
        "mkdir mkdirat rmdir unlink unlinkat rename renameat renameat2 link linkat symlink symlinkat chmod "
        "fchmod fchmodat chown fchown fchownat lchown umask truncate ftruncate fallocate fsync fdatasync "
        "utimensat utimes sendfile copy_file_range",
        "a program's own files in its scratch; the worker makes, chowns and removes runners' folders "
        "(measured: mkdir, chown, rmdir, unlinkat); shutil copies with sendfile or copy_file_range",
    ),
    **_each(
        "memfd_create",
        "a fork's request and its stdin, written by the worker (measured)",
    ),
    **_each(
        "brk mmap munmap mremap mprotect madvise mbind get_mempolicy set_mempolicy mincore msync mlock "
        "munlock membarrier",
        "memory: malloc, Python's arenas, numpy's buffers (measured: brk, mmap, munmap, mprotect, madvise, "
        "mbind); mremap for realloc",
    ),
    **_each(
        "clone vfork fork",
        "processes within the pids limit (clone's flags are checked: no namespace, no CLONE_PARENT; measured:"
        " clone, vfork for subprocess)",
    ),
    **_each(
        "execve execveat",
        "a trusted program's subprocess (measured; the minimal root holds Python and nothing else to run)",
    ),
    **_each(
        "exit exit_group wait4 waitid",
        "ending and reaping processes (measured)",
    ),
    **_each(
        "kill tgkill tkill",
        "signals in the worker's PID namespace: the worker ends runners, a program its own processes (measured)",
    ),
    **_each(
        "rt_sigaction rt_sigprocmask rt_sigreturn rt_sigpending rt_sigtimedwait rt_sigsuspend sigaltstack pause",
        "signal handlers: Python installs its own and returns from them (measured: rt_sigaction, rt_sigprocmask)",
    ),
    **_each(
        "restart_syscall",
        "the kernel's restart of an interrupted call",
    ),
    **_each(
        "futex set_robust_list get_robust_list rseq set_tid_address arch_prctl gettid sched_yield "
        "sched_getaffinity sched_setaffinity sched_getparam sched_getscheduler sched_get_priority_max "
        "sched_get_priority_min",
        "threads and the C library's start-up (measured: futex, set_robust_list, rseq, set_tid_address, "
        "arch_prctl, clone3's fallback, sched_getaffinity)",
    ),
    **_each(
        "clock_gettime clock_getres clock_nanosleep nanosleep gettimeofday time times getrusage",
        "clocks, sleeps and CPU time (measured)",
    ),
    **_each(
        "timer_create timer_settime timer_gettime timer_delete timer_getoverrun setitimer getitimer alarm",
        "the runner's CPU timer (cputimer: a timer on the process CPU clock, setitimer its fallback; measured)",
    ),
    **_each(
        "select pselect6 poll ppoll epoll_create epoll_create1 epoll_ctl epoll_wait epoll_pwait eventfd eventfd2",
        "waiting on descriptors: the worker's loop, subprocess.communicate, selectors (measured: pselect6, poll)",
    ),
    **_each(
        "pipe pipe2",
        "pipes: the worker's to its runners, subprocess's (measured)",
    ),
    **_each(
        "socket socketpair connect bind listen accept accept4 getsockname getpeername getsockopt setsockopt "
        "shutdown sendto recvfrom sendmsg recvmsg",
        "sockets: the fork server's socketpair and the C library's (measured), multiprocessing's; the network"
        " namespace has no interface but loopback",
    ),
    **_each(
        "getpid getppid getuid geteuid getgid getegid getresuid getresgid getgroups getpgid getpgrp getsid "
        "setsid setpgid",
        "process identity (measured); setsid: each runner leads its own session",
    ),
    **_each(
        "setgroups setresuid setresgid setuid setgid",
        "the worker gives each runner a uid of its own (measured); a runner, without the capability, can "
        "change nothing",
    ),
    **_each(
        "capget capset",
        "a runner keeps CAP_DAC_READ_SEARCH where Python is not readable by other uids; capset can only drop",
    ),
    **_each(
        "prctl",
        "no-new-privileges, PDEATHSIG, dumpable, subreaper (measured)",
    ),
    **_each(
        "prlimit64 getrlimit setrlimit",
        "a runner's limits: RLIMIT_AS, CPU, FSIZE, NPROC (measured)",
    ),
    **_each(
        "uname sysinfo getrandom getpriority setpriority getcpu",
        "the machine's name (fixed by the UTS namespace), its memory and CPUs (numpy), randomness (measured: "
        "uname, sysinfo, getrandom)",
    ),
    **_each(
        "msgctl semctl shmctl shmat shmdt",
        "the worker empties its IPC namespace after each fork (measured: msgctl, semctl, shmctl; new objects "
        "are refused: shmget, semget, msgget)",
    ),
}


# Allowed calls whose argument widens a program's reach: the filter reads it, and allows only the values
# listed, measured (`bench/syscalls.py` counts "call:VALUE"); any other answers the errno a kernel without
# the feature gives, so that libraries fall back as they would there.
@dataclasses.dataclass(frozen=True)
class ArgumentRule:
    argument: int  # which argument (its low 32 bits: a domain, a request, an option)
    allowed: dict[str, int]  # its values that pass, by name, each measured or reviewed
    refused_errno: int
    reason: str


ARGUMENT_RULES: dict[str, ArgumentRule] = {
    "socket": ArgumentRule(
        0,
        {"AF_UNIX": 1},
        errno.EAFNOSUPPORT,
        "Unix sockets only (measured: the fork server's socketpair, multiprocessing, the C library's nscd): no "
        "netlink (the kernel's routing, audit and device tables), packet, alg (the kernel's crypto), vsock, "
        "bluetooth...; no inet either (the network namespace has only loopback, where a program's server "
        "would wait for the next program of its worker)",
    ),
    "socketpair": ArgumentRule(0, {"AF_UNIX": 1}, errno.EAFNOSUPPORT, "as socket"),
    "ioctl": ArgumentRule(
        1,
        {
            "TCGETS": 0x5401,  # isatty() on every file Python opens (measured)
            "TIOCGWINSZ": 0x5413,  # a terminal's size (shutil.get_terminal_size)
            "TIOCGPGRP": 0x540F,  # a terminal's foreground group (os.tcgetpgrp)
            "FIONREAD": 0x541B,  # bytes waiting in a pipe: the worker's and its runners' (measured)
            "FIONBIO": 0x5421,  # non-blocking mode, as fcntl's O_NONBLOCK
            "FIONCLEX": 0x5450,  # close-on-exec off, on: os.set_inheritable (measured)
            "FIOCLEX": 0x5451,
        },
        errno.ENOTTY,
        "terminal and descriptor queries only (measured): not the devices' and file systems' own requests "
        "(TIOCSTI pushes input into a terminal, FICLONE, filesystem and block device controls...)",
    ),
    "prctl": ArgumentRule(
        0,
        {
            "PR_SET_PDEATHSIG": 1,  # the fork server dies with the worker (measured)
            "PR_GET_DUMPABLE": 3,
            "PR_SET_DUMPABLE": 4,  # the worker's non-dumpable (measured)
            "PR_SET_NAME": 15,  # a thread's name (the C library's pthread_setname_np)
            "PR_GET_NAME": 16,
            "PR_SET_SECCOMP": 22,  # a further filter can only refuse more
            "PR_CAPBSET_READ": 23,  # the worker's capabilities (measured)
            "PR_CAPBSET_DROP": 24,
            "PR_SET_CHILD_SUBREAPER": 36,  # the worker (measured)
            "PR_GET_CHILD_SUBREAPER": 37,
            "PR_SET_NO_NEW_PRIVS": 38,  # (measured)
            "PR_GET_NO_NEW_PRIVS": 39,
            "PR_CAP_AMBIENT": 47,  # ambient capabilities: can only lower what the bounding set allows
        },
        errno.EINVAL,
        "the options potrun and the C library use (measured): not PR_SET_MM (a process's memory map "
        "fields), PR_SET_PTRACER, speculation controls, PR_SET_IO_FLUSHER...",
    ),
}

# Refused with EPERM (every other call not allowed answers ENOSYS).
DENIED_NAMES = (
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "unshare",
    "setns",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "keyctl",
    "add_key",
    "request_key",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "open_by_handle_at",
    "name_to_handle_at",
    "swapon",
    "swapoff",
    "reboot",
    "acct",
    "quotactl",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "iopl",
    "ioperm",
    "mq_open",
    "mq_unlink",
    "mq_timedsend",
    "mq_timedreceive",
    "mq_notify",
    "mq_getsetattr",
    "shmget",
    "semget",
    "msgget",
)
X32_BIT = 0x40000000  # x86_64's x32 ABI: the same numbers with this bit


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


Instruction = tuple[int, int, int, int]  # (code, jump if true, jump if false, k): jumps count forward


def filter_program(machine: str | None = None) -> bytes | None:
    """The filter's classic BPF instructions for `machine` (this one by default); None where unknown.

    ld arch; jeq ARCH else ret KILL; ld nr; [x86_64: jge X32_BIT -> ret KILL]
    jeq clone: ld args[0]; jset CLONE_REFUSED -> ret EPERM else ret ALLOW
    jeq clone3 -> ret ENOSYS
    for each call of ARGUMENT_RULES: jeq call: ld its argument; jeq each allowed value -> ret ALLOW; ret ERRNO
    a binary search of the allowed numbers' ranges -> ret ALLOW, else to REFUSE:
    REFUSE: jeq each denied -> ret EPERM; ret ENOSYS
    """
    machine = machine or platform.machine()
    known = ARCHES.get(machine)
    if known is None:
        return None
    arch, numbers = known
    clone, clone3 = numbers["clone"], numbers["clone3"]
    code: list[Instruction] = [(LD_ABS_W, 0, 0, OFFSET_ARCH), (JEQ, 1, 0, arch), (RET, 0, 0, RET_KILL_PROCESS)]
    code.append((LD_ABS_W, 0, 0, OFFSET_NR))
    if machine == "x86_64":
        code += [(JGE, 0, 1, X32_BIT), (RET, 0, 0, RET_KILL_PROCESS)]
    code += [
        (JEQ, 0, 4, clone),
        (LD_ABS_W, 0, 0, OFFSET_ARG0),
        (JSET, 0, 1, CLONE_REFUSED),
        (RET, 0, 0, RET_ERRNO | errno.EPERM),
        (RET, 0, 0, RET_ALLOW),
        (JEQ, 0, 1, clone3),
        (RET, 0, 0, RET_ERRNO | errno.ENOSYS),
    ]
    for name, rule in ARGUMENT_RULES.items():
        if name in numbers:
            code += _argument_block(numbers[name], rule)
    ruled = {numbers[name] for name in ARGUMENT_RULES if name in numbers}
    allowed = sorted({numbers[name] for name in ALLOWED if name in numbers} - {clone, clone3} - ruled)
    tree = _search(_ranges(allowed))
    refuse = len(code) + len(tree)  # where the search sends a call it does not find
    code += [
        (op, jt, jf, refuse - (len(code) + index) - 1 if op == JA else k) for index, (op, jt, jf, k) in enumerate(tree)
    ]
    denied = sorted({numbers[name] for name in DENIED_NAMES if name in numbers})
    code += [(JEQ, len(denied) - index, 0, number) for index, number in enumerate(denied)]
    code += [(RET, 0, 0, RET_ERRNO | errno.ENOSYS), (RET, 0, 0, RET_ERRNO | errno.EPERM)]
    return b"".join(struct.pack("HBBI", op, jt, jf, k) for op, jt, jf, k in code)


def _argument_block(number: int, rule: ArgumentRule) -> list[Instruction]:
    """jeq NUMBER else past the block; ld args[ARGUMENT]; jeq each allowed value -> ret ALLOW;
    ret ERRNO. (The accumulator holds the call's number again after the block: it is left only there.)"""
    values = sorted(set(rule.allowed.values()))
    count = len(values)
    return [
        (JEQ, 0, count + 3, number),
        (LD_ABS_W, 0, 0, OFFSET_ARG0 + 8 * rule.argument),
        *[(JEQ, count - index, 0, value) for index, value in enumerate(values)],
        (RET, 0, 0, RET_ERRNO | rule.refused_errno),
        (RET, 0, 0, RET_ALLOW),
    ]


def _ranges(numbers: list[int]) -> list[tuple[int, int]]:
    """Sorted numbers as runs of consecutive ones: (first, last)."""
    runs: list[tuple[int, int]] = []
    for number in numbers:
        if runs and runs[-1][1] == number - 1:
            runs[-1] = (runs[-1][0], number)
        else:
            runs.append((number, number))
    return runs


def _search(runs: list[tuple[int, int]]) -> list[Instruction]:
    """A binary search of `runs`: returns ALLOW for a number in one, else jumps (JA, whose k is filled in
    by the caller) past its end. A leaf is four instructions, a split one."""
    if len(runs) == 1:
        first, last = runs[0]
        return [(JGE, 0, 2, first), (JGT, 1, 0, last), (RET, 0, 0, RET_ALLOW), (JA, 0, 0, 0)]
    middle = len(runs) // 2
    below, above = _search(runs[:middle]), _search(runs[middle:])
    if len(below) > 255:
        raise ValueError("too many runs of allowed calls for one split's jump")
    return [(JGE, len(below), 0, runs[middle][0]), *below, *above]


def install() -> bool:
    """Install the filter on this process (and so on every process it forks from now on); False
    where the machine is unknown or the kernel refuses. Needs no-new-privileges or CAP_SYS_ADMIN."""
    program = filter_program()
    if program is None:
        return False
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _Program(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)  # what lets a process without CAP_SYS_ADMIN filter itself
    return bool(libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) == 0)
