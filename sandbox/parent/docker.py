"""The docker backend: each worker slot is one long-lived, hardened container running the worker.

The container runs the same worker program as the process backend (`python3 -m potrun.sandbox.inside.worker
--scratch-is-private`) and speaks the same frames, over the container's attached stdin and stdout: a program costs
one round trip, not a `docker run`. The docker SDK for Python is imported lazily (`pip install
'potrun[docker]'`).

Each container is created with (see `container_options`):

    network_mode="none"             no interface but loopback
    read_only=True                  read-only root filesystem
    tmpfs /tmp (64 MB, 0711)        the only writable place: the worker's scratch directories, each
                                    runner's its own (and /dev/mqueue an empty read-only tmpfs)
    mem_limit                       memory_mb + WORKER_OVERHEAD_MB (one worker per container), swap
                                    disabled; the per-program limit stays RLIMIT_AS (memory_mb above
                                    what the runner was forked with) set by the worker, the cgroup
                                    limit is the container-wide backstop above it: the worker itself
                                    (Python + numpy, ~60 MB), the /tmp tmpfs (which the memory cgroup
                                    charges, up to 64 MB) and page cache fit in the overhead. No
                                    templates here: this limit is fixed when the container starts, so
                                    their room would be room for a program's memfds and children too
    pids_limit                      max_processes + PIDS_OVERHEAD (the worker, its fork server, its
                                    warm runner; no templates, so no placeholders of their slots)
    nano_cpus=1e9                   one CPU per container
    user="0", cap_drop=["ALL"],     the worker is root with five capabilities only, to hand its runners
    cap_add=RUNNER_CAPABILITIES,    another uid (SETUID, SETGID), make and clean their folders (CHOWN,
    security_opt=                   DAC_OVERRIDE) and kill them (KILL); runners have none, and
      ["no-new-privileges"]         no-new-privileges keeps them from regaining any (no setuid binary)
                                    (the worker raises each runner's oom_score_adj to 1000, so that
                                    the container's OOM killer takes the program, not the worker; a
                                    negative score for the worker would need CAP_SYS_RESOURCE, which
                                    this machine's engine lacks)
    hostname="potrun"               the name every container shows its programs (the process backend's
                                    workers set it in a UTS namespace of their own)
    ipc_mode="none"                 an IPC namespace of its own and no /dev/shm, which would outlive
                                    programs (the worker cannot empty SysV objects between programs
                                    here, that needs CAP_SYS_ADMIN: the seccomp filter refuses them)
    labels                          potrun.sandbox=1, potrun.session=<uuid>, potrun.pid, potrun.host
    log_config none                 the frames are not written to the engine's log files on the host
    environment                     PYTHONHASHSEED=<hash_seed>
    stdin_open, StdinOnce, tty=False, auto_remove=True

Life cycle. Containers start in parallel on a small thread pool: `start_worker` returns at once and the
connection waits for its container only when first used, so a pool of N starts in about the time of one.
`kill()` closes the attach socket and force-removes the container (in the background; `close()` waits for
all removals and sweeps this session's label). Nothing is left behind when potrun dies either:
- Ctrl-C and errors unwind through `close()`; an atexit hook and a SIGTERM/SIGHUP handler (installed
  only where the handler was the default) remove whatever this session's label still marks;
- SIGKILL of potrun: a reaper process (its own session, started with the first container) sees its
  pipe from potrun end and removes the session's containers. Independently of it, the attach socket
  closes, the engine then closes the worker's stdin (StdinOnce), the worker exits once it has run what
  it had already received, and auto_remove deletes the container;
- a container that was created but never started (potrun killed in between) is removed by
  `potrun doctor --cleanup`, which removes containers whose potrun process is gone.

Inside the container the worker is root with only RUNNER_CAPABILITIES: it cannot unshare a network
namespace (there is no network to hide: `--network none`), nor a PID namespace (the container is one: the
worker is its init, and nothing outlives it), nor create a pids or memory cgroup (the container's own
limits are the cap; the worker sees the pids limit and sets no RLIMIT_NPROC, and tells the container's
OOM kills apart as `memory_limit`). It runs its programs as other uids (UID_BASE + 1, and for forks
UID_BASE + 1 + FORK_UID_OFFSET), and is
non-dumpable: a program can neither open the worker's /proc entries (its stdout, the stream to potrun;
its memory) nor ptrace it. Its hello reports exactly that.

Why not `python3 -I`: -I implies -E, which ignores PYTHONHASHSEED, so the hash seed would not be
applied. The container's environment is fixed by the image and by us, so `-s -P` (no user site, no
script directory on sys.path) plus the explicit environment keeps what -I is for and keeps the seed.
"""

