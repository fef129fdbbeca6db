"""A fork's life: read its request, stage its inputs, run its one program, answer. Moved out of the
worker (#40)."""

from __future__ import annotations

import math
import os
import sys
from typing import Any

from potrun.sandbox.inside import forkserver
from potrun.sandbox.inside.answers import ANSWER, PRELOAD_ON_DEMAND, RECYCLE
from potrun.sandbox.inside.runner import AuditHook, Runner
from potrun.sandbox.wire.protocol import RunRequest, dumps, frame, request_message, write_all


def run_one(runner: Runner, request: RunRequest, audit_hook: AuditHook | None) -> None:
    """A fork's life: one program, one answer (`runner.send`, set by the worker: `send_forked`)."""
    code = 0
    try:
        if audit_hook is not None:
            sys.addaudithook(audit_hook)
        result, recycle = runner.run(request)
        runner.send(result, recycle)  # type: ignore[misc,arg-type]
    except BaseException:
        code = 70
    finally:
        os._exit(code)


def stage_inputs(request: RunRequest) -> None:
    """In a fork that entered its sandbox: the request's files, written into its directory as the
    program's own writes (its uid, its file size limit, its tmpfs), and its stdin, a memfd on
    descriptor 0 (a real file: `sys.stdin`, `input()` and `os.read(0, n)` all read it). Names were
    checked (`check_file_name`) and sizes bounded (INPUT_LIMIT) when the request was read."""
    try:
        for name, content in request.files:
            directory = os.path.dirname(name)
            if directory:
                os.makedirs(directory, exist_ok=True)
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
            write_all(fd, content)
            os.close(fd)
        if request.stdin is not None:
            fd = os.memfd_create("stdin")
            write_all(fd, request.stdin.encode())
            os.lseek(fd, 0, os.SEEK_SET)
            os.dup2(fd, 0)
            os.close(fd)
    except BaseException:
        os._exit(70)


def read_request(fd: int, runner: Runner) -> RunRequest:
    """In a new fork: its request (checked by the worker already) and its compiled code, which the
    runner adopts, from the memfd the worker wrote them into."""
    try:
        body, compiled = forkserver.read_request(fd)
        request = request_message(body)
        runner.adopt(request.source, compiled)
        return request
    except BaseException:
        os._exit(70)


def send_forked(results: int, modules: int, message: dict[str, Any], recycle: bool) -> None:
    """A fork's answer, its stamp unused (the worker waits for it). Which PRELOAD_ON_DEMAND modules the
    fork holds is looked up only if it imported any module: the worker held `modules` at the fork."""
    held = 0
    if len(sys.modules) != modules:
        held = sum(1 << bit for bit, name in enumerate(PRELOAD_ON_DEMAND) if name in sys.modules)
    body = dumps(message)
    write_all(results, frame(ANSWER.pack(RECYCLE if recycle else 0, math.inf, math.nan, held) + body))
