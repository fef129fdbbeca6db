"""SandboxFusion's `/run_code`, as bytedance/SandboxFusion's server reads and answers it
(`sandbox/server/sandbox_api.py`, `sandbox/runners/types.py`), for `language` "python".

Request: `code`, `language`, `run_timeout` (10), `memory_limit_MB` (-1: the service's own limit),
`stdin` (None), `files` (path -> base64, None skipped), `compile_timeout` and `fetch_files` (read, not
used: Python compiles nothing, and no file is fetched back). Response::

    {"status": "Success" | "Failed" | "SandboxError", "message": "", "compile_result": null,
     "run_result": {"status": "Finished" | "TimeLimitExceeded" | "Error", "execution_time": 0.01,
                    "return_code": 0, "stdout": "...", "stderr": "..."},
     "executor_pod_name": null, "files": {}}

A program that ends normally (status ok or no_answer, or `sys.exit(0)`) has return code 0; `sys.exit(code)`
the status Python would end with (`ExecResult.exit_code`: 256 is 0, '0' is 1 with the text on stderr); one that
raised, was refused or ran out of memory or output has 1 and its error as the last line of stderr, as
Python's would end; a timeout is `TimeLimitExceeded` with no return code. potrun's own failure
(`sandbox_error`) is `SandboxError`. `run_timeout` is the CPU limit (the wall-clock net is 5 times it:
docs/usage.md, "Options"). stdout and stderr come back whole, up to the output limit (`full_output`).

A language SandboxFusion knows but this service does not run is answered as SandboxFusion answers a
runner's failure (status SandboxError, the reason in message); one it does not know, or a request
without `code`, as its FastAPI server answers a validation error: 422 with `{"detail": [...]}`.
"""

from __future__ import annotations

import binascii
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from potrun.options import unknown_option
from potrun.types import ExecResult, Status

# SandboxFusion's `Language` literal (sandbox/runners/types.py).
LANGUAGES = (
    "python", "cpp", "nodejs", "go", "go_test", "java", "php", "csharp", "bash", "typescript", "sql", "rust",
    "cuda", "lua", "R", "perl", "D_ut", "ruby", "scala", "julia", "pytest", "junit", "kotlin_script", "jest",
    "verilog", "python_gpu", "lean", "swift", "racket",
)  # fmt: skip
SUPPORTED = frozenset({"python"})
# RunCodeRequest's fields (sandbox-fusion's client sends them all; verl's adds memory_limit_MB)
REQUEST_FIELDS = (
    "compile_timeout",
    "run_timeout",
    "memory_limit_MB",
    "code",
    "stdin",
    "language",
    "files",
    "fetch_files",
)
_ENDED = frozenset({Status.OK, Status.NO_ANSWER})


class InvalidRequest(Exception):
    """A request FastAPI's validation would refuse; `detail` is its 422 body's list."""

    def __init__(self, detail: list[dict[str, Any]]) -> None:
        super().__init__(detail[0]["msg"])
        self.detail = detail


class Unsupported(Exception):
    """A request SandboxFusion would accept that this service cannot run (its SandboxError)."""


@dataclass(frozen=True, slots=True)
class RunCode:
    """One `/run_code` request, read: `Sandbox.run` keyword arguments."""

    code: str
    timeout: float
    memory_mb: int | None
    stdin: str | None
    files: dict[str, bytes]


