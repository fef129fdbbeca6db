"""The OS boundary around a program that escaped its policy (issue 14, classes 1-4).

Every program here runs under the trusted policy (plain Python, no code restriction: it stands for a
program that got past the restricted one) in a fork runner, on both backends. Each test checks from
outside the sandbox (the host's files, sockets, process table and cgroups) that the program could not
read the host, see potrun, reach its worker, exceed its memory limit, or outlive potrun.
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import DOCKER_IMAGE, TIMEOUT_S, assert_pool_healthy, describe, process_table, worker_host_pid
from paths import REPO, SHARED

from potrun import Sandbox, Status

MEMORY_MB = 256
MB = 1024 * 1024


@pytest.fixture
def host_dir() -> Iterator[Path]:
    """A world-readable, world-searchable folder under /tmp (as any user's files would be)."""
    folder = Path(tempfile.mkdtemp(prefix="potrun-test-host-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _refused(box: Sandbox, source: str) -> None:
    """The program sets `ans = 'escaped: ...'` only where it got through."""
    result = box.run(source)
    assert not (isinstance(result.value, str) and result.value.startswith("escaped")), describe(result)


# ------------------------------------------------------------------------------ class 1: the host


@pytest.mark.parametrize("policy", ["trusted"])
def test_host_files_are_not_visible(box: Sandbox, host_dir: Path) -> None:
    secret = host_dir / "world-readable.txt"
    secret.write_text("host data")
    secret.chmod(0o644)
    paths = [str(secret), str(REPO / "README.md"), str(SHARED.parent / "DESIGN.md"), "/etc/passwd", "/etc/hostname"]
    assert all(os.access(path, os.R_OK) for path in paths[:3]), "the test's files must exist on the host"
    result = box.run(
        f"paths = {paths!r}\n"
        + textwrap.dedent("""
        seen = []
        for path in paths:
            try:
                with open(path) as handle:
                    handle.read(1)
                seen.append(path)
            except OSError:
                pass
        ans = seen
    """)
    )
    assert result.status is Status.OK, describe(result)
    assert [path for path in result.value if path in paths[:3]] == [], describe(result)
    if box.capabilities.get("minimal_root"):
        assert result.value == [], describe(result)


@pytest.mark.parametrize("policy", ["trusted"])
def test_nothing_of_potrun_is_visible_in_proc(box: Sandbox) -> None:
    """Not the test process (this is potrun: its command line says pytest, its environment holds the
    canary), not its workers' environment: every /proc entry the program can read is searched."""
    source = textwrap.dedent("""
        import os
        found, pids = [], []
        for name in os.listdir('/proc'):
            if not name.isdigit() or int(name) == os.getpid():
                continue
            pids.append(int(name))
            for part in ('cmdline', 'environ'):
                try:
                    data = open(f'/proc/{name}/{part}', 'rb').read()
                except OSError:
                    continue
                if b'pytest' in data or b'POTRUN_CANARY' in data:
                    found.append(f'{name}/{part}')
        ans = ['escaped: ' + ', '.join(found)] if found else sorted(pids)
    """)
    result = box.run(source)
    assert result.status is Status.OK, describe(result)
    assert not any(isinstance(v, str) and v.startswith("escaped") for v in result.value), describe(result)
    assert os.getpid() not in result.value or box.capabilities.get("pid_namespace") is False, describe(result)


@pytest.mark.parametrize("policy", ["trusted"])
def test_unix_socket_on_the_host_cannot_be_reached(box: Sandbox, host_dir: Path) -> None:
    path = host_dir / "open.sock"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    path.chmod(0o777)
    listener.listen()
    listener.setblocking(False)
    try:
        _refused(box, f"import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect({str(path)!r})\nans = 'escaped'")
        time.sleep(0.1)
        with pytest.raises(BlockingIOError):
            listener.accept()
    finally:
        listener.close()


# ------------------------------------------------------------------------------ class 2: the worker

WORKER_FILES = textwrap.dedent("""
    import os
    worker = os.getppid()  # a fork runner's parent is its worker
    got = []
    for part, mode in (('fd/1', os.O_WRONLY), ('fd/0', os.O_RDONLY), ('mem', os.O_RDWR), ('environ', os.O_RDONLY),
                       ('maps', os.O_RDONLY)):
        try:
            os.close(os.open(f'/proc/{worker}/{part}', mode))
            got.append(part)
        except OSError:
            pass
    try:
        got += [f'fd: {os.listdir(f"/proc/{worker}/fd")}']
    except OSError:
        pass
    ans = 'escaped: ' + ', '.join(got) if got else 'refused'
""")

PTRACE = textwrap.dedent("""
    import os, subprocess, sys
    child = '''
    import ctypes, sys
    libc = ctypes.CDLL(None, use_errno=True)
    pid = int(sys.argv[1])
    ok = libc.ptrace(16, pid, None, None) == 0  # PTRACE_ATTACH
    seize = libc.ptrace(0x4206, pid, None, None) == 0  # PTRACE_SEIZE
    print('escaped' if ok or seize else 'refused', ctypes.get_errno())
    '''
    out = subprocess.run([sys.executable, '-c', child, str(os.getppid())], capture_output=True, text=True, timeout=10)
    ans = out.stdout.strip() or ('no output: ' + out.stderr[-200:])
""")


@pytest.mark.parametrize("policy", ["trusted"])
def test_worker_proc_entries_are_refused(box: Sandbox) -> None:
    result = box.run(WORKER_FILES)
    assert result.status is Status.OK and result.value == "refused", describe(result)
    assert_pool_healthy(box)


@pytest.mark.parametrize("policy", ["trusted"])
def test_worker_cannot_be_ptraced(box: Sandbox) -> None:
    result = box.run(PTRACE)
    assert result.status is Status.OK, describe(result)
    assert str(result.value).startswith("refused"), describe(result)
    assert_pool_healthy(box)


@pytest.mark.parametrize("policy", ["trusted"])
def test_the_seccomp_filter_refuses_new_namespaces_and_mounts(box: Sandbox) -> None:
    """A user namespace would give a program every capability inside it, and mounts with them."""
    if not box.capabilities.get("seccomp"):
        pytest.skip("no seccomp filter here")
    result = box.run(
        textwrap.dedent("""
        import ctypes, os
        libc = ctypes.pythonapi  # (a trusted program may not load a library; libc's symbols are there)
        got = [name for name, call in (('unshare', lambda: libc.unshare(0x10000000)),
                                       ('mount', lambda: libc.mount(b'x', b'/scratch', b'tmpfs', 0, None)),
                                       ('ptrace', lambda: libc.ptrace(16, os.getppid(), None, None)))
               if call() == 0]
        ans = 'escaped: ' + ', '.join(got) if got else 'refused'
    """)
    )
    assert result.status is Status.OK and result.value == "refused", describe(result)
    assert_pool_healthy(box)


def test_the_seccomp_filter_numbers_every_listed_call_once_per_machine() -> None:
    """A misspelt or missing name would change the filter without a word: every allowed and denied name
    has a number on x86_64 (aarch64 lacks only legacy calls, none of them denied), no two the same, no
    name both allowed and denied; each allowed number passes the filter's search and no other does."""
    from potrun.sandbox.kernel import seccomp

    legacy = {"iopl", "ioperm"}
    assert not set(seccomp.ALLOWED) & set(seccomp.DENIED_NAMES)
    for machine, (_, numbers) in seccomp.ARCHES.items():
        names = set(seccomp.ALLOWED) | set(seccomp.DENIED_NAMES) | {"clone3"}
        if machine == "x86_64":
            assert set(numbers) == names, machine
        else:
            assert set(numbers) <= names and set(seccomp.DENIED_NAMES) - legacy <= set(numbers), machine
        assert len(set(numbers.values())) == len(numbers), machine
        program = seccomp.filter_program(machine)
        assert program is not None and len(program) % 8 == 0, machine
        ruled = {numbers[name]: rule for name, rule in seccomp.ARGUMENT_RULES.items() if name in numbers}
        allowed = {numbers[name] for name in seccomp.ALLOWED if name in numbers}
        for number in range(max(numbers.values()) + 2):
            if number in ruled:
                rule = ruled[number]
                for value in rule.allowed.values():
                    args = [0] * 6
                    args[rule.argument] = value
                    assert _run_filter(program, numbers, number, *args) == "allow", (machine, number, value)
                args = [0] * 6
                args[rule.argument] = 0xDEAD
                assert _run_filter(program, numbers, number, *args) == f"errno {rule.refused_errno}", (machine, number)
                continue
            verdict = _run_filter(program, numbers, number)
            expected = (
                "allow"
                if number in allowed
                else "eperm"
                if number in set(numbers[name] for name in seccomp.DENIED_NAMES if name in numbers)
                else "enosys"
            )
            assert verdict == expected, (machine, number, verdict, expected)


def _run_filter(program: bytes, numbers: dict[str, int], nr: int, *args: int) -> str:
    """A small interpreter of the filter's classic BPF, for one call on the filter's own machine."""
    import struct

    from potrun.sandbox.kernel import seccomp

    arch = next(a for a, table in seccomp.ARCHES.values() if table is numbers)
    data = {seccomp.OFFSET_NR: nr, seccomp.OFFSET_ARCH: arch}
    data.update({seccomp.OFFSET_ARG0 + 8 * index: value for index, value in enumerate(args or (0,) * 6)})
    code = [struct.unpack("HBBI", program[i : i + 8]) for i in range(0, len(program), 8)]
    pc, a = 0, 0
    while True:
        op, jt, jf, k = code[pc]
        if op == seccomp.LD_ABS_W:
            a, pc = data[k], pc + 1
        elif op == seccomp.RET:
            named = {
                seccomp.RET_ALLOW: "allow",
                seccomp.RET_ERRNO | 1: "eperm",
                seccomp.RET_ERRNO | 38: "enosys",
                seccomp.RET_KILL_PROCESS: "kill",
            }
            return named.get(k, f"errno {k & 0xFFFF}")
        elif op == seccomp.JA:
            pc += 1 + k
        else:
            taken = {seccomp.JEQ: a == k, seccomp.JGT: a > k, seccomp.JGE: a >= k, seccomp.JSET: bool(a & k)}[op]
            pc += 1 + (jt if taken else jf)


@pytest.mark.parametrize("policy", ["trusted"])
def test_the_seccomp_filter_allows_only_what_is_listed(box: Sandbox) -> None:
    """An allow-list: a call nobody listed (io_uring_setup, kcmp, a number no kernel has yet) answers
    ENOSYS, a denied one EPERM, clone with a namespace flag EPERM; threads, forks and a subprocess run."""
    if not box.capabilities.get("seccomp"):
        pytest.skip("no seccomp filter here")
    result = box.run(
        textwrap.dedent("""
        import ctypes, os, subprocess, sys, threading
        from potrun.sandbox.kernel import seccomp
        numbers = seccomp.ARCHES[os.uname().machine][1]
        libc = ctypes.pythonapi  # (a trusted program may not load a library; libc's symbols are there)
        libc.__errno_location.restype = ctypes.c_void_p
        def errno_of(*args):
            got = libc.syscall(*args)
            return ctypes.c_int.from_address(libc.__errno_location()).value if got == -1 else 'succeeded'
        got = [errno_of(425, 8, 0), errno_of(312, 0, 0, 0, 0, 0), errno_of(1000), errno_of(numbers['unshare'], 0),
               errno_of(numbers['clone'], 0x10000000 | 17, 0, 0, 0, 0)]
        thread = threading.Thread(target=lambda: None)
        thread.start()
        thread.join()
        pid = os.fork()
        if pid == 0:
            os._exit(7)
        got.append(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
        got.append(subprocess.run([sys.executable, '-c', 'print(5)'], capture_output=True, text=True).stdout.strip())
        ans = got
    """)
    )
    assert result.status is Status.OK, describe(result)
    assert result.value == [38, 38, 38, 1, 1, 7, "5"], describe(result)
    assert_pool_healthy(box)


@pytest.mark.parametrize("policy", ["trusted"])
def test_the_seccomp_filter_reads_the_arguments_that_widen_reach(box: Sandbox) -> None:
    """socket() and socketpair() of any domain but AF_UNIX (netlink, inet, packet, the kernel's crypto),
    an ioctl outside the terminal and descriptor queries (TIOCSTI, FICLONE, a block device's), a prctl
    outside potrun's options (PR_SET_MM, PR_SET_PTRACER) are refused, called straight or through Python;
    what Python does with them (isatty, a Unix socketpair, set_inheritable, threads' names) still works."""
    if not box.capabilities.get("seccomp"):
        pytest.skip("no seccomp filter here")
    result = box.run(
        textwrap.dedent("""
        import ctypes, os, socket, sys
        from potrun.sandbox.kernel import seccomp
        numbers = seccomp.ARCHES[os.uname().machine][1]
        libc = ctypes.pythonapi  # (a trusted program may not load a library; libc's symbols are there)
        libc.__errno_location.restype = ctypes.c_void_p
        def errno_of(*args):
            got = libc.syscall(*args)
            return ctypes.c_int.from_address(libc.__errno_location()).value if got == -1 else 'succeeded'
        def python_errno(make):
            try:
                made = make()
            except OSError as error:
                return error.errno
            made.close()
            return 'succeeded'
        fd = os.open('.', os.O_RDONLY)
        got = {
            'netlink': errno_of(numbers['socket'], 16, 3, 0),
            'inet': errno_of(numbers['socket'], 2, 1, 0),
            'inet6-python': python_errno(lambda: socket.socket(socket.AF_INET6)),
            'packet': errno_of(numbers['socket'], 17, 3, 0),
            'alg': errno_of(numbers['socket'], 38, 5, 0),
            'pair-inet': errno_of(numbers['socketpair'], 2, 1, 0, 0),
            'tiocsti': errno_of(numbers['ioctl'], 0, 0x5412, 0),
            'ficlone': errno_of(numbers['ioctl'], fd, 0x40049409, 0),
            'pr-set-mm': errno_of(numbers['prctl'], 35, 1, 0, 0, 0),
            'pr-set-ptracer': errno_of(numbers['prctl'], 0x59616D61, 0, 0, 0, 0),
        }
        a, b = socket.socketpair()
        a.sendall(b'x')
        ok = [b.recv(1) == b'x', os.isatty(fd), os.isatty(0)]
        os.set_inheritable(fd, True)
        ok.append(os.get_inheritable(fd))
        ans = [sorted(got.items()), ok]
    """)
    )
    assert result.status is Status.OK, describe(result)
    refused, works = result.value  # type: ignore[misc]
    assert dict(refused) == {
        "netlink": errno.EAFNOSUPPORT,
        "inet": errno.EAFNOSUPPORT,
        "inet6-python": errno.EAFNOSUPPORT,
        "packet": errno.EAFNOSUPPORT,
        "alg": errno.EAFNOSUPPORT,
        "pair-inet": errno.EAFNOSUPPORT,
        "tiocsti": errno.ENOTTY,
        "ficlone": errno.ENOTTY,
        "pr-set-mm": errno.EINVAL,
        "pr-set-ptracer": errno.EINVAL,
    }, describe(result)
    assert works == [True, False, False, True], describe(result)
    assert_pool_healthy(box)


@pytest.mark.parametrize("policy", ["trusted"])
def test_programs_see_a_fixed_host_name(box: Sandbox) -> None:
    """Not the host's (a UTS namespace; a container named by potrun): a result cannot depend on which
    machine or container ran it."""
    result = box.run(
        "import os, socket\n"
        "ans = [socket.gethostname(), os.uname().nodename, open('/proc/sys/kernel/hostname').read().strip()]\n"
    )
    assert (result.status, result.value) == (Status.OK, ["potrun"] * 3), describe(result)
    assert box.capabilities.get("uts_namespace") is True


# ------------------------------------------------------------------------------ class 3: memory

CHILDREN = textwrap.dedent(f"""
    import os
    pids = []
    for _ in range(8):
        pid = os.fork()
        if pid == 0:
            try:
                block = bytearray(b'x') * ({200 * MB})  # written: every page is charged
                import time
                time.sleep(1.5)
                os._exit(0)
            except MemoryError:
                os._exit(3)
        pids.append(pid)
    codes = [os.waitpid(pid, 0)[1] for pid in pids]
    ans = ['escaped' if all(code == 0 for code in codes) else 'stopped', codes]
""")

MEMFDS = textwrap.dedent(f"""
    import os
    fds = []
    chunk = b'x' * ({MB})
    for i in range(48):
        fd = os.memfd_create(f'm{{i}}')
        for _ in range(16):
            os.write(fd, chunk)
        fds.append(fd)
    ans = ['escaped', len(fds)]
""")


def _memory_cgroup_of(pid: int) -> Path | None:
    """The host's memory cgroup folder (v1) of a process, or None."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            folder = Path("/sys/fs/cgroup/memory") / path.lstrip("/")
            return folder if folder.exists() else None
    return None


def _worker_memory_cgroup(box: Sandbox) -> Path | None:
    """The memory cgroup of the box's (single) worker, seen from the host: its own (the worker below
    its namespace's waiting parent, process backend), or its container's; None if it has none but
    this test process's."""
    assert box._pool is not None
    root = worker_host_pid(box._pool.slots[0].conn)
    ours = _memory_cgroup_of(os.getpid())
    for pid in [p.pid for p in process_table().values() if p.ppid == root] + [root]:
        folder = _memory_cgroup_of(pid)
        if folder is not None and folder != ours:
            return folder
    return None


@pytest.fixture
def small_box(backend: str) -> Iterator[Sandbox]:
    with Sandbox(backend, policy="trusted", workers=1, timeout=20, memory_mb=MEMORY_MB) as box:
        yield box


@pytest.mark.parametrize(
    "source", [pytest.param(CHILDREN, id="8-children-of-200MB"), pytest.param(MEMFDS, id="48-memfds-of-16MB")]
)
def test_one_memory_limit_covers_all_of_a_program(small_box: Sandbox, source: str) -> None:
    box = small_box
    assert box.run("ans = 1").ok  # the worker is up
    cgroup = _worker_memory_cgroup(box)
    if cgroup is None:
        pytest.skip("no memory cgroup of the worker's to check from outside (not root, or no cgroup v1)")
    (cgroup / "memory.max_usage_in_bytes").write_text("0")
    limit = int((cgroup / "memory.limit_in_bytes").read_text())
    result = box.run(source)
    peak = int((cgroup / "memory.max_usage_in_bytes").read_text())
    assert result.value is None or result.value[0] != "escaped", describe(result)
    assert result.status in (Status.MEMORY_LIMIT, Status.OK, Status.ERROR), describe(result)
    if box.capabilities.get("memory_cgroup"):  # the process backend: the limit is the program's own
        assert limit <= (MEMORY_MB + 128) * MB, f"the worker's cgroup limit is {limit / MB:.0f} MB"
    if source is MEMFDS:  # no process's address space holds them: only the cgroup (or the container's) stops them
        assert result.status is Status.MEMORY_LIMIT, describe(result)
    assert peak <= limit, f"{peak / MB:.0f} MB in use under a {limit / MB:.0f} MB limit"
    assert box.run("ans = 6 * 7").value == 42, "the worker did not survive its program's OOM kill"


# ------------------------------------------------------------------------------ class 4: outliving

DAEMON = textwrap.dedent("""
    import os, sys, time
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(120)', MARKER])
        os._exit(0)
    time.sleep(60)
    ans = 1
""")

POTRUN = textwrap.dedent("""
    import sys
    from potrun import Sandbox
    backend, marker, canary, image = sys.argv[1:5]
    program = f"MARKER = {marker!r}\\n" + sys.stdin.read()
    options = {"image": image} if backend == "docker" else {}
    with Sandbox(backend, policy="trusted", workers=1, timeout=90, **options) as box:
        print("started", flush=True)
        box.run(program)
""")


def _marked(marker: str) -> list[int]:
    return [
        p.pid
        for p in process_table().values()
        if marker in p.cmdline and p.alive and "-c" in p.cmdline and "potrun" not in p.cmdline
    ]


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=lambda s: s.name)
def test_no_process_outlives_potrun(backend: str, how: signal.Signals, tmp_path: Path) -> None:
    """potrun (a subprocess with a canary in its command line) runs a program that double-forks a
    setsid daemon carrying a marker, and is killed while the program runs: the host's /proc must soon
    show no process with the marker."""
    marker = f"outlive-marker-{os.getpid()}-{how.name}"
    potrun = subprocess.Popen(
        [sys.executable, "-c", POTRUN, backend, marker, "canary-potrun-cmdline", DOCKER_IMAGE],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=tmp_path,
        text=True,
    )
    try:
        assert potrun.stdin is not None and potrun.stdout is not None
        potrun.stdin.write(DAEMON)
        potrun.stdin.close()
        assert potrun.stdout.readline().strip() == "started"
        deadline = time.monotonic() + 60
        while not _marked(marker):
            assert time.monotonic() < deadline and potrun.poll() is None, "the daemon never started"
            time.sleep(0.05)
        potrun.send_signal(how)
        potrun.wait(timeout=60)
        deadline = time.monotonic() + 30
        while _marked(marker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _marked(marker) == [], f"the daemon outlived potrun ({how.name})"
    finally:
        if potrun.poll() is None:
            potrun.kill()
            potrun.wait()
        for pid in _marked(marker):
            os.kill(pid, signal.SIGKILL)


# ------------------------------------------------------------------------------ what the worker says


def test_process_worker_reports_its_boundary() -> None:
    """As root on Linux (this machine, CI) every mechanism is on; elsewhere the hello says which is not."""
    with Sandbox(policy="trusted", workers=1, timeout=TIMEOUT_S) as box:
        capabilities = box.capabilities
    if os.geteuid() != 0:
        pytest.skip("not root: the boundary's mechanisms are off, and the hello says so")
    for name in ("minimal_root", "pid_namespace", "memory_cgroup", "non_dumpable", "seccomp"):
        assert capabilities.get(name) is True, f"{name}: {capabilities}"


# ------------------------------------------------------------------- SysV IPC outlives no program

_SHM_HELPER = r"""
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
key, mode = int(sys.argv[1]), sys.argv[2]
shmid = libc.shmget(key, 4096, (0o1000 | 0o600) if mode == "w" else 0o600)
if shmid < 0:
    print("no segment")
    raise SystemExit
addr = libc.shmat(shmid, None, 0)
if mode == "w":
    ctypes.memmove(addr, b"LEFT BY AN EARLIER PROGRAM\0", 27)
    print("wrote")
else:
    print(ctypes.string_at(addr).decode())
"""


def _child_program(helper: str, *args: str) -> str:
    # a child process: the trusted runner's audit hook is the runner's, not its children's
    return (
        "import subprocess, sys\n"
        f"out = subprocess.run([sys.executable, '-c', {helper!r}, *{list(args)!r}], capture_output=True, text=True)\n"
        "ans = (out.stdout + out.stderr).strip()[-200:]\n"
    )


def _shm_program(key: int, mode: str) -> str:
    return _child_program(_SHM_HELPER, str(key), mode)


def _host_shm_keys() -> set[int]:
    rows = Path("/proc/sysvipc/shm").read_text().splitlines()[1:]
    return {int(row.split()[0]) for row in rows if row.split()}


def test_a_sysv_segment_outlives_neither_its_program_nor_reaches_the_host(backend: str) -> None:
    """A SysV shared memory segment is a channel to later programs, and memory charged to the worker
    after its program ended (red team, session 13: on the host's IPC namespace it outlived potrun).
    The seccomp filter refuses new SysV objects; where it is missing, the worker's own IPC namespace
    is emptied after each forked program."""
    key = 0x504F5452
    with Sandbox(backend, policy="trusted", isolation="fork", workers=1, timeout=TIMEOUT_S) as box:
        wrote, read = box.run_many([_shm_program(key, "w"), _shm_program(key, "r")])
        assert (wrote.status, wrote.value) == (Status.OK, "no segment"), describe(wrote)
        assert (read.status, read.value) == (Status.OK, "no segment"), describe(read)
        assert key not in _host_shm_keys()


def test_the_worker_empties_its_ipc_namespace() -> None:
    """The fallback where no seccomp filter holds: `remove_ipc_objects` removes every kind of SysV
    object, in a child with an IPC namespace of its own (needs root)."""
    if os.geteuid() != 0:
        pytest.skip("not root: no IPC namespace of its own")
    check = textwrap.dedent(
        """
        import ctypes
        from potrun.sandbox.kernel import isolation
        assert isolation.unshare_ipc()
        libc = ctypes.CDLL(None)
        made = [libc.shmget(0, 4096, 0o1600), libc.shmget(0, 4096, 0o1600), libc.semget(0, 1, 0o1600), libc.msgget(0, 0o1600)]
        assert min(made) >= 0, made
        print(isolation.remove_ipc_objects(), isolation.remove_ipc_objects())
        """
    )
    out = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=60)
    assert (out.returncode, out.stdout.split()) == (0, ["4", "0"]), out.stderr


_MQ_HELPER = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
name, mode = b"/potrun-note", sys.argv[1]
fd = libc.mq_open(name, (os.O_CREAT | os.O_RDWR) if mode == "w" else os.O_RDWR, 0o666, None)
if fd < 0:
    print("refused" if ctypes.get_errno() == 1 else "no queue")
elif mode == "w":
    print("wrote" if libc.mq_send(fd, b"LEFT", 4, 0) == 0 else "refused")
else:
    buffer = ctypes.create_string_buffer(8192)
    got = libc.mq_receive(fd, buffer, 8192, None)
    print(buffer.raw[: max(got, 0)].decode() or "empty")
"""

FILE_NOTES = {
    "w": r"""
import os
left = []
for top, dirs, files in os.walk('/'):
    dirs[:] = [d for d in dirs if os.path.join(top, d) not in ('/proc', '/sys')]
    try:
        with open(os.path.join(top, '.potrun-note'), 'w') as f:
            f.write('x')
        left.append(top)
    except OSError:
        pass
ans = left
""",
    "r": r"""
import os
found = []
for top, dirs, files in os.walk('/'):
    dirs[:] = [d for d in dirs if os.path.join(top, d) not in ('/proc', '/sys')]
    found += [top] * ('.potrun-note' in files)
ans = found
""",
}


def test_no_posix_message_queue_carries_a_note_to_the_next_program(backend: str) -> None:
    """Red team, session 13: a queue made with mq_open (by a child, outside the audit hook) outlived its
    program in the worker's IPC namespace, on both backends; and docker's /dev/mqueue makes them as
    files. The seccomp filter refuses mq_* and /dev/mqueue is not writable."""
    with Sandbox(backend, policy="trusted", isolation="fork", workers=1, timeout=TIMEOUT_S) as box:
        wrote, read = box.run_many([_child_program(_MQ_HELPER, "w"), _child_program(_MQ_HELPER, "r")])
        assert (wrote.status, wrote.value) == (Status.OK, "refused"), describe(wrote)
        assert (read.status, read.value) == (Status.OK, "refused"), describe(read)


def test_no_file_anywhere_carries_a_note_to_the_next_program(backend: str) -> None:
    """A program tries to leave a file in every folder of the file system; the next program of the same
    worker finds none (red team, session 14: docker's /tmp, /dev/shm and /dev/mqueue took them). A
    program's own folder is removed after it, so nothing anywhere is left."""
    with Sandbox(backend, policy="trusted", isolation="fork", workers=1, timeout=60) as box:
        wrote, found = box.run_many([FILE_NOTES["w"], FILE_NOTES["r"]])
        assert wrote.status == found.status == Status.OK, (describe(wrote), describe(found))
        assert found.value == [], (wrote.value, found.value)
        assert len(wrote.value) <= 1, wrote.value  # its own folder at most


DEEP_TREE = "import os\nfor _ in range(3000):\n    os.mkdir('a')\n    os.chdir('a')\nans = 1"


def test_a_tree_too_deep_for_shutil_does_not_cost_the_worker(backend: str) -> None:
    """3,000 nested folders in a program's scratch: shutil.rmtree recursed into a RecursionError that
    ended the worker, and the program and every one queued behind it came back sandbox_error (red
    team, session 13). The worker removes such a tree with `rm -rf`, and goes on."""
    with Sandbox(backend, policy="trusted", isolation="fork", workers=1, timeout=TIMEOUT_S) as box:
        deep, after, victim = box.run_many([DEEP_TREE, DEEP_TREE, "ans = 42"])
        for result in (deep, after):
            assert (result.status, result.value, result.attempts) == (Status.OK, 1, 1), describe(result)
        assert (victim.status, victim.value, victim.attempts) == (Status.OK, 42, 1), describe(victim)
        assert box.workers_replaced == 0


MANY_FILES = """
import os
made = 0
try:
    while made < 500_000:
        open(f'f{made}', 'w').close()
        made += 1
    ans = ['escaped', made]
except OSError as e:
    ans = [e.errno, made]
"""


def test_files_without_bytes_cannot_fill_the_worker_s_memory(backend: str) -> None:
    """Red team, session 13: 440,000 empty files (0 bytes of the scratch's size) cost the kernel enough
    memory, charged to the worker's cgroup, that the worker was OOM-killed. The scratch holds
    SCRATCH_INODES files at most: the program gets ENOSPC and the worker goes on."""
    from potrun.sandbox.kernel import isolation

    with Sandbox(backend, policy="trusted", isolation="fork", workers=1, timeout=TIMEOUT_S, memory_mb=MEMORY_MB) as box:
        filler, victim = box.run_many([MANY_FILES, "ans = 42"])
        assert filler.status is Status.OK and filler.value[0] == 28, describe(filler)
        assert 0 < filler.value[1] < isolation.SCRATCH_INODES, describe(filler)
        assert (victim.status, victim.value, victim.attempts) == (Status.OK, 42, 1), describe(victim)
        assert box.workers_replaced == 0


def test_the_worker_removes_any_tree_and_follows_no_link(tmp_path: Path) -> None:
    from potrun.sandbox.kernel.scratch import remove_tree

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("x")
    tree = tmp_path / "scratch"
    deep = tree
    for _ in range(300):  # deep (a path of 3,000 would need chdir: os.makedirs takes whole paths)
        deep = deep / "a"
    deep.mkdir(parents=True)
    (deep / "file").write_text("x")
    for k in range(200):  # wide
        (tree / f"d{k}").mkdir()
        (tree / f"d{k}" / "f").write_text("x")
    (tree / "link").symlink_to(outside)
    (deep / "link").symlink_to(outside / "keep")
    remove_tree(str(tree))
    assert not tree.exists()
    assert (outside / "keep").read_text() == "x"


# ------------------------------------------------- a fork and the warm runner share no uid

SIGNAL_EVERY_PID = r"""
import os, signal
sent = []
for pid in range(2, 400):
    if pid == os.getpid():
        continue
    try:
        signal.pidfd_send_signal(os.pidfd_open(pid), signal.SIGSTOP)
        sent.append(pid)
    except OSError:
        pass
ans = sent
"""


def test_a_fork_cannot_stop_the_warm_runner_that_waits_for_it(backend: str) -> None:
    """Red team, session 13: a fork shared the paused warm runner's uid, SIGSTOPped it through a pidfd
    (no audit event), and the next program timed out. Forks now run as a uid of their own."""
    with Sandbox(backend, policy="trusted", workers=1, timeout=TIMEOUT_S) as box:
        warm, stopper, victim = box.run_many(["ans = 1", SIGNAL_EVERY_PID, "ans = 42"])
        assert warm.isolation == "warm" and stopper.isolation == "fork", (describe(warm), describe(stopper))
        assert (stopper.status, stopper.value) == (Status.OK, []), describe(stopper)
        assert (victim.status, victim.value, victim.attempts) == (Status.OK, 42, 1), describe(victim)


def test_a_fork_cannot_leave_notes_in_the_warm_runner_s_folder(backend: str) -> None:
    """The warm runner's folder was writable by forks (their uid), a channel to every later program
    and a tmpfs they could fill; it is the warm runner's alone now."""
    write = "open('../warm/note', 'w').write('left by an earlier program')\nans = 1"
    read = "import os\nans = os.path.exists('../warm/note')"
    with Sandbox(backend, policy="trusted", workers=1, timeout=TIMEOUT_S, isolation="fork") as box:
        wrote, looked = box.run_many([write, read])
        assert (wrote.status, wrote.error_type) == (Status.ERROR, "PermissionError"), describe(wrote)
        assert (looked.status, looked.value) == (Status.OK, False), describe(looked)


# ------------------------------------------- a fork's memory holds no other program

MEMORY_SCAN = r"""
import ctypes, re
own = 'SECRET' '_SOURCE_9'  # found: the scan sees this program's own source
patterns = {'sources': re.compile(b'SECRET' + b"' '" + b'_SOURCE_([0-9])'), 'answers': re.compile(b'ANSWER' + b'_LEAK_([0-9])')}
found = {kind: set() for kind in patterns}
with open('/proc/self/maps') as maps:
    regions = [line.split() for line in maps]
for region in regions:
    if 'r' not in region[1] or (len(region) > 5 and region[5] not in ('[heap]', '[stack]')):
        continue  # files, and the kernel's pages (vvar, vdso: reading some of them is a SIGBUS)
    low, high = (int(x, 16) for x in region[0].split('-'))
    data = ctypes.string_at(low, high - low)
    for kind, pattern in patterns.items():
        found[kind].update(match.group(1).decode() for match in pattern.finditer(data))
ans = [sorted(found['sources']), sorted(found['answers'])]
"""


def _other_program(i: int) -> str:
    return f"source = 'SECRET' '_SOURCE_{i}'\nans = 'ANSWER_' 'LEAK_{i}'"


def test_a_fork_cannot_read_the_programs_before_or_after_it(backend: str) -> None:
    """Red team, session 14: forked from the worker, a program read in its own memory (ctypes, no
    system call) the sources queued behind it and the answers of the programs before it. Forks are
    made by the fork server, which never holds a program: this one finds its own source only."""
    others = [_other_program(i) for i in range(6)]
    with Sandbox(backend, policy="trusted", isolation="fork", workers=1, timeout=60) as box:
        results = list(box.run_many([*others[:3], MEMORY_SCAN, *others[3:]]))
    scan = results[3]
    assert scan.status is Status.OK, describe(scan)
    assert scan.value == [["9"], []], scan.value  # its own source, no other's, and no answer
    assert [r.value for r in results[:3] + results[4:]] == [f"ANSWER_LEAK_{i}" for i in range(6)]


# ------------------------------------------- no process outlives its program through clone's flags

SIBLING = r"""
import os, sys, time
libc = sys.modules['potrun.sandbox.kernel.isolation']._libc  # the runner's own handle: no dlopen
me = os.getpid()
pid = libc.syscall(56 if os.uname().machine == 'x86_64' else 220, 0x8000 | 17, 0, 0, 0, 0)  # clone(CLONE_PARENT | SIGCHLD)
if pid == 0:
    os.setsid()  # out of the program's group, which the worker kills
    os.closerange(0, 1024)
    while libc.kill(me, 0) == 0:
        time.sleep(0.001)
    while True:  # every later program of the worker (they share a uid)
        libc.kill(-1, 9)
        time.sleep(0.0005)
while pid > 0 and os.getsid(pid) != pid:
    time.sleep(0.001)
ans = pid
"""


def test_a_program_cannot_leave_a_sibling_behind(backend: str) -> None:
    """Red team, session 14: clone(CLONE_PARENT) made the fork server's child, beyond the worker's
    sweep of strays (it sweeps its own children) and the kill of the program's group (after setsid):
    it outlived its program and SIGKILLed every later one. The seccomp filter refuses the flag (and
    the fork server kills any child but its fork, where there is no filter)."""
    with Sandbox(backend, policy="trusted", isolation="fork", workers=1, timeout=TIMEOUT_S) as box:
        sibling, *victims = box.run_many(
            [
                SIBLING,
                "ans = 42",
                "import subprocess, sys\nans = subprocess.run([sys.executable, '-c', '']).returncode",
                "ans = 42",
            ]
        )
        if box.capabilities.get("seccomp"):
            assert (sibling.status, sibling.value) == (Status.OK, -1), describe(sibling)
        for victim, value in zip(victims, (42, 0, 42), strict=True):
            assert (victim.status, victim.value, victim.attempts) == (Status.OK, value, 1), describe(victim)
        assert box.workers_replaced == 0