from __future__ import annotations

import atexit
import functools
import logging
import os
import select
import signal
import socket
import ssl
import struct
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import TYPE_CHECKING, Any

from potrun.sandbox.kernel.isolation import HOSTNAME, SCRATCH_OPTIONS, process_alive
from potrun.sandbox.wire.command import worker_command
from potrun.types import Limits, SandboxUnavailable

if TYPE_CHECKING:
    from potrun.sandbox.config import SandboxConfig

log = logging.getLogger("potrun.sandbox.parent.docker")

DEFAULT_IMAGE = "potrun-sandbox:latest"  # what `potrun image build` tags, and what runs without --image
SANDBOX_LABEL = "potrun.sandbox"
SESSION_LABEL = "potrun.session"
PID_LABEL = "potrun.pid"
HOST_LABEL = "potrun.host"
# The worker process, the /tmp tmpfs, page cache: above the program's own limit (no templates in a
# container: `templates.Templates.enabled`).
WORKER_OVERHEAD_MB = 256
# The worker, its fork server and its warm runner (no templates in a container, nor placeholders of
# their slots: `templates.templates_allowed`): the program gets max_processes.
PIDS_OVERHEAD = 3
NANO_CPUS = 1_000_000_000  # one CPU per container
# /tmp: the worker closes it to its runners (a copy of the image's 1777 whatever the mode here), who
# write only their own folders in it. /dev/mqueue: POSIX message queues (which the seccomp filter
# refuses as system calls) are files there too, a place to leave notes for the next program: an empty,
# read-only tmpfs over it.
TMPFS = {"/tmp": f"rw,{SCRATCH_OPTIONS},mode=0711", "/dev/mqueue": "ro,size=4k,mode=0555"}
CONTAINER_USER = "0"  # root without capabilities but RUNNER_CAPABILITIES: see the module's docstring
RUNNER_CAPABILITIES = ["CHOWN", "DAC_OVERRIDE", "KILL", "SETGID", "SETUID"]
WORKER_COMMAND = tuple(worker_command("python3"))  # the image's interpreter (`command`)
START_TIMEOUT_S = 60.0  # creating, attaching and starting one container
REMOVE_TIMEOUT_S = 30.0  # close() waiting for this session's containers to be gone
STALL_S = 10.0  # a partial stream header that is not completed within this is a broken stream
MAX_PARALLEL = 8  # containers created/removed at once
STDERR_TAIL = 4096
API_TIMEOUT_S = 60

_STREAM_HEADER = struct.Struct(">BxxxL")
_STDOUT, _STDERR = 1, 2
INSTALL_HINT = "the Docker SDK for Python is not installed: pip install 'potrun[docker]'"
BUILD_HINT = "run `potrun image build` (or .ci/setup-docker.sh where no registry is reachable)"


# ---------------------------------------------------------------------------------------- the engine


def docker_module() -> Any:
    """The docker SDK, imported on first use; SandboxUnavailable when it is not installed."""
    try:
        import docker
    except ImportError:
        raise SandboxUnavailable(INSTALL_HINT) from None
    return docker


def connect(timeout: float = API_TIMEOUT_S) -> Any:
    """A docker client that has answered a ping; SandboxUnavailable when no engine is reachable."""
    docker = docker_module()
    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
    except Exception as exc:  # DockerException, requests' ConnectionError, a socket error...
        detail = str(exc).strip().splitlines()
        raise SandboxUnavailable(
            "no Docker engine is reachable"
            + (f" ({detail[-1][:200]})" if detail else "")
            + ": start dockerd (see .ci/setup-docker.sh) or set DOCKER_HOST"
        ) from None
    return client


