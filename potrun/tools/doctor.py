"""`potrun doctor`: which isolation mechanisms work on this machine, in plain language.

`diagnose("process")` starts a one-worker sandbox and reads what its worker could enforce (its hello's
capabilities), then checks the memory limit by running a program over it. `diagnose("docker")` checks
the Docker SDK, the engine and the image, starts a one-container sandbox, reads the container's
hardening back from the engine and runs the same probes inside it. Every line starts with

    [ok]  works here
    [--]  not available here; what takes its place is said on the line
    [!!]  broken: potrun cannot run this way until it is fixed

`cleanup()` is `potrun doctor --cleanup`: it removes sandbox containers left by a potrun that died.
"""

from __future__ import annotations

import os
from typing import Any

from potrun.types import UsageError

OK, NO, BAD = "[ok]", "[--]", "[!!]"
PROBE_MEMORY_MB = 256  # the memory probe runs under this limit and asks for twice as much

_PROBE_INTERFACES = "import socket\nans = [name for _, name in socket.if_nameindex()]"
_PROBE_MEMORY = f"block = bytearray({2 * PROBE_MEMORY_MB} * 1024 * 1024)\nans = len(block)"
_PROBE_IDENTITY = "import os\nans = [os.getuid(), os.geteuid()]"
_PROBE_SECCOMP = (
    "ans = [line.split()[1] for line in open('/proc/self/status') if line.startswith('Seccomp:')]"
    "\nans = int(ans[0]) if ans else -1"
)


def diagnose(backend: str = "process") -> list[str]:
    """Plain-language lines about what the sandbox can enforce on this machine with `backend`."""
    diagnoses = {"process": _diagnose_process, "docker": _diagnose_docker}
    if backend not in diagnoses:
        raise UsageError(f"unknown backend {backend!r}; choose one of {', '.join(diagnoses)}")
    return diagnoses[backend]()


# ------------------------------------------------------------------------------------------ process


def _diagnose_process() -> list[str]:
    from potrun.sandbox.kernel import isolation

    lines = ["backend process: workers are local processes (python -s -P -m potrun.sandbox.inside.worker)", tier_line()]
    capabilities, error = _worker_capabilities("process")
    if capabilities is None:
        return [*lines, f"{BAD} the worker did not start: {error}"]
    lines += [
        _line(
            capabilities.get("network_namespace"),
            "network namespace: programs run in an empty network namespace (no network at all)",
            "network namespace: not allowed here; the restricted policy refuses socket imports and a "
            "guard refuses connect/bind/sendto in trusted programs",
        ),
        _line(
            capabilities.get("private_scratch"),
            f"scratch: programs write only to a private {isolation.SCRATCH_MB} MiB tmpfs, never to the disk",
            "scratch: no private tmpfs (needs root for a mount namespace); programs' files go to the "
            "temporary directory's disk, limited only per file (RLIMIT_FSIZE)",
        ),
        _line(
            capabilities.get("read_only_files"),
            "files: programs see a read-only file system, but for their scratch directory",
            "files: programs may write wherever their user may (only root workers make it read-only)",
        ),
        _line(
            capabilities.get("pids_cgroup"),
            "pids cgroup: each worker's programs are capped in number of processes by a cgroup",
            "pids cgroup: not available (needs root and cgroup v1 pids); RLIMIT_NPROC caps processes "
            "when runners are not root",
        ),
        _line(
            capabilities.get("drop_privileges"),
            "privilege drop: programs run as an unprivileged uid of their worker's own (no capability: "
            "no raised limits, mounts, namespaces, or signals to other users' processes)"
            + (
                f"; it may read any file, since Python ({os.path.dirname(os.__file__)}) is not readable "
                "by other users and could not be opened to them"
                if capabilities.get("reads_all_files")
                else ""
            ),
            "privilege drop: not done (potrun is not root); programs run as potrun's own user",
        ),
        _line(
            capabilities.get("subreaper"),
            "subreaper: processes a program leaves behind are found and killed",
            "subreaper: not available; a program's orphans are only killed with its process group",
        ),
        *boundary_lines(capabilities),
    ]
    lines += _probe_programs("process", network_expected=bool(capabilities.get("network_namespace")))
    return lines


