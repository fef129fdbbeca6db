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
message queues and new SysV objects (which would carry notes from one program to the next: red team,
session 13). clone3, whose flags a filter cannot read, answers ENOSYS, so that the C library falls back
to clone, whose flags are checked. A system call of another ABI (x32, or i386 on x86_64) kills the
process: the numbers below would not hold there.

The allowed numbers are checked by a binary search (a few comparisons for any call: cheaper than the
deny-list's chain of ~50 it replaces; `bench/seccomp_cost.py`). Only x86_64 and aarch64 (their numbers
are listed); elsewhere, or where the kernel refuses (no seccomp, no no-new-privileges and no
CAP_SYS_ADMIN), `install()` returns False and the hello says so. No binding is needed: the filter is
classic BPF, assembled here.
"""

from __future__ import annotations

import ctypes
import errno
import platform
import struct

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
# the worker's sweep of strays (red team, session 14: one outlived its program and killed every later one)
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
ARCHES: dict[str, tuple[int, dict[str, int]]] = {
    # machine: (AUDIT_ARCH, {name: number} for every name of ALLOWED, DENIED_NAMES and clone3 it has)
    "x86_64": (
        0xC000003E,
        {
            "read": 0,
            "write": 1,
            "open": 2,
            "close": 3,
            "stat": 4,
            "fstat": 5,
            "lstat": 6,
            "poll": 7,
            "lseek": 8,
            "mmap": 9,
            "mprotect": 10,
            "munmap": 11,
            "brk": 12,
            "rt_sigaction": 13,
            "rt_sigprocmask": 14,
            "rt_sigreturn": 15,
            "ioctl": 16,
            "pread64": 17,
            "pwrite64": 18,
            "readv": 19,
            "writev": 20,
            "access": 21,
            "pipe": 22,
            "select": 23,
            "sched_yield": 24,
            "mremap": 25,
            "msync": 26,
            "mincore": 27,
            "madvise": 28,
            "shmget": 29,
            "shmat": 30,
            "shmctl": 31,
            "dup": 32,
            "dup2": 33,
            "pause": 34,
            "nanosleep": 35,
            "getitimer": 36,
            "alarm": 37,
            "setitimer": 38,
            "getpid": 39,
            "sendfile": 40,
            "socket": 41,
            "connect": 42,
            "accept": 43,
            "sendto": 44,
            "recvfrom": 45,
            "sendmsg": 46,
            "recvmsg": 47,
            "shutdown": 48,
            "bind": 49,
            "listen": 50,
            "getsockname": 51,
            "getpeername": 52,
            "socketpair": 53,
            "setsockopt": 54,
            "getsockopt": 55,
            "clone": 56,
            "fork": 57,
            "vfork": 58,
            "execve": 59,
            "exit": 60,
            "wait4": 61,
            "kill": 62,
            "uname": 63,
            "semget": 64,
            "semctl": 66,
            "shmdt": 67,
            "msgget": 68,
            "msgctl": 71,
            "fcntl": 72,
            "fsync": 74,
            "fdatasync": 75,
            "truncate": 76,
            "ftruncate": 77,
            "getcwd": 79,
            "chdir": 80,
            "fchdir": 81,
            "rename": 82,
            "mkdir": 83,
            "rmdir": 84,
            "creat": 85,
            "link": 86,
            "unlink": 87,
            "symlink": 88,
            "readlink": 89,
            "chmod": 90,
            "fchmod": 91,
            "chown": 92,
            "fchown": 93,
            "lchown": 94,
            "umask": 95,
            "gettimeofday": 96,
            "getrlimit": 97,
            "getrusage": 98,
            "sysinfo": 99,
            "times": 100,
            "ptrace": 101,
            "getuid": 102,
            "getgid": 104,
            "setuid": 105,
            "setgid": 106,
            "geteuid": 107,
            "getegid": 108,
            "setpgid": 109,
            "getppid": 110,
            "getpgrp": 111,
            "setsid": 112,
            "getgroups": 115,
            "setgroups": 116,
            "setresuid": 117,
            "getresuid": 118,
            "setresgid": 119,
            "getresgid": 120,
            "getpgid": 121,
            "getsid": 124,
            "capget": 125,
            "capset": 126,
            "rt_sigpending": 127,
            "rt_sigtimedwait": 128,
            "rt_sigsuspend": 130,
            "sigaltstack": 131,
            "statfs": 137,
            "fstatfs": 138,
            "getpriority": 140,
            "setpriority": 141,
            "sched_getparam": 143,
            "sched_getscheduler": 145,
            "sched_get_priority_max": 146,
            "sched_get_priority_min": 147,
            "mlock": 149,
            "munlock": 150,
            "pivot_root": 155,
            "prctl": 157,
            "arch_prctl": 158,
            "setrlimit": 160,
            "chroot": 161,
            "acct": 163,
            "mount": 165,
            "umount2": 166,
            "swapon": 167,
            "swapoff": 168,
            "reboot": 169,
            "iopl": 172,
            "ioperm": 173,
            "init_module": 175,
            "delete_module": 176,
            "quotactl": 179,
            "gettid": 186,
            "tkill": 200,
            "time": 201,
            "futex": 202,
            "sched_setaffinity": 203,
            "sched_getaffinity": 204,
            "epoll_create": 213,
            "getdents64": 217,
            "set_tid_address": 218,
            "restart_syscall": 219,
            "timer_create": 222,
            "timer_settime": 223,
            "timer_gettime": 224,
            "timer_getoverrun": 225,
            "timer_delete": 226,
            "clock_gettime": 228,
            "clock_getres": 229,
            "clock_nanosleep": 230,
            "exit_group": 231,
            "epoll_wait": 232,
            "epoll_ctl": 233,
            "tgkill": 234,
            "utimes": 235,
            "mbind": 237,
            "set_mempolicy": 238,
            "get_mempolicy": 239,
            "mq_open": 240,
            "mq_unlink": 241,
            "mq_timedsend": 242,
            "mq_timedreceive": 243,
            "mq_notify": 244,
            "mq_getsetattr": 245,
            "kexec_load": 246,
            "waitid": 247,
            "add_key": 248,
            "request_key": 249,
            "keyctl": 250,
            "openat": 257,
            "mkdirat": 258,
            "fchownat": 260,
            "newfstatat": 262,
            "unlinkat": 263,
            "renameat": 264,
            "linkat": 265,
            "symlinkat": 266,
            "readlinkat": 267,
            "fchmodat": 268,
            "faccessat": 269,
            "pselect6": 270,
            "ppoll": 271,
            "unshare": 272,
            "set_robust_list": 273,
            "get_robust_list": 274,
            "utimensat": 280,
            "epoll_pwait": 281,
            "eventfd": 284,
            "fallocate": 285,
            "accept4": 288,
            "eventfd2": 290,
            "epoll_create1": 291,
            "dup3": 292,
            "pipe2": 293,
            "preadv": 295,
            "pwritev": 296,
            "perf_event_open": 298,
            "prlimit64": 302,
            "name_to_handle_at": 303,
            "open_by_handle_at": 304,
            "setns": 308,
            "getcpu": 309,
            "process_vm_readv": 310,
            "process_vm_writev": 311,
            "finit_module": 313,
            "renameat2": 316,
            "getrandom": 318,
            "memfd_create": 319,
            "kexec_file_load": 320,
            "bpf": 321,
            "execveat": 322,
            "userfaultfd": 323,
            "membarrier": 324,
            "copy_file_range": 326,
            "statx": 332,
            "rseq": 334,
            "open_tree": 428,
            "move_mount": 429,
            "fsopen": 430,
            "fsconfig": 431,
            "fsmount": 432,
            "fspick": 433,
            "clone3": 435,
            "close_range": 436,
            "openat2": 437,
            "faccessat2": 439,
            "mount_setattr": 442,
        },
    ),
    "aarch64": (
        0xC00000B7,
        {
            "getcwd": 17,
            "eventfd2": 19,
            "epoll_create1": 20,
            "epoll_ctl": 21,
            "epoll_pwait": 22,
            "dup": 23,
            "dup3": 24,
            "fcntl": 25,
            "ioctl": 29,
            "mkdirat": 34,
            "unlinkat": 35,
            "symlinkat": 36,
            "linkat": 37,
            "renameat": 38,
            "umount2": 39,
            "mount": 40,
            "pivot_root": 41,
            "statfs": 43,
            "fstatfs": 44,
            "truncate": 45,
            "ftruncate": 46,
            "fallocate": 47,
            "faccessat": 48,
            "chdir": 49,
            "fchdir": 50,
            "chroot": 51,
            "fchmod": 52,
            "fchmodat": 53,
            "fchownat": 54,
            "fchown": 55,
            "openat": 56,
            "close": 57,
            "pipe2": 59,
            "quotactl": 60,
            "getdents64": 61,
            "lseek": 62,
            "read": 63,
            "write": 64,
            "readv": 65,
            "writev": 66,
            "pread64": 67,
            "pwrite64": 68,
            "preadv": 69,
            "pwritev": 70,
            "sendfile": 71,
            "pselect6": 72,
            "ppoll": 73,
            "readlinkat": 78,
            "newfstatat": 79,
            "fstat": 80,
            "fsync": 82,
            "fdatasync": 83,
            "utimensat": 88,
            "acct": 89,
            "capget": 90,
            "capset": 91,
            "exit": 93,
            "exit_group": 94,
            "waitid": 95,
            "set_tid_address": 96,
            "unshare": 97,
            "futex": 98,
            "set_robust_list": 99,
            "get_robust_list": 100,
            "nanosleep": 101,
            "getitimer": 102,
            "setitimer": 103,
            "kexec_load": 104,
            "init_module": 105,
            "delete_module": 106,
            "timer_create": 107,
            "timer_gettime": 108,
            "timer_getoverrun": 109,
            "timer_settime": 110,
            "timer_delete": 111,
            "clock_gettime": 113,
            "clock_getres": 114,
            "clock_nanosleep": 115,
            "ptrace": 117,
            "sched_getscheduler": 120,
            "sched_getparam": 121,
            "sched_setaffinity": 122,
            "sched_getaffinity": 123,
            "sched_yield": 124,
            "sched_get_priority_max": 125,
            "sched_get_priority_min": 126,
            "restart_syscall": 128,
            "kill": 129,
            "tkill": 130,
            "tgkill": 131,
            "sigaltstack": 132,
            "rt_sigsuspend": 133,
            "rt_sigaction": 134,
            "rt_sigprocmask": 135,
            "rt_sigpending": 136,
            "rt_sigtimedwait": 137,
            "rt_sigreturn": 139,
            "setpriority": 140,
            "getpriority": 141,
            "reboot": 142,
            "setgid": 144,
            "setuid": 146,
            "setresuid": 147,
            "getresuid": 148,
            "setresgid": 149,
            "getresgid": 150,
            "times": 153,
            "setpgid": 154,
            "getpgid": 155,
            "getsid": 156,
            "setsid": 157,
            "getgroups": 158,
            "setgroups": 159,
            "uname": 160,
            "getrlimit": 163,
            "setrlimit": 164,
            "getrusage": 165,
            "umask": 166,
            "prctl": 167,
            "getcpu": 168,
            "gettimeofday": 169,
            "getpid": 172,
            "getppid": 173,
            "getuid": 174,
            "geteuid": 175,
            "getgid": 176,
            "getegid": 177,
            "gettid": 178,
            "sysinfo": 179,
            "mq_open": 180,
            "mq_unlink": 181,
            "mq_timedsend": 182,
            "mq_timedreceive": 183,
            "mq_notify": 184,
            "mq_getsetattr": 185,
            "msgget": 186,
            "msgctl": 187,
            "semget": 190,
            "semctl": 191,
            "shmget": 194,
            "shmctl": 195,
            "shmat": 196,
            "shmdt": 197,
            "socket": 198,
            "socketpair": 199,
            "bind": 200,
            "listen": 201,
            "accept": 202,
            "connect": 203,
            "getsockname": 204,
            "getpeername": 205,
            "sendto": 206,
            "recvfrom": 207,
            "setsockopt": 208,
            "getsockopt": 209,
            "shutdown": 210,
            "sendmsg": 211,
            "recvmsg": 212,
            "brk": 214,
            "munmap": 215,
            "mremap": 216,
            "add_key": 217,
            "request_key": 218,
            "keyctl": 219,
            "clone": 220,
            "execve": 221,
            "mmap": 222,
            "swapon": 224,
            "swapoff": 225,
            "mprotect": 226,
            "msync": 227,
            "mlock": 228,
            "munlock": 229,
            "mincore": 232,
            "madvise": 233,
            "mbind": 235,
            "get_mempolicy": 236,
            "set_mempolicy": 237,
            "perf_event_open": 241,
            "accept4": 242,
            "wait4": 260,
            "prlimit64": 261,
            "name_to_handle_at": 264,
            "open_by_handle_at": 265,
            "setns": 268,
            "process_vm_readv": 270,
            "process_vm_writev": 271,
            "finit_module": 273,
            "renameat2": 276,
            "getrandom": 278,
            "memfd_create": 279,
            "bpf": 280,
            "execveat": 281,
            "userfaultfd": 282,
            "membarrier": 283,
            "copy_file_range": 285,
            "statx": 291,
            "rseq": 293,
            "kexec_file_load": 294,
            "open_tree": 428,
            "move_mount": 429,
            "fsopen": 430,
            "fsconfig": 431,
            "fsmount": 432,
            "fspick": 433,
            "clone3": 435,
            "close_range": 436,
            "openat2": 437,
            "faccessat2": 439,
            "mount_setattr": 442,
        },
    ),
}
X32_BIT = 0x40000000  # x86_64's x32 ABI: the same numbers with this bit


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


Instruction = tuple[int, int, int, int]  # (code, jump if true, jump if false, k): jumps count forward


def filter_program(machine: str | None = None) -> bytes | None:
    """The filter's classic BPF instructions for `machine` (this one by default); None where unknown.

    ld arch; jeq ARCH else ret KILL; ld nr; [x86_64: jge X32_BIT -> ret KILL]
    jeq clone: ld args[0]; jset CLONE_REFUSED -> ret EPERM else ret ALLOW
    jeq clone3 -> ret ENOSYS
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
    allowed = sorted({numbers[name] for name in ALLOWED if name in numbers} - {clone, clone3})
    tree = _search(_ranges(allowed))
    refuse = len(code) + len(tree)  # where the search sends a call it does not find
    code += [
        (op, jt, jf, refuse - (len(code) + index) - 1 if op == JA else k) for index, (op, jt, jf, k) in enumerate(tree)
    ]
    denied = sorted({numbers[name] for name in DENIED_NAMES if name in numbers})
    code += [(JEQ, len(denied) - index, 0, number) for index, number in enumerate(denied)]
    code += [(RET, 0, 0, RET_ERRNO | errno.ENOSYS), (RET, 0, 0, RET_ERRNO | errno.EPERM)]
    return b"".join(struct.pack("HBBI", op, jt, jf, k) for op, jt, jf, k in code)


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
