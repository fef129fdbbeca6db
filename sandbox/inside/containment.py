"""The worker's containment: the steps that isolate it, in order, before it reads any request.

Read `Containment.__init__` as the recipe (as nsjail's contain.cc reads): each step is a method named for
what it does, and the kernel mechanisms it calls live in `sandbox/kernel/` (isolation, namespace, memcg,
seccomp, scratch). The order matters where a comment says so: the imports before the namespaces (an
import may read what the minimal root hides), the cgroups before any runner exists (runners inherit
them at fork), the capabilities dropped after the mounts that need them, seccomp last (it refuses mounts
and namespaces to the worker too). `release` undoes what the worker can undo itself when it ends.
Moved out of the worker's `__init__` (#40).
"""

from __future__ import annotations

import importlib
import os

from potrun.sandbox.inside import cputimer, seeding
from potrun.sandbox.inside.templates import TEMPLATE_TASKS
from potrun.sandbox.kernel import isolation, memcg, namespace, seccomp
from potrun.sandbox.kernel.scratch import build_minimal_root, remove_tree, temporary_directory

MAX_PROCESSES = 32  # a program's processes, capped by the worker's pids cgroup
# The worker's own processes in its pids cgroup, above a program's: itself, its fork server, its warm
# runner and its templates' tasks (or the placeholders that hold their slots: `forkserver`).
OWN_PROCESSES = 3 + TEMPLATE_TASKS