def tier_line() -> str:
    """Which tiers this Python has: the warm tier needs a release whose bytecode the verifier's review
    covers; without one every program forks (slower, never less safe)."""
    import platform

    from potrun.policies.pure import warm_tier_refusal

    refusal = warm_tier_refusal()
    return _line(
        refusal is None,
        f"tiers warm and fork: Python {platform.python_version()}'s bytecode is reviewed, so programs "
        "proven pure run in a long-lived warm runner and every other in a fresh fork",
        f"tiers fork only, no warm tier: {refusal} (several times slower per program, never less safe)",
    )


def boundary_lines(capabilities: dict[str, Any]) -> list[str]:
    """The OS boundary around a program that escaped its policy, one line per mechanism: what it
    stops, or, where the machine lacks it, what is then not stopped."""
    return [
        _line(
            capabilities.get("minimal_root"),
            "minimal root: programs see only Python's installation (read-only), the libraries it loads, "
            "/dev/null, /dev/zero, /dev/urandom, their scratch and their own /proc: no host file (not /tmp, "
            "/home, /root, /etc, the project), no unix socket on the host's file system",
            "minimal root: not built (needs root and a mount namespace); programs see every file their "
            "uid may read, and may connect to world-writable unix sockets on the host",
        ),
        _line(
            capabilities.get("pid_namespace"),
            "PID namespace: the worker is init of its own; programs see no process outside it (not "
            "potrun, nor its command line), and when the worker dies the kernel kills all that is left "
            "in it: nothing a program starts outlives potrun (Ctrl-C, SIGTERM or SIGKILL)",
            "PID namespace: not available (needs root); programs see the machine's processes and their "
            "command lines; a daemon a program starts is swept only while its worker lives to do it",
        ),
        _line(
            capabilities.get("memory_cgroup"),
            "memory cgroup: one limit on all of a program's memory, every process, memfd and tmpfs page "
            "(RLIMIT_AS stays as the first line); going over it is status memory_limit",
            "memory cgroup: not available (needs root and a memory controller); memory is limited per "
            "process only (RLIMIT_AS): several processes, memfds or tmpfs files can together hold more",
        ),
        _line(
            capabilities.get("non_dumpable"),
            "non-dumpable worker: programs cannot open the worker's /proc entries (its descriptors, "
            "memory, environment) nor ptrace it, even where they share its uid",
            "non-dumpable worker: not set; a program of the worker's uid could write the worker's memory",
        ),
    ]


def _worker_capabilities(backend: str, **options: Any) -> tuple[dict[str, Any] | None, str]:
    from potrun.sandbox.api import Sandbox

    try:
        with Sandbox(backend, workers=1, **options) as box:
            return dict(box.capabilities), ""
    except Exception as exc:
        return None, str(exc)


def _probe_programs(backend: str, *, network_expected: bool, **options: Any) -> list[str]:
    """Run probes as trusted programs (plain Python, every OS limit still on) in a fork runner."""
    from potrun.sandbox.api import Sandbox

    lines = []
    try:
        with Sandbox(backend, workers=1, policy="trusted", memory_mb=PROBE_MEMORY_MB, timeout=20, **options) as box:
            memory, interfaces, identity, seccomp = box.run_many(
                [_PROBE_MEMORY, _PROBE_INTERFACES, _PROBE_IDENTITY, _PROBE_SECCOMP]
            )
    except Exception as exc:
        return [f"{BAD} probe programs could not run: {exc}"]
    lines.append(
        _line(
            memory.status.value == "memory_limit",
            f"memory limit: a program asking for {2 * PROBE_MEMORY_MB} MB under a {PROBE_MEMORY_MB} MB limit "
            "was stopped (RLIMIT_AS)",
            f"memory limit: a program over its {PROBE_MEMORY_MB} MB limit was not stopped "
            f"(status {memory.status.value})",
            bad=True,
        )
    )
    if interfaces.ok:
        only_lo = interfaces.value == ["lo"]
        lines.append(
            _line(
                only_lo,
                "network: a program sees no interface but loopback",
                f"network: a program sees interfaces {interfaces.value}",
                bad=network_expected,
            )
        )
    if identity.ok and isinstance(identity.value, list):
        uid = identity.value[0]
        lines.append(_line(uid != 0, f"programs run as uid {uid}", "programs run as root (uid 0)"))
    if seccomp.ok:
        lines.append(
            _line(
                seccomp.value == 2,
                "seccomp: programs run under a system call allow-list (potrun's, inherited from the worker: "
                "only the calls Python, numpy, sympy and pandas make; no mounts, new namespaces, ptrace, "
                "io_uring, bpf...; in a container also the engine's default profile)",
                "seccomp: no system call filter (the kernel or machine refused it): the kernel's whole "
                "system call surface is reachable; the minimal root, namespaces, cgroups and uid "
                "remain the boundary",
            )
        )
    return lines