def require_image(client: Any, image: str) -> Any:
    """The image object; SandboxUnavailable when the engine does not have it, or when it holds other
    code than this potrun's (`CODE_LABEL`): a worker or policy from before a fix would run silently."""
    docker = docker_module()
    try:
        found = client.images.get(image)
    except docker.errors.ImageNotFound:
        raise SandboxUnavailable(f"the sandbox image {image} is not present: {BUILD_HINT}") from None
    except docker.errors.APIError as exc:
        raise SandboxUnavailable(f"cannot inspect the sandbox image {image}: {exc}") from None
    built_from = (found.labels or {}).get(CODE_LABEL)
    if built_from != code_fingerprint():
        held = "a potrun that did not label its code" if built_from is None else f"other code ({built_from[:12]})"
        raise SandboxUnavailable(
            f"the sandbox image {image} was built from {held}, not this potrun's ({code_fingerprint()[:12]}): "
            f"its worker and policies would not be these; {BUILD_HINT}"
        )
    return found


# The modules that run in the image (the worker, its runners, the policies), as a digest of their source
# files here: `potrun image build` labels the image with it, and `require_image` compares.
CODE_LABEL = "potrun.code"
_IMAGE_PACKAGES = ("potrun.sandbox", "potrun.policies")
_IMAGE_MODULES = ("potrun", "potrun.types")


@functools.lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """SHA-256 of the source of what runs in the sandbox image, by module name (the same for a wheel
    and for an editable install of the same files)."""
    import hashlib
    import importlib.util

    files: dict[str, Path] = {}
    for name in _IMAGE_PACKAGES:
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.submodule_search_locations is not None
        root = Path(next(iter(spec.submodule_search_locations)))
        for path in root.rglob("*.py"):
            files[".".join((name, *path.relative_to(root).with_suffix("").parts))] = path
    for name in _IMAGE_MODULES:
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin is not None
        files[name] = Path(spec.origin)
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode() + b"\0" + files[name].read_bytes() + b"\0")
    return digest.hexdigest()


# ------------------------------------------------------------------------ the registry's entry points


def make_backend(config: SandboxConfig) -> DockerBackend:
    """The docker backend of `config` (config.BACKENDS): connects to the engine, checks the image."""
    return DockerBackend(image=config.image, hash_seed=config.hash_seed, limits=config.limits)


def unavailable(config: SandboxConfig) -> str | None:
    """Why the docker backend cannot run `config` here (no SDK, no engine, no image), or None."""
    try:
        client = connect(timeout=10)
    except SandboxUnavailable as exc:
        return str(exc)
    try:
        require_image(client, config.image or DEFAULT_IMAGE)
    except SandboxUnavailable as exc:
        return str(exc)
    finally:
        client.close()
    return None


def container_options(
    *, image: str, limits: Limits, hash_seed: int, session: str, name: str | None = None
) -> dict[str, Any]:
    """Keyword arguments of `client.containers.create` for one worker slot: all of the hardening."""
    memory_mb = limits.memory_mb + WORKER_OVERHEAD_MB
    return {
        "image": image,
        "command": [*WORKER_COMMAND, "--scratch-is-private"],
        "name": name,
        "stdin_open": True,  # with detach=False (the default) the SDK also sets StdinOnce
        "tty": False,  # no tty: the output is multiplexed with 8-byte headers, stdin is passed as is
        "detach": False,
        "network_mode": "none",
        "hostname": HOSTNAME.decode(),  # every container the same name: never the host's, nor its own id
        "read_only": True,
        "tmpfs": dict(TMPFS),
        "working_dir": "/tmp",
        "mem_limit": f"{memory_mb}m",
        "memswap_limit": f"{memory_mb}m",  # no swap on top
        "pids_limit": limits.max_processes + PIDS_OVERHEAD,
        "nano_cpus": NANO_CPUS,
        "cap_drop": ["ALL"],
        "cap_add": list(RUNNER_CAPABILITIES),
        "security_opt": ["no-new-privileges"],
        "ipc_mode": "none",  # an IPC namespace of its own (never the host's or another container's), no /dev/shm
        "user": CONTAINER_USER,
        "labels": {
            SANDBOX_LABEL: "1",
            SESSION_LABEL: session,
            PID_LABEL: str(os.getpid()),
            HOST_LABEL: socket.gethostname(),
        },
        "environment": {"PYTHONHASHSEED": str(hash_seed)},
        "auto_remove": True,
        "log_config": {"type": "none", "config": {}},  # the frames are not logged to the host's disk
    }


