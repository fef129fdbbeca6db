"""The process backend: workers are local processes (`python -s -P -m potrun.sandbox.worker`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

from potrun.sandbox.isolation import SAFE_ENVIRONMENT


class ProcessWorker:
    """A worker process and its pipes. Killing it kills its whole session: runners included."""

    def __init__(self, slot: int, hash_seed: int, preload: tuple[str, ...] | None) -> None:
        # -s -P, not -I: -I implies -E, which would ignore the PYTHONHASHSEED we set. The environment is
        # ours entirely (SAFE_ENVIRONMENT), so nothing else from PYTHON* can leak in.
        # The worker's scratch directory is made here and removed in kill(), as workers are killed.
        self.scratch = tempfile.mkdtemp(prefix="potrun-worker-")
        command = [sys.executable, "-s", "-P", "-m", "potrun.sandbox.worker", "--slot", str(slot),
                   "--scratch", self.scratch]  # fmt: skip
        if preload is not None:
            command += ["--preload", ",".join(preload)]
        self.cwd = tempfile.gettempdir()
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**SAFE_ENVIRONMENT, "PYTHONHASHSEED": str(hash_seed)},
            cwd=self.cwd,
            start_new_session=True,
            bufsize=0,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self._in = self.process.stdin.fileno()
        self._out = self.process.stdout.fileno()
        os.set_blocking(self._in, False)

    def read_fd(self) -> int:
        return self._out

    def write_fd(self) -> int:
        return self._in

    def read(self) -> bytes:
        return os.read(self._out, 1 << 16)

    def write(self, data: bytes) -> int:
        try:
            return os.write(self._in, data)
        except BlockingIOError:
            return 0

    def kill(self) -> None:
        try:
            os.killpg(self.process.pid, 9)
        except (ProcessLookupError, PermissionError):
            pass
        self.process.wait()
        shutil.rmtree(self.scratch, ignore_errors=True)
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass


class ProcessBackend:
    name = "process"

    def __init__(self, hash_seed: int = 0, preload: tuple[str, ...] | None = None) -> None:
        self.hash_seed = hash_seed
        self.preload = preload

    def start_worker(self, slot: int) -> ProcessWorker:
        return ProcessWorker(slot, self.hash_seed, self.preload)

    def close(self) -> None:
        pass