# ------------------------------------------------------------------------------------------- docker


def _diagnose_docker() -> list[str]:
    from potrun.sandbox.parent import docker as backend
    from potrun.types import SandboxUnavailable

    lines = ["backend docker: each worker is a long-lived hardened container from the sandbox image"]
    try:
        sdk = backend.docker_module()
    except SandboxUnavailable as exc:
        return [*lines, f"{BAD} {exc}"]
    lines.append(f"{OK} Docker SDK for Python installed (docker {getattr(sdk, '__version__', '?')})")
    try:
        client = backend.connect(timeout=10)
    except SandboxUnavailable as exc:
        return [*lines, f"{BAD} {exc}"]
    info = _safe(client.info) or {}
    lines.append(
        f"{OK} Docker engine reachable (server {info.get('ServerVersion', '?')}, storage driver "
        f"{info.get('Driver', '?')}, cgroup v{info.get('CgroupVersion', '?')})"
    )
    try:
        image = backend.require_image(client, backend.DEFAULT_IMAGE)
    except SandboxUnavailable as exc:
        return [*lines, f"{BAD} {exc}"]
    size = (image.attrs.get("Size") or 0) / 1e6
    lines.append(
        f"{OK} image {backend.DEFAULT_IMAGE} present ({image.short_id}, {size:.0f} MB, "
        f"created {str(image.attrs.get('Created', '?'))[:19]})"
    )
    removable, _ = _stale_containers(client)
    if removable:
        lines.append(
            f"{NO} {len(removable)} sandbox container(s) left by a potrun that died: "
            "remove them with `potrun doctor --cleanup`"
        )

    from potrun.sandbox.api import Sandbox

    try:
        before = {container.id for container in _own_containers(client)}
        with Sandbox("docker", workers=1) as box:
            capabilities = dict(box.capabilities)
            # The worker's container: the one of this process that the sandbox's start added.
            container = next(c for c in _own_containers(client) if c.id not in before)
            host = container.attrs.get("HostConfig", {})
            config = container.attrs.get("Config", {})
    except Exception as exc:
        return [*lines, f"{BAD} a worker container did not start: {exc}"]
    lines += _container_lines(host, config)
    lines += [
        f"{OK} inside the container the worker cannot unshare a network namespace (not needed: the "
        "container has no network), nor a PID namespace or cgroups: the container's own take their "
        "place (its files are the image's, its processes its own, its memory limit covers the worker "
        "and its program together)",
        _line(
            capabilities.get("drop_privileges"),
            "privilege drop: programs run as a uid other than the worker's",
            "privilege drop: not done; programs share the worker's uid",
            bad=True,
        ),
        _line(
            capabilities.get("non_dumpable"),
            "non-dumpable worker: programs cannot open the worker's /proc entries (its stdout, the stream to "
            "potrun; its memory) nor ptrace it",
            "non-dumpable worker: not set",
            bad=True,
        ),
        _line(
            capabilities.get("subreaper"),
            "subreaper: processes a program leaves behind are found and killed",
            "subreaper: not available in the container",
        ),
    ]
    lines += _probe_programs("docker", network_expected=True)
    return lines