# ----------------------------------------------------------------------------------------- cleanup


def _remove(client: Any, container_id: str) -> None:
    """Force-remove a container; gone already (or being removed by auto_remove) is fine."""
    try:
        client.api.remove_container(container_id, force=True)
    except Exception as exc:
        status = getattr(getattr(exc, "response", None), "status_code", None)
        if status not in (404, 409):
            log.debug("removing container %s: %s", container_id[:12], exc)


def list_containers(client: Any, session: str | None = None) -> list[Any]:
    """Containers carrying the potrun sandbox label (of one session when given), running or not."""
    labels = [f"{SANDBOX_LABEL}=1"] + ([f"{SESSION_LABEL}={session}"] if session else [])
    containers: list[Any] = client.containers.list(all=True, filters={"label": labels})
    return containers


def remove_session(session: str, client: Any | None = None, wait_s: float = REMOVE_TIMEOUT_S) -> int:
    """Remove every container of a session and wait until the engine no longer lists them."""
    client = client or connect(timeout=10)
    deadline = time.monotonic() + wait_s
    removed: set[str] = set()
    while True:
        found = [c.id for c in list_containers(client, session)]
        if not found or time.monotonic() > deadline:
            return len(removed)
        for cid in found:
            if cid not in removed:
                _remove(client, cid)
                removed.add(cid)
        time.sleep(0.05)


def owner_alive(labels: dict[str, str]) -> bool:
    """Whether the potrun that made a container (by its labels) may still use it: another machine's
    (that cannot be told), another live process of this machine, or a session of this process still
    open."""
    if labels.get(HOST_LABEL) not in (None, socket.gethostname()):
        return True  # another machine's potrun: we cannot tell, keep it
    try:
        pid = int(labels.get(PID_LABEL, ""))
    except ValueError:
        return False
    if not process_alive(pid):
        return False
    return pid != os.getpid() or labels.get(SESSION_LABEL) in _live_sessions


def cleanup(all_sessions: bool = False, client: Any | None = None) -> tuple[list[str], list[str]]:
    """Remove leftover sandbox containers (labelled potrun.sandbox=1) whose potrun process is gone, or
    all of them with `all_sessions`. Returns (removed names, kept names)."""
    client = client or connect(timeout=10)
    removed, kept = [], []
    for container in list_containers(client):
        if not all_sessions and owner_alive(container.labels or {}):
            kept.append(container.name)
            continue
        _remove(client, container.id)
        removed.append(container.name)
    deadline = time.monotonic() + REMOVE_TIMEOUT_S
    gone = set(removed)
    while gone and time.monotonic() < deadline:
        if not {c.name for c in list_containers(client)} & gone:
            break
        time.sleep(0.05)
    return removed, kept


_live_sessions: dict[str, DockerBackend] = {}
_hooks_lock = threading.Lock()
_hooks_installed = False


def _cleanup_live_sessions() -> None:
    """At exit or on a fatal signal: remove the containers of every session not closed properly."""
    sessions = list(_live_sessions)
    if not sessions:
        return
    try:
        client = connect(timeout=10)  # a fresh client: the session's own may be mid-request
    except SandboxUnavailable:
        return
    for session in sessions:
        try:
            remove_session(session, client, wait_s=10)
        except Exception as exc:
            log.debug("cleanup of session %s: %s", session, exc)
        owner = _live_sessions.pop(session, None)
        if owner is not None:
            reaper, owner._reaper = owner._reaper, None
            _stop_reaper(reaper)


