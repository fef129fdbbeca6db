"""The OS boundary around a program that escaped its policy (issue 14, classes 1-4).

Every program here runs under the trusted policy (plain Python, no code restriction: it stands for a
program that got past the restricted one) in a fork runner, on both backends. Each test checks from
outside the sandbox (the host's files, sockets, process table and cgroups) that the program could not
read the host, see potrun, reach its worker, exceed its memory limit, or outlive potrun.
"""

from __future__ import annotations

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
from conftest import TIMEOUT_S, assert_pool_healthy, describe, process_table, worker_host_pid

from potrun import Sandbox, Status

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
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
    paths = [str(secret), str(ROOT / "README.md"), str(SHARED / "DESIGN.md"), "/etc/passwd", "/etc/hostname"]
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
    backend, marker, canary = sys.argv[1:4]
    program = f"MARKER = {marker!r}\\n" + sys.stdin.read()
    with Sandbox(backend, policy="trusted", workers=1, timeout=90) as box:
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
        [sys.executable, "-c", POTRUN, backend, marker, "canary-potrun-cmdline"],
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


def _shm_program(key: int, mode: str) -> str:
    # a child process: the trusted runner's audit hook is the runner's, not its children's
    return (
        "import subprocess, sys\n"
        f"out = subprocess.run([sys.executable, '-c', {_SHM_HELPER!r}, '{key}', '{mode}'], capture_output=True, text=True)\n"
        "ans = (out.stdout + out.stderr).strip()[-200:]\n"
    )


def _host_shm_keys() -> set[int]:
    rows = Path("/proc/sysvipc/shm").read_text().splitlines()[1:]
    return {int(row.split()[0]) for row in rows if row.split()}


def test_a_sysv_segment_outlives_neither_its_program_nor_reaches_the_host() -> None:
    """A SysV shared memory segment is a channel to later programs, and memory charged to the worker
    after its program ended (red team, session 13: on the host's IPC namespace it outlived potrun).
    The process backend's worker has an IPC namespace of its own and empties it after each forked
    program. (A container has its own, private one; its worker lacks the capability to empty it
    between programs: the process backend is the one this test can hold to it.)"""
    key = 0x504F5452
    with Sandbox("process", policy="trusted", isolation="fork", workers=1, timeout=TIMEOUT_S) as box:
        wrote, read = box.run_many([_shm_program(key, "w"), _shm_program(key, "r")])
        assert (wrote.status, wrote.value) == (Status.OK, "wrote"), describe(wrote)
        assert (read.status, read.value) == (Status.OK, "no segment"), describe(read)
        assert key not in _host_shm_keys()


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


def test_the_worker_removes_any_tree_and_follows_no_link(tmp_path: Path) -> None:
    from potrun.sandbox.worker import _remove_tree

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
    _remove_tree(str(tree))
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