def _own_containers(client: Any) -> list[Any]:
    """The sandbox containers this process started (by their pid and host labels)."""
    import socket

    from potrun.sandbox.parent import docker as backend

    mine = {backend.PID_LABEL: str(os.getpid()), backend.HOST_LABEL: socket.gethostname()}
    return [c for c in backend.list_containers(client) if mine.items() <= (c.labels or {}).items()]


def _container_lines(host: dict[str, Any], config: dict[str, Any]) -> list[str]:
    memory_mb = (host.get("Memory") or 0) // (1024 * 1024)
    checks = [
        (
            host.get("NetworkMode") == "none",
            "network: --network none (loopback only)",
            f"network mode is {host.get('NetworkMode')!r}, not none",
        ),
        (
            bool(host.get("ReadonlyRootfs")),
            "root filesystem read-only, /tmp a tmpfs",
            "the root filesystem is writable",
        ),
        ("ALL" in (host.get("CapDrop") or []), "all capabilities dropped", "capabilities are not dropped"),
        (
            "no-new-privileges" in (host.get("SecurityOpt") or []),
            "no-new-privileges set",
            "no-new-privileges is not set",
        ),
        (
            _user_ok(host, config),
            f"user {config.get('User')} with capabilities "
            f"{', '.join(sorted(host.get('CapAdd') or [])) or 'none'} only; programs run as another uid",
            "the worker runs as root with more than the capabilities it needs",
        ),
        (memory_mb > 0, f"memory limit {memory_mb} MB per container (cgroup), swap off", "no memory limit"),
        ((host.get("PidsLimit") or 0) > 0, f"pids limit {host.get('PidsLimit')} per container", "no pids limit"),
        (
            (host.get("NanoCpus") or 0) > 0,
            f"CPU limit {(host.get('NanoCpus') or 0) / 1e9:g} CPU per container",
            "no CPU limit",
        ),
    ]
    return [_line(good, "container: " + yes, "container: " + no, bad=True) for good, yes, no in checks]


# ------------------------------------------------------------------------------------------ cleanup


def _stale_containers(client: Any) -> tuple[list[Any], list[Any]]:
    from potrun.sandbox.parent import docker as backend

    stale: list[Any] = []
    live: list[Any] = []
    for container in backend.list_containers(client):
        (live if backend.owner_alive(container.labels or {}) else stale).append(container)
    return stale, live


def cleanup(all_sessions: bool = False) -> list[str]:
    """Remove sandbox containers (label potrun.sandbox=1) whose potrun process is gone (all of them with
    `all_sessions`); lines saying what was done. Raises SandboxUnavailable without SDK or engine."""
    from potrun.sandbox.parent import docker as backend

    removed, kept = backend.cleanup(all_sessions=all_sessions)
    lines = [f"removed {len(removed)} leftover sandbox container(s)" + (f": {', '.join(removed)}" if removed else "")]
    if kept:
        lines.append(
            f"kept {len(kept)} container(s) of potrun processes still running: {', '.join(kept)} "
            "(--all removes them too)"
        )
    return lines


# -------------------------------------------------------------------------------------------- helpers


def _line(good: Any, yes: str, no: str, *, bad: bool = False) -> str:
    return f"{OK} {yes}" if good else f"{BAD if bad else NO} {no}"


def _user_ok(host: dict[str, Any], config: dict[str, Any]) -> bool:
    """Not root, or root with all capabilities dropped but those the worker needs for its runners."""
    from potrun.sandbox.parent import docker as backend

    if str(config.get("User", "")) not in ("", "0", "root"):
        return True
    added = {name.upper().removeprefix("CAP_") for name in host.get("CapAdd") or []}
    return "ALL" in (host.get("CapDrop") or []) and added <= set(backend.RUNNER_CAPABILITIES) and bool(added)


def _safe(call: Any) -> Any:
    try:
        return call()
    except Exception:
        return None


__all__ = [
    "cleanup",
    "diagnose",
]