def _on_fatal_signal(signum: int, frame: Any) -> None:
    _cleanup_live_sessions()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _install_hooks() -> None:
    global _hooks_installed
    with _hooks_lock:
        if _hooks_installed:
            return
        _hooks_installed = True
        atexit.register(_cleanup_live_sessions)
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGTERM, signal.SIGHUP):
                if signal.getsignal(signum) == signal.SIG_DFL:
                    signal.signal(signum, _on_fatal_signal)


# The reaper: a small process in its own session that outlives a potrun killed with SIGKILL. It blocks
# reading a pipe from potrun; "closed" means potrun cleaned up itself, anything else (end of file: potrun
# died) makes it remove the session's containers. It imports nothing until then.
_REAPER = (
    "import sys\n"
    "if sys.stdin.buffer.read() != b'closed':\n"
    "    try:\n"
    "        from potrun.sandbox.parent.docker import remove_session\n"
    "        remove_session(sys.argv[1], wait_s=30)\n"
    "    except Exception:\n"
    "        pass\n"
)


def _start_reaper(session: str) -> subprocess.Popen[bytes] | None:
    try:
        return subprocess.Popen(
            [sys.executable, "-P", "-c", _REAPER, session],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd="/",
            start_new_session=True,
        )
    except OSError as exc:
        log.warning("no reaper for docker session %s (%s): `potrun doctor --cleanup` removes leftovers", session, exc)
        return None