def read_request(body: Any) -> RunCode:
    """The request in a JSON body, checked as SandboxFusion's pydantic model checks it."""
    if not isinstance(body, Mapping):
        raise InvalidRequest([_error("dict_type", [], "Input should be a valid dictionary", body)])
    for name in body:  # a misspelt run_timeout must not run under the default in silence
        if name not in REQUEST_FIELDS:
            message = str(unknown_option(name, REQUEST_FIELDS, "SandboxFusion's RunCodeRequest"))
            raise InvalidRequest([_error("extra_forbidden", [str(name)[:60]], message, None)])
    code = body.get("code")
    if not isinstance(code, str):
        raise InvalidRequest([_error("missing" if code is None else "string_type", ["code"], "Field required", code)])
    language = body.get("language")
    if language not in LANGUAGES:
        message = "Input should be " + ", ".join(f"'{name}'" for name in LANGUAGES)
        raise InvalidRequest([_error("literal_error", ["language"], message, language)])
    if language not in SUPPORTED:
        raise Unsupported(f"language {language!r} is not supported by potrun serve: python only")
    timeout = _number(body, "run_timeout", 10.0)
    memory = _number(body, "memory_limit_MB", -1)
    stdin = body.get("stdin")
    if stdin is not None and not isinstance(stdin, str):
        raise InvalidRequest([_error("string_type", ["stdin"], "Input should be a valid string", stdin)])
    return RunCode(code, timeout, int(memory) if memory > 0 else None, stdin, _files(body.get("files") or {}))


def _number(body: Mapping[str, Any], name: str, default: float) -> float:
    value = body.get(name, default)
    if type(value) not in (int, float) or not math.isfinite(value) or (name == "run_timeout" and value <= 0):
        raise InvalidRequest([_error("float_parsing", [name], "Input should be a valid positive number", value)])
    return float(value)


def _files(files: Any) -> dict[str, bytes]:
    """name -> content, from SandboxFusion's name -> base64 (a None content is skipped, as it does)."""
    if not isinstance(files, Mapping):
        raise InvalidRequest([_error("dict_type", ["files"], "Input should be a valid dictionary", files)])
    decoded = {}
    for name, content in files.items():
        if content is None:
            continue
        if not isinstance(content, str):
            raise InvalidRequest([_error("string_type", ["files", name], "Input should be a valid string", content)])
        try:
            decoded[name] = binascii.a2b_base64(content)
        except binascii.Error as exc:
            raise Unsupported(f"file {name!r}: not base64 ({exc})") from None
    return decoded


def _error(kind: str, location: list[Any], message: str, given: Any) -> dict[str, Any]:
    return {"type": kind, "loc": ["body", *location], "msg": message, "input": given if _plain(given) else None}


def _plain(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def response(result: ExecResult) -> dict[str, Any]:
    """SandboxFusion's RunCodeResponse for a program's ExecResult."""
    if result.status is Status.SANDBOX_ERROR:
        return sandbox_error(f"potrun's sandbox failed: {result.error or result.error_type or 'no detail'}")
    timed_out = result.status is Status.TIMEOUT
    code = None if timed_out else return_code(result)
    run = {
        "status": "TimeLimitExceeded" if timed_out else "Finished",
        "execution_time": result.wall_s,
        "return_code": code,
        "stdout": result.stdout,
        "stderr": result.stderr + _error_line(result),
    }
    status = "Success" if code == 0 else "Failed"
    return {
        "status": status,
        "message": "",
        "compile_result": None,
        "run_result": run,
        "executor_pod_name": None,
        "files": {},
    }


def sandbox_error(message: str) -> dict[str, Any]:
    """SandboxFusion's answer when its runner failed."""
    return {
        "status": "SandboxError",
        "message": message,
        "compile_result": None,
        "run_result": None,
        "executor_pod_name": None,
        "files": {},
    }


def return_code(result: ExecResult) -> int:
    """The exit status Python would have ended the program with."""
    if result.status in _ENDED:
        return 0
    if result.exit_code is not None:  # sys.exit(code): the runner's status, as data (never its text)
        return result.exit_code
    return 1


def _error_line(result: ExecResult) -> str:
    """How Python's traceback would end, for a program that did not end normally."""
    if result.status in _ENDED or result.status is Status.TIMEOUT or return_code(result) == 0:
        return ""
    if result.exit_code is not None:  # sys.exit('text'): Python prints the text alone; an int, nothing
        return f"{result.error}\n" if result.exit_code == 1 and result.error else ""
    kind = result.error_type or result.status.value
    return f"{kind}: {result.error}\n" if result.error else f"{kind}\n"