class Containment:
    """What isolates a worker, and what it learned doing so (the capabilities its hello reports)."""

    def __init__(
        self,
        uid_base: int | None,
        preload: tuple[str, ...],
        scratch: str | None,
        scratch_is_private: bool,
        host_pid: int | None,
        pid_namespace: bool,
    ) -> None:
        """`host_pid`: this worker's pid as potrun sees it (outside its PID namespace, if
        `pid_namespace`); its cgroups and its runners' uid are named after it."""
        self.host_pid = host_pid or os.getpid()
        self.pid_namespace = pid_namespace
        self._prepare_interpreter(preload)
        self._enter_namespaces()
        self._join_cgroups()
        self._protect_from_oom_killer()
        self._make_scratch(scratch, scratch_is_private)
        self._children = isolation.ChildList()
        self._prepare_runner_entry(uid_base)
        self._drop_privileges()
        # Last, since it refuses mounts and namespaces to the worker too; inherited by every fork for
        # free (a system call pays ~40 ns more, a fork nothing).
        self.seccomp = seccomp.install()

    def _prepare_interpreter(self, preload: tuple[str, ...]) -> None:
        seeding.install()  # before any import makes a generator
        cputimer.default_signals()  # the CPU limits end a runner by the default actions of signals
        for name in preload:
            try:
                importlib.import_module(name)
            except ImportError:
                pass
        isolation.scrub_environment()

    def _enter_namespaces(self) -> None:
        self.network_isolated = isolation.unshare_network()
        # SysV shared memory, semaphores and queues: the worker's own namespace, emptied after each forked
        # program (`remove_ipc_objects`), so that none is the host's, another worker's or a later program's.
        self.ipc_isolated = isolation.unshare_ipc()
        self.uts_isolated = isolation.unshare_uts()  # (a container's name is the engine's: a fixed one too)
        self.subreaper = isolation.set_subreaper()

    def _join_cgroups(self) -> None:
        # The worker joins its cgroups itself: runners inherit them at fork, with no per-fork migration.
        self.cgroup = isolation.PidsCgroup.try_create(
            isolation.pids_cgroup_name(self.host_pid), MAX_PROCESSES + OWN_PROCESSES
        )
        if self.cgroup is not None:
            self.cgroup.enter()
        self.memory = memcg.MemoryCgroup.try_create(memcg.cgroup_name(self.host_pid))
        if self.memory is not None:
            self.memory.enter()
        else:  # a container: its own cgroup's limit holds, and its OOM kills are still told apart
            self.memory = memcg.MemoryCgroup.watch_own()

    def _protect_from_oom_killer(self) -> None:
        # The OOM killer's last choice, the worker (lowering a score needs CAP_SYS_RESOURCE, which this
        # machine's root may lack); each runner raises its own to the top, which needs nothing.
        self.oom_protected = memcg.set_oom_score(memcg.OOM_SCORE_WORKER) or _oom_score() < memcg.OOM_SCORE_RUNNER
        # Each runner's OOM score is raised by the worker, just after the fork: in the fresh fork the
        # same write would cost page faults, a noticeable share of a fork's throughput.
        self._raise_oom_score = self.memory is not None and self.oom_protected

    def _make_scratch(self, scratch: str | None, scratch_is_private: bool) -> None:
        root = os.geteuid() == 0
        # Given by potrun, which removes it even if this worker is killed; or our own.
        self.scratch = scratch or temporary_directory()
        self.minimal_root = False
        if root and not scratch_is_private:
            self.minimal_root = build_minimal_root(self.scratch)
        if self.minimal_root:
            self.scratch = namespace.SCRATCH
            self.mounted_scratch = self.private_scratch = True
        elif scratch_is_private:
            # A container's /tmp is a small tmpfs of its own already, but world-writable (docker copies
            # the image's 1777 onto it): a place where one program could leave notes for the next.
            # Runners pass through it to their own folder, no more.
            self.mounted_scratch = False
            self.private_scratch = True
            if root and not scratch:
                os.chmod(os.path.dirname(self.scratch), 0o711)
        else:  # on the host, mount one
            self.mounted_scratch = isolation.mount_private_scratch(self.scratch)
            self.private_scratch = self.mounted_scratch
            if self.pid_namespace and self.mounted_scratch:
                namespace.mount_own_proc()  # the host's /proc would show the host's processes as ours

    def _prepare_runner_entry(self, uid_base: int | None) -> None:
        root = os.geteuid() == 0
        # A root worker hands its runners an unprivileged uid of their own. Where Python is not
        # readable by other users (it lives under /root), the worker's mount namespace opens the way to
        # it (the minimal root does so by itself); failing that, runners keep the one capability of
        # reading files.
        self.uid = uid_base + self.host_pid if root and uid_base is not None else None
        if self.uid is not None:
            os.chmod(self.scratch, 0o711)  # runners pass through to their own folder in it, no more
        if self.uid is not None and self.mounted_scratch and not isolation.python_reachable_by_others():
            isolation.open_paths_to_others(isolation.python_paths())
        read_anything = self.uid is not None and not isolation.python_reachable_by_others()
        processes_capped = self.cgroup is not None or isolation.under_pids_limit()
        self.entry = isolation.RunnerEntry(self.uid, read_anything, processes_capped)
        self.warm_scratch = self._own_directory("warm", self.entry.uid)  # emptied when the runner is replaced
        self.fork_scratch = os.path.join(self.scratch, "fork")  # made for each forked program, then removed

    def _drop_privileges(self) -> None:
        # Runners may write their scratch only (not even world-writable /tmp), and nothing they execute
        # gains a capability.
        if self.mounted_scratch and not self.minimal_root:
            isolation.make_files_read_only(self.scratch)
        if os.geteuid() == 0:
            keep = isolation.CAP_DAC_READ_SEARCH if self.entry.read_anything else None
            isolation.limit_capabilities(keep=keep)
        # Out of its runners' reach even where they share its uid (a worker that is not root).
        self.non_dumpable = isolation.set_non_dumpable()

    def _own_directory(self, name: str, uid: int | None) -> str:
        """A new directory under the worker's scratch, owned by `uid` (a runner's) and closed to
        every other (the warm runner's to forks, a fork's to the warm runner). One left behind (a
        program made it impossible to remove) stops the worker, rather than be reused."""
        path = os.path.join(self.scratch, name)
        os.mkdir(path, 0o700)
        if uid is not None:
            os.chown(path, uid, uid)
        return path

    def capabilities(self) -> isolation.Capabilities:
        return isolation.Capabilities(
            network_namespace=self.network_isolated,
            private_scratch=self.private_scratch,
            read_only_files=bool(os.statvfs("/").f_flag & os.ST_RDONLY),
            pids_cgroup=self.cgroup is not None,
            drop_privileges=self.uid is not None,
            reads_all_files=self.entry.read_anything,
            subreaper=self.subreaper,
            minimal_root=self.minimal_root,
            pid_namespace=self.pid_namespace or os.getpid() == 1,  # (a container's init is ours too)
            memory_cgroup=self.memory is not None and self.memory.owned,
            non_dumpable=self.non_dumpable,
            seccomp=self.seccomp,
            uts_namespace=self.uts_isolated or _fixed_hostname(),
        )

    def release(self) -> None:
        """What the worker undoes when it ends: strays killed, its scratch, its cgroups."""
        if self.subreaper:
            isolation.kill_strays(set(), self._children)
        self._children.close()
        if not self.minimal_root:  # (a minimal root, its scratch included, goes with the namespace)
            if self.mounted_scratch:
                isolation.unmount(self.scratch)  # its files go with it
            remove_tree(self.scratch)
        if self.cgroup is not None:
            self.cgroup.remove()
        if self.memory is not None:
            self.memory.close()  # (potrun removes the cgroup: the worker is still in it)


def _fixed_hostname() -> bool:
    """Is the machine's name potrun's fixed one (a container named by `docker.container_options`)?"""
    return os.uname().nodename.encode() == isolation.HOSTNAME


def _oom_score() -> int:
    try:
        with open("/proc/self/oom_score_adj", encoding="ascii") as score:
            return int(score.read())
    except (OSError, ValueError):
        return 0
