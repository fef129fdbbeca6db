"""A PID namespace and a minimal root for a worker: what its runners can see of the machine.

Two mechanisms, each behind a fallback that `Capabilities` reports (a worker that is not root, or a
kernel that refuses, keeps the host's view: the restricted policy and the other layers still hold):

- `enter_pid_namespace()`: the worker becomes init (pid 1) of a new PID namespace. Its runners see
  only that namespace's processes, never potrun's (nor its command line, nor its input file); and when
  the worker dies, however it dies, the kernel kills every process left in the namespace: nothing a
  program starts can outlive its worker, so none outlives potrun.
- `build_minimal_root()`: a fresh root file system in the worker's own mount namespace, made once so
  that every runner forked afterwards inherits it for free: an empty read-only tmpfs into which only
  Python's installation (its prefixes and site-packages, not a project checkout), the directories of
  the shared libraries the worker has loaded, /dev/null, /dev/zero, /dev/urandom, a private scratch
  tmpfs and a fresh /proc of the PID namespace are bound, read-only but for the scratch. No /tmp,
  /run, /home, /root, /etc, /sys or /work of the host; no file of theirs, no unix socket on them.
"""

from __future__ import annotations

import ctypes
import os
import platform
import signal
import stat
import sys
from collections.abc import Iterable
from pathlib import Path

CLONE_NEWNS = 0x00020000
CLONE_NEWPID = 0x20000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 0x1, 0x2, 0x4, 0x20, 0x1000, 0x4000, 0x40000
MNT_DETACH = 0x2
SCRATCH = "/scratch"  # where the worker's scratch tmpfs is, inside the minimal root
DEVICES = ("/dev/null", "/dev/zero", "/dev/urandom")
# pivot_root(2) has no glibc wrapper: its system call number, per architecture
_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "arm64": 41}

_libc = ctypes.CDLL(None, use_errno=True)


def enter_pid_namespace() -> bool:
    """Make the rest of this program run as pid 1 of a new PID namespace; False where not allowed
    (then nothing changed).

    unshare(CLONE_NEWPID) moves only this process's future children, so it forks: the child returns
    True and goes on as the worker; the parent stays outside, holds nothing the worker uses (its
    standard streams go to /dev/null, so that potrun sees the worker's end of the pipes close when the
    worker dies), waits, and exits with the worker's status. The child dies with the parent (SIGKILL),
    the parent with potrun: killing potrun, or this parent, takes the whole namespace down."""
    if _libc.unshare(CLONE_NEWPID) != 0:
        return False
    pid = os.fork()
    if pid == 0:
        _die_with_parent()
        return True
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):
        os.dup2(devnull, fd)
    os._exit(_wait_exit_code(pid))


def _wait_exit_code(pid: int) -> int:
    while True:
        try:
            _, status = os.waitpid(pid, 0)
        except InterruptedError:
            continue
        except ChildProcessError:
            return 70
        if os.WIFEXITED(status):
            return os.WEXITSTATUS(status)
        return 128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else 70


def _die_with_parent() -> None:
    _libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG


def mount_own_proc() -> bool:
    """Mount the PID namespace's own /proc on /proc (in a mount namespace of this process's own):
    for a worker whose minimal root could not be built, so that its view of its children, and its
    runners' view of processes, is of its namespace."""
    return bool(_libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | 0x8, b"hidepid=invisible") == 0)


# ------------------------------------------------------------------------------------ the minimal root


def python_installation() -> list[str]:
    """The directories of this Python's installation: its prefixes, the folder of its executable and
    the site-packages folders on its import path. Not the project: an editable install puts the
    checkout (or a finder naming it) on the import path, but the worker has imported what it runs
    already. A prefix is kept even inside the checkout (a `.venv` there): it holds no source of it."""
    project = Path(__file__).resolve().parents[2]  # sandbox/kernel/ -> the checkout (or site-packages/potrun)
    prefixes = {
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        sys.base_exec_prefix,
        os.path.dirname(os.path.realpath(sys.executable)),
        os.path.dirname(sys.executable),
    }
    packages = {entry for entry in sys.path if entry.endswith(("site-packages", "dist-packages"))}
    kept = set()
    for path in prefixes | packages:
        if not path or not os.path.isdir(path):
            continue
        real = Path(os.path.realpath(path))
        if real == project or (path not in prefixes and project in real.parents and not _in_a_prefix(real, prefixes)):
            continue  # the checkout itself, or a folder of it
        kept.add(path)
    return sorted(kept)


def _in_a_prefix(path: Path, prefixes: set[str]) -> bool:
    return any(Path(os.path.realpath(prefix)) in path.parents for prefix in prefixes if prefix)