def _stop_reaper(reaper: subprocess.Popen[bytes] | None) -> None:
    if reaper is None:
        return
    try:
        assert reaper.stdin is not None
        reaper.stdin.write(b"closed")
        reaper.stdin.close()
        reaper.wait(timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        pass


# ---------------------------------------------------------------------------------------- a worker


class _Attached:
    """A started container, the raw socket of its attach stream (stdin and stdout) and the tail of its
    stderr, read from a second attach stream by a thread: stderr never shares the frames' socket, so a
    read of the frames' socket that yields no stdout payload can only be a header split across reads."""

    __slots__ = ("container_id", "drained", "errors", "name", "sock", "stderr", "stream")

    def __init__(self, container_id: str, name: str, stream: Any, sock: socket.socket, errors: Any = None) -> None:
        self.container_id = container_id
        self.name = name
        self.stream = stream  # the SDK's socket wrapper; holds the HTTP response alive
        self.sock = sock
        self.errors = errors
        self.stderr = bytearray()
        self.drained = threading.Event()
        if errors is None:
            self.drained.set()
        else:
            threading.Thread(target=self._drain_stderr, name=f"potrun-stderr-{name}", daemon=True).start()

    def keep_stderr(self, data: bytes | bytearray) -> None:
        self.stderr += data
        del self.stderr[:-STDERR_TAIL]

    def _drain_stderr(self) -> None:
        sock = getattr(self.errors, "_sock", self.errors)
        buffer = bytearray()
        try:
            sock.settimeout(None)
            while True:
                data = sock.recv(1 << 16)
                if not data:
                    break
                buffer += data
                while len(buffer) >= _STREAM_HEADER.size:
                    _, size = _STREAM_HEADER.unpack_from(buffer, 0)
                    if len(buffer) < _STREAM_HEADER.size + size:
                        break
                    self.keep_stderr(buffer[_STREAM_HEADER.size : _STREAM_HEADER.size + size])
                    del buffer[: _STREAM_HEADER.size + size]
        except OSError:
            pass
        finally:
            self.drained.set()

    def close(self) -> None:
        for stream in (self.stream, self.errors):
            if stream is None:
                continue
            sock = getattr(stream, "_sock", stream)
            for close in (functools.partial(sock.shutdown, socket.SHUT_RDWR), stream.close, sock.close):
                try:
                    close()
                except OSError:
                    pass


class DockerWorker:
    """One worker container, as the pool sees it: a select-able socket carrying the frames.

    Reading demultiplexes the engine's stream format (8-byte headers: type, 3 zero bytes, big-endian
    length) and returns only the stdout payload. The worker's stderr is kept as a short tail (logged
    when its output ends without potrun having killed it)."""

    def __init__(self, backend: DockerBackend, slot: int, future: Future[_Attached]) -> None:
        self.backend = backend
        self.slot = slot
        self._future = future
        self._attached: _Attached | None = None
        self._buffer = bytearray()
        self._stream = 0
        self._remaining = 0  # payload bytes still due for the current header
        self._killed = False

    # -- the connection ------------------------------------------------------------------------------

    def _ready(self) -> _Attached:
        if self._attached is None:
            if self._killed:
                raise OSError("the worker container was removed")
            try:
                self._attached = self._future.result(timeout=START_TIMEOUT_S)
            except FutureTimeout:
                raise SandboxUnavailable(
                    f"docker worker {self.slot}: the container did not start within {START_TIMEOUT_S:g} s"
                ) from None
            except SandboxUnavailable:
                raise
            except Exception as exc:
                raise SandboxUnavailable(f"docker worker {self.slot} could not start: {exc}") from None
        return self._attached

    @property
    def container_id(self) -> str:
        return self._ready().container_id

    @property
    def name(self) -> str:
        return self._ready().name

    def read_fd(self) -> int:
        return self._ready().sock.fileno()

    def write_fd(self) -> int:
        return self._ready().sock.fileno()

    def write(self, data: bytes) -> int:
        sock = self._ready().sock
        try:
            return sock.send(data)
        except (BlockingIOError, InterruptedError):
            return 0

    def read(self) -> bytes:
        """The stdout payload available now; b"" once the stream has ended."""
        sock = self._ready().sock
        out = bytearray()
        stalled_since: float | None = None
        while True:
            try:
                data = sock.recv(1 << 20)
            except (BlockingIOError, InterruptedError):
                data = None
            except ConnectionError:
                data = b""
            if data == b"":  # the end: what is left now, b"" on the next call
                if not out:
                    self._log_stderr()
                return bytes(out)
            if data is not None:
                out += self._demux(data)
                # A TLS socket may hold decrypted bytes that select() does not see: take them now.
                if out and not (isinstance(sock, ssl.SSLSocket) and sock.pending()):
                    return bytes(out)
                continue  # only a header so far: read on
            if out:
                return bytes(out)
            # Nothing more now and no stdout payload yet (a header split across reads): the rest is
            # on its way; b"" would mean the end of the stream.
            now = time.monotonic()
            stalled_since = stalled_since or now
            if now - stalled_since > STALL_S:
                raise OSError("the container's output stream stalled inside a header")
            select.select([sock], [], [], STALL_S)

    def _demux(self, data: bytes) -> bytes:
        buffer = self._buffer
        buffer += data
        out = bytearray()
        pos = 0
        while True:
            if self._remaining:
                take = min(self._remaining, len(buffer) - pos)
                if not take:
                    break
                if self._stream == _STDOUT:
                    out += buffer[pos : pos + take]
                elif self._stream == _STDERR and self._attached is not None:
                    self._attached.keep_stderr(buffer[pos : pos + take])
                pos += take
                self._remaining -= take
                continue
            if len(buffer) - pos < _STREAM_HEADER.size:
                break
            stream, size = _STREAM_HEADER.unpack_from(buffer, pos)
            if stream not in (0, _STDOUT, _STDERR):
                raise OSError(f"not a multiplexed docker stream (header type {stream})")
            self._stream, self._remaining = stream, size
            pos += _STREAM_HEADER.size
        del buffer[:pos]
        return bytes(out)

    @property
    def stderr_tail(self) -> str:
        attached = self._ready()
        attached.drained.wait(1.0)
        return attached.stderr.decode("utf-8", "replace")

    def _log_stderr(self) -> None:
        if not self._killed:
            tail = self.stderr_tail.rstrip()
            if tail:
                log.warning("docker worker %d (%s) ended; its stderr ends with:\n%s", self.slot, self.name, tail)

    def kill(self) -> None:
        """Close the attach stream (the worker's stdin ends) and force-remove the container."""
        if self._killed:
            return
        self._killed = True
        if self._attached is not None:
            self.backend._discard(self._attached)
        else:
            self._future.add_done_callback(self.backend._discard_future)


# --------------------------------------------------------------------------------------- the backend


class DockerBackend:
    """Workers in long-lived hardened containers from the sandbox image (DESIGN.md, "Container backend")."""

    name = "docker"

    def __init__(
        self,
        image: str | None = None,
        hash_seed: int = 0,
        limits: Limits | None = None,
        *,
        client: Any | None = None,
        max_parallel: int = MAX_PARALLEL,
    ) -> None:
        self.image = image or DEFAULT_IMAGE
        self.hash_seed = hash_seed
        self.limits = limits or Limits()
        self.client = client or connect()
        require_image(self.client, self.image)  # a missing image fails here, saying how to build it
        # Here, on the caller's thread (the main one, as a rule), not in start_worker: the pool makes
        # its workers on a thread of its own, where no signal handler can be installed.
        _install_hooks()
        self.session = uuid.uuid4().hex
        self.max_parallel = max_parallel
        self._executor: ThreadPoolExecutor | None = None
        self._removals: list[Future[None]] = []
        self._lock = threading.Lock()
        self._started = 0
        self._reaper: subprocess.Popen[bytes] | None = None

    def options(self, name: str | None = None) -> dict[str, Any]:
        return container_options(
            image=self.image, limits=self.limits, hash_seed=self.hash_seed, session=self.session, name=name
        )

    # -- Backend ---------------------------------------------------------------------------------------

    def start_worker(self, slot: int) -> DockerWorker:
        """Begin starting a container for `slot` and return its connection at once."""
        with self._lock:
            _live_sessions[self.session] = self
            _install_hooks()
            if self._reaper is None:
                self._reaper = _start_reaper(self.session)
            if self._executor is None:
                self._executor = ThreadPoolExecutor(self.max_parallel, thread_name_prefix="potrun-docker")
            self._started += 1
            name = f"potrun-{self.session[:8]}-{slot}-{self._started}"
            future = self._executor.submit(self._launch, name)
        return DockerWorker(self, slot, future)

    def close(self) -> None:
        """Wait for every removal, then sweep whatever this session's label still marks."""
        with self._lock:
            removals, self._removals = self._removals, []
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)  # launches still running finish; their removals are queued
        for future in removals + self._removals:
            try:
                future.result(timeout=REMOVE_TIMEOUT_S)
            except Exception:
                pass
        self._removals = []
        try:
            remove_session(self.session, self.client)
        except Exception as exc:
            log.warning("could not sweep the containers of session %s: %s", self.session, exc)
        _live_sessions.pop(self.session, None)
        reaper, self._reaper = self._reaper, None
        _stop_reaper(reaper)

    # -- containers ------------------------------------------------------------------------------------

    def _launch(self, name: str) -> _Attached:
        docker = docker_module()
        try:
            container = self.client.containers.create(**self.options(name))
        except docker.errors.ImageNotFound:
            raise SandboxUnavailable(f"the sandbox image {self.image} is not present: {BUILD_HINT}") from None
        except docker.errors.APIError as exc:
            raise SandboxUnavailable(f"docker could not create a worker container: {exc.explanation or exc}") from None
        try:
            # Attach before start: nothing the worker writes can be lost or read ahead by the HTTP layer.
            stream = container.attach_socket(params={"stdin": 1, "stdout": 1, "stream": 1})
            errors = container.attach_socket(params={"stderr": 1, "stream": 1})
            sock = getattr(stream, "_sock", stream)
            if not isinstance(sock, socket.socket):
                raise SandboxUnavailable(
                    f"the docker backend needs a socket connection to the engine, not {type(sock).__name__}"
                )
            sock.setblocking(False)
            container.start()
        except BaseException as exc:
            _remove(self.client, container.id)
            if isinstance(exc, docker.errors.APIError):
                raise SandboxUnavailable(
                    f"docker could not start a worker container: {exc.explanation or exc}"
                ) from None
            raise
        return _Attached(container.id, name, stream, sock, errors)

    def _discard(self, attached: _Attached) -> None:
        attached.close()
        with self._lock:
            executor = self._executor
            if executor is not None:
                try:
                    self._removals.append(executor.submit(_remove, self.client, attached.container_id))
                    return
                except RuntimeError:  # shutting down
                    pass
        _remove(self.client, attached.container_id)

    def _discard_future(self, future: Future[_Attached]) -> None:
        if future.cancelled() or future.exception() is not None:
            return
        self._discard(future.result())
