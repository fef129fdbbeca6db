"""A seccomp filter as a further layer: system calls that no program needs, refused by the kernel.

Installed once by the worker at the end of its setup (after its mounts, namespaces and cgroups, and
after no-new-privileges), so that every runner inherits it at fork for nothing: no per-fork cost. It
is a deny-list, small enough that each system call pays a few BPF instructions (measured in the
README): it refuses with EPERM what would widen a program's reach if another layer failed: mounts
and the new mount API, pivot_root and chroot, new namespaces (unshare, setns, and clone with a
namespace flag or CLONE_PARENT), ptrace and process_vm_readv/writev, the kernel keyring, bpf, perf_event_open,
userfaultfd, kernel modules, kexec, swap, reboot, acct, quotactl, iopl/ioperm and file handles
(open_by_handle_at). It also refuses what would carry notes from one program to the next in the same
worker (red team, session 13): POSIX message queues (mq_*), which live as long as the IPC namespace
and cannot be listed without mounting one, and new SysV objects (shmget, semget, msgget; the worker
still removes any, where the filter is missing). No program needs either: multiprocessing's
semaphores are files. clone3, whose flags a filter cannot read, answers ENOSYS, so that the C library
falls back to clone. A system call of another ABI (x32, or i386 on x86_64) kills the process: the
numbers above would not hold there.

Only x86_64 and aarch64 (their system call numbers are listed); elsewhere, or where the kernel
refuses (no seccomp, no no-new-privileges and no CAP_SYS_ADMIN), `install()` returns False and the
hello says so. No binding is needed: the filter is some fifty classic BPF instructions, assembled here.
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
LD_ABS_W, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06  # BPF_LD|W|ABS, BPF_JMP|{JEQ,JGE,JSET}|K, BPF_RET|K
OFFSET_NR, OFFSET_ARCH, OFFSET_ARG0 = 0, 4, 16  # struct seccomp_data (args[0]'s low half, little-endian)
# Namespace flags of clone(2): NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET, NEWTIME
CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000 | 0x80
# CLONE_PARENT makes a sibling, not a child: a runner's would be its fork server's child, out of reach of
# the worker's sweep of strays (red team, session 14: one outlived its program and killed every later one)
CLONE_PARENT = 0x00008000
CLONE_REFUSED = CLONE_NAMESPACES | CLONE_PARENT

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
ARCHES: dict[str, tuple[int, int, int, dict[str, int]]] = {
    # machine: (AUDIT_ARCH, clone, clone3, {name: number}); iopl/ioperm exist on x86_64 only
    "x86_64": (
        0xC000003E,
        56,
        435,
        {
            "mount": 165,
            "umount2": 166,
            "pivot_root": 155,
            "chroot": 161,
            "unshare": 272,
            "setns": 308,
            "ptrace": 101,
            "process_vm_readv": 310,
            "process_vm_writev": 311,
            "keyctl": 250,
            "add_key": 248,
            "request_key": 249,
            "bpf": 321,
            "perf_event_open": 298,
            "userfaultfd": 323,
            "kexec_load": 246,
            "kexec_file_load": 320,
            "init_module": 175,
            "finit_module": 313,
            "delete_module": 176,
            "open_by_handle_at": 304,
            "name_to_handle_at": 303,
            "swapon": 167,
            "swapoff": 168,
            "reboot": 169,
            "acct": 163,
            "quotactl": 179,
            "open_tree": 428,
            "move_mount": 429,
            "fsopen": 430,
            "fsconfig": 431,
            "fsmount": 432,
            "fspick": 433,
            "mount_setattr": 442,
            "iopl": 172,
            "ioperm": 173,
            "mq_open": 240,
            "mq_unlink": 241,
            "mq_timedsend": 242,
            "mq_timedreceive": 243,
            "mq_notify": 244,
            "mq_getsetattr": 245,
            "shmget": 29,
            "semget": 64,
            "msgget": 68,
        },
    ),
    "aarch64": (
        0xC00000B7,
        220,
        435,
        {
            "mount": 40,
            "umount2": 39,
            "pivot_root": 41,
            "chroot": 51,
            "unshare": 97,
            "setns": 268,
            "ptrace": 117,
            "process_vm_readv": 270,
            "process_vm_writev": 271,
            "keyctl": 219,
            "add_key": 217,
            "request_key": 218,
            "bpf": 280,
            "perf_event_open": 241,
            "userfaultfd": 282,
            "kexec_load": 104,
            "kexec_file_load": 294,
            "init_module": 105,
            "finit_module": 273,
            "delete_module": 106,
            "open_by_handle_at": 265,
            "name_to_handle_at": 264,
            "swapon": 224,
            "swapoff": 225,
            "reboot": 142,
            "acct": 89,
            "quotactl": 60,
            "open_tree": 428,
            "move_mount": 429,
            "fsopen": 430,
            "fsconfig": 431,
            "fsmount": 432,
            "fspick": 433,
            "mount_setattr": 442,
            "mq_open": 180,
            "mq_unlink": 181,
            "mq_timedsend": 182,
            "mq_timedreceive": 183,
            "mq_notify": 184,
            "mq_getsetattr": 185,
            "shmget": 194,
            "semget": 190,
            "msgget": 186,
        },
    ),
}
X32_BIT = 0x40000000  # x86_64's x32 ABI: the same numbers with this bit


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


Label = int | str


def filter_program(machine: str | None = None) -> bytes | None:
    """The filter's classic BPF instructions for `machine` (this one by default); None where unknown.

    ld arch; jeq ARCH else KILL; ld nr; [x86_64: jge X32_BIT -> KILL]
    jeq each denied -> EPERM; jeq clone3 -> ENOSYS; jeq clone else ALLOW
    ld args[0]; jset CLONE_REFUSED -> EPERM else ALLOW
    EPERM: ret ERRNO|EPERM; ENOSYS: ret ERRNO|ENOSYS; KILL: ret KILL_PROCESS; ALLOW: ret ALLOW
    """
    machine = machine or platform.machine()
    known = ARCHES.get(machine)
    if known is None:
        return None
    arch, clone, clone3, numbers = known
    code: list[tuple[int, Label, Label, int]] = [
        (LD_ABS_W, 0, 0, OFFSET_ARCH),
        (JEQ, 0, "kill", arch),
        (LD_ABS_W, 0, 0, OFFSET_NR),
    ]
    if machine == "x86_64":
        code.append((JGE, "kill", 0, X32_BIT))
    code += [(JEQ, "eperm", 0, number) for number in sorted({numbers[n] for n in DENIED_NAMES if n in numbers})]
    code += [
        (JEQ, "enosys", 0, clone3),
        (JEQ, 0, "allow", clone),
        (LD_ABS_W, 0, 0, OFFSET_ARG0),
        (JSET, "eperm", "allow", CLONE_REFUSED),
    ]
    labels = {name: len(code) + index for index, name in enumerate(("eperm", "enosys", "kill", "allow"))}
    verdicts = [RET_ERRNO | errno.EPERM, RET_ERRNO | errno.ENOSYS, RET_KILL_PROCESS, RET_ALLOW]

    def offset(target: Label, index: int) -> int:  # jumps count from the next instruction
        return target if isinstance(target, int) else labels[target] - index - 1

    out = [struct.pack("HBBI", op, offset(jt, i), offset(jf, i), k) for i, (op, jt, jf, k) in enumerate(code)]
    out += [struct.pack("HBBI", RET, 0, 0, verdict) for verdict in verdicts]
    return b"".join(out)


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