def loaded_library_directories() -> list[str]:
    """The folders of the shared libraries this process has mapped (libc, libm, libpython...), and the
    dynamic loader by the path programs name it (a chain of links, as /lib64 -> usr/lib64, made again
    in the root): what a runner's own imports of extension modules, and a `python -c`, load from."""
    folders = set()
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                fields = line.split(maxsplit=5)
                if len(fields) == 6 and ".so" in fields[5]:
                    folders.add(os.path.dirname(fields[5].strip()))
    except OSError:
        pass
    for loader in ("/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1"):
        if os.path.exists(loader):
            folders.add(loader)
    return sorted(folder for folder in folders if folder.startswith("/") and os.path.exists(folder))


def build_minimal_root(staging: str, reveal: Iterable[str], scratch_options: str) -> bool:
    """Replace this process's root with a minimal one (see the module's docstring), made on `staging`
    (an empty directory). In a mount namespace of its own (made here), with /proc of this process's
    PID namespace. The scratch tmpfs is at SCRATCH. Returns False, and changes nothing this process
    sees, where it cannot be done (not root, no mount namespace); raises OSError if it fails half
    way, since a half-built root is no boundary (the caller then stops)."""
    if _libc.unshare(CLONE_NEWNS) != 0:
        return False
    if _libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        return False
    root = staging.rstrip("/")
    _mount(b"potrun-root", root, b"tmpfs", MS_NOSUID | MS_NODEV, b"size=1m,mode=0755")
    for path in sorted(reveal, key=len):  # outer folders first: inner ones are then in them already
        _reveal(root, path)
    for device in DEVICES:
        if os.path.exists(device):
            _reveal(root, device)
    os.makedirs(root + SCRATCH, mode=0o755)
    _mount(b"potrun-scratch", root + SCRATCH, b"tmpfs", MS_NOSUID | MS_NODEV, f"{scratch_options},mode=0711".encode())
    os.makedirs(root + "/proc", mode=0o555)
    # Each runner sees in /proc only its own processes (hidepid: a runner's uid is not the worker's).
    _mount(b"proc", root + "/proc", b"proc", MS_NOSUID | MS_NODEV | 0x8, b"hidepid=invisible")
    os.chdir(root)
    _pivot_root(".", ".")  # the old root ends up stacked on the new one...
    if _libc.umount2(b".", MNT_DETACH) != 0:  # ...and goes here
        raise _os_error("umount2(old root)")
    os.chdir("/")
    _mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, None)
    return True


def _reveal(root: str, path: str) -> None:
    """Make `path` resolve inside `root` as it does on the host: every symbolic link on the way is
    made again (so /lib64/ld-linux-x86-64.so.2 still leads through /lib64 -> usr/lib64), and what it
    finally names is bound read-only at the same place."""
    parts = Path(os.path.normpath(path)).parts[1:]
    current = "/"
    for index, part in enumerate(parts):
        host = os.path.join(current, part)
        inside = root + host
        if os.path.islink(host):
            target = os.readlink(host)
            if not os.path.lexists(inside):
                os.symlink(target, inside)
            resolved = os.path.normpath(os.path.join(current, target))
            _reveal(root, os.path.join(resolved, *parts[index + 1 :]))
            return
        if index == len(parts) - 1:
            _bind_read_only(host, inside)
            return
        if os.path.ismount(inside) or _is_bound(inside):
            return  # an outer folder is bound already: this one is in it
        if not os.path.isdir(inside):
            os.mkdir(inside, 0o755)
        current = host


def _is_bound(inside: str) -> bool:
    """A folder bound already is never descended into (a tmpfs folder made by us has no entries
    that are not ours; a bound one is the host's)."""
    return os.path.isdir(inside) and os.stat(inside).st_dev != os.stat(os.path.dirname(inside)).st_dev


def _bind_read_only(host: str, inside: str) -> None:
    if os.path.lexists(inside):
        if _is_bound(inside):
            return
        # else a folder made on the way to a deeper one revealed before: the whole is bound over it
    elif stat.S_ISDIR(os.stat(host).st_mode):
        os.mkdir(inside, 0o755)
    else:
        os.close(os.open(inside, os.O_CREAT | os.O_WRONLY, 0o644))
    _mount(host.encode(), inside, None, MS_BIND | MS_REC, None)
    flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID
    if not host.startswith("/dev/"):
        flags |= MS_NODEV
    _mount(None, inside, None, flags, None)


def _mount(source: bytes | None, target: str, kind: bytes | None, flags: int, data: bytes | None) -> None:
    if _libc.mount(source, target.encode(), kind, flags, data) != 0:
        raise _os_error(f"mount {target}")


def _pivot_root(new: str, old: str) -> None:
    number = _PIVOT_ROOT.get(platform.machine())
    if number is None:
        raise OSError(f"pivot_root: unknown system call number on {platform.machine()}")
    if _libc.syscall(ctypes.c_long(number), new.encode(), old.encode()) != 0:
        raise _os_error("pivot_root")


def _os_error(what: str) -> OSError:
    error = ctypes.get_errno()
    return OSError(error, f"{what}: {os.strerror(error)}")
